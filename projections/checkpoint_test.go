package projections

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/aggregate"
)

// someHistory writes a small history with open withdrawals in several
// states and returns the last sequence.
func someHistory(w *world, from int) uint64 {
	w.t.Helper()
	h := newHistory(w, uint64(from), 3)
	for range 60 {
		h.step()
	}
	return w.last()
}

func TestRestartFromCheckpointEqualsNeverStopped(t *testing.T) {
	w := newWorld(t)
	ctx := testCtx(t)
	cp := w.checkpoints()
	steady := w.start(Options{})

	// Readers run against the views while records are folded (the race
	// detector checks that every view reads under the lock).
	done, readers := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(readers)
		for {
			select {
			case <-done:
				return
			default:
			}
			now := minutes(60)
			_, _, _ = steady.PendingApprovals(), steady.Ready(now), steady.InFlight(now)
			_, _ = steady.Balances(), steady.Stats()
			_ = steady.Snapshot()
		}
	}()

	first := w.start(Options{Checkpoints: cp})
	seq := someHistory(w, 7)
	close(done)
	<-readers
	waitFor(t, first, seq)
	if err := first.Stop(ctx); err != nil {
		t.Fatalf("stop (final checkpoint): %v", err)
	}

	var logs logRecorder
	second := New(w.store, Options{Checkpoints: cp, Logger: logs.logger()})
	if err := second.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer second.Stop(context.Background())
	// Restoring is part of Start: the views are back before anything is
	// replayed, at exactly the checkpointed sequence.
	if got := second.Applied(); got < seq {
		t.Fatalf("applied right after Start = %d, want the checkpoint's %d", got, seq)
	}
	if !logs.has("restored checkpoint") || logs.has("discarding") {
		t.Fatalf("expected a restore, log:\n%s", logs.String())
	}

	more := someHistory(w, 8)
	waitFor(t, second, more)
	waitFor(t, steady, more)
	sameSnapshot(t, "restarted vs never stopped", steady.Snapshot(), second.Snapshot())
	sameSnapshot(t, "restarted vs rebuilt", w.rebuilt().Snapshot(), second.Snapshot())
}

// saveCounter is a Checkpoints that reports each save, so a test can wait
// for one without sleeping.
type saveCounter struct {
	Checkpoints
	saved chan uint64
}

func (s *saveCounter) Save(ctx context.Context, name string, data []byte) error {
	if err := s.Checkpoints.Save(ctx, name, data); err != nil {
		return err
	}
	doc, err := decodeCheckpoint(data)
	if err != nil {
		return err
	}
	s.saved <- doc.Snapshot.Applied
	return nil
}

func TestCheckpointEveryNRecords(t *testing.T) {
	w := newWorld(t)
	ctx := testCtx(t)
	sc := &saveCounter{Checkpoints: w.checkpoints(), saved: make(chan uint64, 100)}
	p := w.start(Options{Checkpoints: sc, CheckpointEvery: 10, CheckpointInterval: time.Hour})
	for i := range 25 {
		w.acct("acct-a", aggregate.Credit{Account: "acct-a", CreditID: fmt.Sprintf("c%d", i), Amount: usdt("1"), At: minutes(i)})
	}
	waitFor(t, p, 25)
	var at uint64
	select {
	case at = <-sc.saved:
	case <-ctx.Done():
		t.Fatal("no checkpoint after 25 records with CheckpointEvery 10")
	}
	if at < 10 {
		t.Fatalf("first checkpoint at seq %d, want ≥ 10", at)
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// Stop writes the final one, whatever the cadence.
	var final uint64
	for len(sc.saved) > 0 {
		final = <-sc.saved
	}
	if final != 25 {
		t.Fatalf("last checkpoint at seq %d, want 25 (the final one on Stop)", final)
	}
}

// Every checkpoint that cannot be trusted is discarded with a warning, and
// the projector replays the log from zero to the same views.
func TestUnusableCheckpointIsDiscardedLoudly(t *testing.T) {
	w := newWorld(t)
	ctx := testCtx(t)
	seq := someHistory(w, 11)
	want := w.rebuilt().Snapshot()
	good, err := encodeCheckpoint(checkpointDoc{Name: "views", Stream: w.store.StreamName(), Snapshot: want})
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(doc map[string]any)) []byte {
		var doc map[string]any
		if err := json.Unmarshal(good, &doc); err != nil {
			t.Fatal(err)
		}
		f(doc)
		b, _ := json.Marshal(doc)
		return b
	}
	snapField := func(k string, v any) func(map[string]any) {
		return func(doc map[string]any) { doc["snapshot"].(map[string]any)[k] = v }
	}

	cases := []struct {
		name string
		data []byte
		raw  func(kv jetstream.KeyValue) // tamper with the bucket after saving data
	}{
		{name: "not json", data: []byte("{not json")},
		{name: "unknown schema", data: edit(func(d map[string]any) { d["schema"] = 99 })},
		{name: "unknown member", data: edit(func(d map[string]any) { d["surprise"] = true })},
		{name: "another stream", data: edit(func(d map[string]any) { d["stream"] = "OTHER" })},
		{name: "beyond the log", data: edit(snapField("applied", seq+10))},
		{name: "another log at that sequence", data: edit(snapField("last_event_id", "01HZZZZZZZZZZZZZZZZZZZZZZZ"))},
		{name: "terminal withdrawal inside", data: edit(func(d map[string]any) {
			ws := d["snapshot"].(map[string]any)["withdrawals"].([]any)
			ws[0].(map[string]any)["withdrawal"].(map[string]any)["state"] = "confirmed"
		})},
		{name: "account balances that do not add up", data: edit(func(d map[string]any) {
			as := d["snapshot"].(map[string]any)["accounts"].([]any)
			as[0].(map[string]any)["available"] = "999999.000000"
		})},
		{name: "garbled head", data: good, raw: func(kv jetstream.KeyValue) {
			if _, err := kv.Put(ctx, "views", []byte("garbage")); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "torn part", data: good, raw: func(kv jetstream.KeyValue) {
			e, err := kv.Get(ctx, "views")
			if err != nil {
				t.Fatal(err)
			}
			var h kvHead
			_ = json.Unmarshal(e.Value(), &h)
			if _, err := kv.Put(ctx, partKey("views", h.Slot, 0), []byte("torn")); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cp := w.checkpoints()
			if err := cp.Save(ctx, "views", tc.data); err != nil {
				t.Fatal(err)
			}
			if tc.raw != nil {
				kv, err := w.js.KeyValue(ctx, DefaultCheckpointBucket)
				if err != nil {
					t.Fatal(err)
				}
				tc.raw(kv)
			}
			var logs logRecorder
			p := New(w.store, Options{Checkpoints: cp, Logger: logs.logger()})
			if err := p.Start(ctx); err != nil {
				t.Fatalf("start: %v", err)
			}
			defer p.Stop(context.Background())
			if !logs.has("level=WARN") || !logs.has("discarding checkpoint") {
				t.Fatalf("discarded without a warning; log:\n%s", logs.String())
			}
			waitFor(t, p, seq)
			sameSnapshot(t, "replayed after discarding", want, p.Snapshot())
		})
	}

	// The control: the same document untouched is restored, not replayed.
	cp := w.checkpoints()
	if err := cp.Save(ctx, "views", good); err != nil {
		t.Fatal(err)
	}
	var logs logRecorder
	p := New(w.store, Options{Checkpoints: cp, Logger: logs.logger()})
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(context.Background())
	if !logs.has("restored checkpoint") || p.Applied() != seq {
		t.Fatalf("a good checkpoint was not restored (applied %d); log:\n%s", p.Applied(), logs.String())
	}
}

func TestKVCheckpointsSplitLargeSnapshotsAcrossParts(t *testing.T) {
	w := newWorld(t)
	ctx := testCtx(t)
	cp := w.checkpoints()
	cp.partSize = 64 // force many parts

	if _, err := cp.Load(ctx, "big"); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("load of nothing: %v, want ErrNoCheckpoint", err)
	}
	// Incompressible-ish data so that it really spans parts.
	var big bytes.Buffer
	for i := range 2000 {
		fmt.Fprintf(&big, "%x,", uint64(i)*0x9e3779b97f4a7c15)
	}
	small := []byte(`{"small":true}`)
	for i, data := range [][]byte{big.Bytes(), small, big.Bytes()} {
		if err := cp.Save(ctx, "big", data); err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
		// A second handle (another process after a restart) reads it.
		got, err := w.checkpoints().Load(ctx, "big")
		if err != nil {
			t.Fatalf("load %d: %v", i, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("load %d: got %d bytes, want %d", i, len(got), len(data))
		}
	}
	if err := cp.Save(ctx, "no.dots", small); err == nil || !strings.Contains(err.Error(), "checkpoint name") {
		t.Fatalf("a name with a dot must be refused: %v", err)
	}
}

// The checkpoint bucket follows the stream's storage: a memory log gets a
// memory bucket, which dies with it.
func TestCheckpointBucketUsesTheStreamsStorage(t *testing.T) {
	w := newWorld(t)
	ctx := testCtx(t)
	w.checkpoints()
	kv, err := w.js.KeyValue(ctx, DefaultCheckpointBucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info := st.(*jetstream.KeyValueBucketStatus).StreamInfo()
	if info.Config.Storage != jetstream.MemoryStorage || info.Config.MaxMsgsPerSubject != 1 {
		t.Fatalf("bucket storage %v history %d, want memory and 1", info.Config.Storage, info.Config.MaxMsgsPerSubject)
	}
}
