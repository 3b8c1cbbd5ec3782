package eventstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestAppendThenLoadReturnsRecordsInOrder(t *testing.T) {
	_, s := newMemStore(t)
	k := Key{Type: "thing", ID: "t1"}
	before := time.Now().UTC().Add(-time.Second)

	p1 := mustAppend(t, s, k, Position{}, Event{Type: evOpened, Data: note{Text: "open"}})
	if p1.Version != 1 || p1.Sequence == 0 {
		t.Fatalf("first append position = %+v", p1)
	}
	p2 := mustAppend(t, s, k, p1, noteEv("a", 1))
	p3 := mustAppend(t, s, k, p2, noteEv("b", 2), noteEv("c", 3))
	if p3.Version != 4 {
		t.Fatalf("after batch position = %+v, want version 4", p3)
	}
	// Another aggregate in between must not disturb the chain.
	mustAppend(t, s, Key{Type: "thing", ID: "other"}, Position{}, noteEv("x", 0))
	p4 := mustAppend(t, s, k, p3, Event{Type: evClosed, Data: nil})

	recs, pos := mustLoad(t, s, k)
	if pos != p4 {
		t.Fatalf("load position %+v, want %+v", pos, p4)
	}
	wantTypes := []string{evOpened, evNoted, evNoted, evNoted, evClosed}
	if len(recs) != len(wantTypes) {
		t.Fatalf("got %d records, want %d", len(recs), len(wantTypes))
	}
	var prevSeq uint64
	for i, r := range recs {
		if r.AggregateVersion != uint64(i+1) {
			t.Errorf("record %d version %d", i, r.AggregateVersion)
		}
		if r.Type != wantTypes[i] || r.Key != k || r.EventID == "" || r.SchemaVersion != 1 || r.StoredSchema != 1 {
			t.Errorf("record %d = %+v", i, r)
		}
		if r.Sequence <= prevSeq {
			t.Errorf("record %d sequence %d not after %d", i, r.Sequence, prevSeq)
		}
		prevSeq = r.Sequence
		if r.Time.Location() != time.UTC || r.Time.Before(before) {
			t.Errorf("record %d time %v", i, r.Time)
		}
	}
	if got := payloadNote(t, recs[3]); got != (note{Text: "c", N: 3}) {
		t.Errorf("payload of version 4 = %+v", got)
	}
	if string(recs[4].Payload) != "null" {
		t.Errorf("nil data stored as %s", recs[4].Payload)
	}
}

func TestLoadOfEmptyAggregateIsNotAnError(t *testing.T) {
	_, s := newMemStore(t)
	recs, pos, err := s.Load(testCtx(t), Key{Type: "thing", ID: "nobody"})
	if err != nil || len(recs) != 0 || pos != (Position{}) {
		t.Fatalf("Load(empty) = %v, %+v, %v", recs, pos, err)
	}
}

func TestConcurrentAppendsAtSamePositionExactlyOneWins(t *testing.T) {
	const writers = 50
	for _, tc := range []struct {
		name      string
		callerIDs bool // caller-chosen ids take the read-back path on conflict
		seed      int  // events already in the aggregate
	}{
		{name: "create race on empty subject", seed: 0},
		{name: "race at version 3", seed: 3},
		{name: "race at version 3 with caller ids", seed: 3, callerIDs: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, s := newMemStore(t)
			k := Key{Type: "thing", ID: "contended"}
			var at Position
			for i := 0; i < tc.seed; i++ {
				at = mustAppend(t, s, k, at, noteEv("seed", i))
			}
			ctx := testCtx(t)

			type result struct {
				pos Position
				err error
				id  string
			}
			results := make([]result, writers)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ev := noteEv(fmt.Sprintf("writer %d", w), w)
					if tc.callerIDs {
						ev.ID = NewEventID()
					}
					<-start
					pos, err := s.Append(ctx, k, at, ev)
					results[w] = result{pos, err, ev.ID}
				}()
			}
			close(start)
			wg.Wait()

			var winners []int
			for w, r := range results {
				if r.err == nil {
					winners = append(winners, w)
				}
			}
			if len(winners) != 1 {
				t.Fatalf("%d winners, want exactly 1 (results %+v)", len(winners), results)
			}
			won := results[winners[0]].pos
			if want := (Position{Sequence: won.Sequence, Version: at.Version + 1}); won != want {
				t.Fatalf("winner position %+v, want version %d", won, at.Version+1)
			}
			for w, r := range results {
				if w == winners[0] {
					continue
				}
				var ce *ConflictError
				if !errors.Is(r.err, ErrConflict) || !errors.As(r.err, &ce) {
					t.Fatalf("writer %d: err = %v, want a *ConflictError", w, r.err)
				}
				if ce.Actual != won || ce.Expected != at || ce.Key != k {
					t.Fatalf("writer %d: conflict %+v, want actual %+v", w, ce, won)
				}
			}

			recs, pos := mustLoad(t, s, k)
			if pos != won || len(recs) != tc.seed+1 {
				t.Fatalf("after race: %d records at %+v, want %d at %+v", len(recs), pos, tc.seed+1, won)
			}
			if got := payloadNote(t, recs[tc.seed]).N; got != winners[0] {
				t.Fatalf("stored event is writer %d's, winner was %d", got, winners[0])
			}
			if lastSeq(t, s) != won.Sequence {
				t.Fatalf("stream holds more than the winner's event: last seq %d, winner %d", lastSeq(t, s), won.Sequence)
			}
		})
	}
}

func TestAtomicBatchIsAllOrNothingUnderConflict(t *testing.T) {
	_, s := newMemStore(t)
	k := Key{Type: "thing", ID: "batched"}
	at := mustAppend(t, s, k, Position{}, Event{Type: evOpened})
	ctx := testCtx(t)

	// Two decisions race from the same position, three events each.
	const racers = 8
	errs := make([]error, racers)
	poss := make([]Position, racers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for r := 0; r < racers; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			poss[r], errs[r] = s.Append(ctx, k, at, noteEv("r", r*10+1), noteEv("r", r*10+2), noteEv("r", r*10+3))
		}()
	}
	close(start)
	wg.Wait()

	winner := -1
	for r, err := range errs {
		switch {
		case err == nil && winner == -1:
			winner = r
		case err == nil:
			t.Fatalf("two batches won: %d and %d", winner, r)
		case !errors.Is(err, ErrConflict):
			t.Fatalf("racer %d: %v, want conflict", r, err)
		}
	}
	if winner < 0 {
		t.Fatal("no batch won")
	}
	if want := (Position{Sequence: at.Sequence + 3, Version: 4}); poss[winner] != want {
		t.Fatalf("winner position %+v, want %+v", poss[winner], want)
	}
	recs, pos := mustLoad(t, s, k)
	if len(recs) != 4 || pos != poss[winner] {
		t.Fatalf("%d records at %+v after race", len(recs), pos)
	}
	for i, r := range recs[1:] {
		if n := payloadNote(t, r).N; n != winner*10+i+1 {
			t.Fatalf("version %d holds event %d, not the winner's batch", r.AggregateVersion, n)
		}
	}

	// A batch refused in the middle (one id already stored) stores nothing.
	dupID := recs[2].EventID
	before := lastSeq(t, s)
	_, err := s.Append(ctx, k, pos, noteEv("fresh", 1), Event{ID: dupID, Type: evNoted, Data: note{}}, noteEv("fresh", 3))
	if !errors.Is(err, ErrEventIDReused) {
		t.Fatalf("batch with a stored id: %v, want ErrEventIDReused", err)
	}
	if after := lastSeq(t, s); after != before {
		t.Fatalf("refused batch stored something: last seq %d -> %d", before, after)
	}
}

func TestRetryingOwnLandedAppendIsSuccessNotConflict(t *testing.T) {
	// A single server checks the expectation before de-duplication, so the
	// retry is refused with 10071; the read-back must turn it into success.
	_, s := newMemStore(t)
	k := Key{Type: "thing", ID: "retry"}
	at := mustAppend(t, s, k, Position{}, Event{Type: evOpened})

	single := noteEv("once", 1)
	single.ID = NewEventID()
	p1 := mustAppend(t, s, k, at, single)
	again := mustAppend(t, s, k, at, single)
	if again != p1 {
		t.Fatalf("retry position %+v, want %+v", again, p1)
	}

	batch := []Event{noteEv("b", 1), noteEv("b", 2)}
	batch[0].ID, batch[1].ID = NewEventID(), NewEventID()
	p2 := mustAppend(t, s, k, p1, batch...)
	// Someone else appends after our batch landed; the retry still finds it.
	p3 := mustAppend(t, s, k, p2, noteEv("later", 9))
	again = mustAppend(t, s, k, p1, batch...)
	if again != p2 {
		t.Fatalf("batch retry position %+v, want %+v", again, p2)
	}

	recs, pos := mustLoad(t, s, k)
	if len(recs) != 5 || pos != p3 {
		t.Fatalf("%d records at %+v, want 5 at %+v (retries must not duplicate)", len(recs), pos, p3)
	}
}

func TestAppendRefusesBadInputWithoutWriting(t *testing.T) {
	_, s := newMemStore(t)
	ctx := testCtx(t)
	k := Key{Type: "thing", ID: "x"}
	at := mustAppend(t, s, k, Position{}, Event{Type: evOpened})
	before := lastSeq(t, s)

	tooMany := make([]Event, MaxEventsPerAppend+1)
	for i := range tooMany {
		tooMany[i] = noteEv("n", i)
	}
	for _, tc := range []struct {
		name string
		key  Key
		at   Position
		evs  []Event
		want error
	}{
		{"empty type", Key{"", "x"}, Position{}, []Event{noteEv("a", 1)}, ErrInvalidKey},
		{"empty id", Key{"thing", ""}, Position{}, []Event{noteEv("a", 1)}, ErrInvalidKey},
		{"dot in id", Key{"thing", "a.b"}, Position{}, []Event{noteEv("a", 1)}, ErrInvalidKey},
		{"star in type", Key{"th*ng", "x"}, Position{}, []Event{noteEv("a", 1)}, ErrInvalidKey},
		{"gt in id", Key{"thing", ">"}, Position{}, []Event{noteEv("a", 1)}, ErrInvalidKey},
		{"space in id", Key{"thing", "a b"}, Position{}, []Event{noteEv("a", 1)}, ErrInvalidKey},
		{"tab in type", Key{"th\ting", "x"}, Position{}, []Event{noteEv("a", 1)}, ErrInvalidKey},
		{"no events", k, at, nil, ErrInvalidEvent},
		{"too many events", k, at, tooMany, ErrInvalidEvent},
		{"unknown type", k, at, []Event{{Type: "mystery"}}, ErrUnknownEventType},
		{"unknown type late in batch", k, at, []Event{noteEv("a", 1), {Type: "mystery"}}, ErrUnknownEventType},
		{"repeated id", k, at, []Event{{ID: "01J0000000000000000000000A", Type: evNoted}, {ID: "01J0000000000000000000000A", Type: evNoted}}, ErrInvalidEvent},
		{"id with space", k, at, []Event{{ID: "a b", Type: evNoted}}, ErrInvalidEvent},
		{"invalid json.RawMessage", k, at, []Event{{Type: evNoted, Data: jsonRaw("{")}}, ErrInvalidEvent},
		{"sequence without version", k, Position{Sequence: at.Sequence}, []Event{noteEv("a", 1)}, ErrInvalidPosition},
		{"version without sequence", k, Position{Version: 1}, []Event{noteEv("a", 1)}, ErrInvalidPosition},
		{"version above sequence", k, Position{Sequence: 1, Version: 7}, []Event{noteEv("a", 1)}, ErrInvalidPosition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Append(ctx, tc.key, tc.at, tc.evs...)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if after := lastSeq(t, s); after != before {
				t.Fatalf("refused append wrote: last seq %d -> %d", before, after)
			}
		})
	}
}

func jsonRaw(s string) json.RawMessage { return json.RawMessage(s) }

func TestConflictCarriesActualPositionForStaleWriter(t *testing.T) {
	_, s := newMemStore(t)
	k := Key{Type: "thing", ID: "stale"}
	p1 := mustAppend(t, s, k, Position{}, Event{Type: evOpened})
	p2 := mustAppend(t, s, k, p1, noteEv("a", 1))
	p3 := mustAppend(t, s, k, p2, noteEv("b", 2))

	for _, at := range []Position{{}, p1, p2} {
		_, err := s.Append(testCtx(t), k, at, noteEv("late", 0))
		var ce *ConflictError
		if !errors.As(err, &ce) || ce.Actual != p3 {
			t.Fatalf("append at %+v: %v, want conflict with actual %+v", at, err, p3)
		}
	}
	// Expecting events that do not exist is a conflict too.
	_, err := s.Append(testCtx(t), Key{Type: "thing", ID: "ghost"}, p3, noteEv("x", 0))
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Actual != (Position{}) {
		t.Fatalf("append to empty aggregate at %+v: %v, want conflict with zero actual", p3, err)
	}
}

func TestLoadRefusesABrokenChain(t *testing.T) {
	e, s := newMemStore(t)
	k := Key{Type: "thing", ID: "forged"}
	at := mustAppend(t, s, k, Position{}, Event{Type: evOpened})

	// A raw publish that skips a version, as a buggy or foreign writer might.
	nc := connect(t, e)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(s.Subject(k))
	m.Data = []byte(`{}`)
	m.Header.Set(HeaderEventID, NewEventID())
	m.Header.Set(HeaderEventType, evNoted)
	m.Header.Set(HeaderSchema, "1")
	m.Header.Set(HeaderVersion, "3")
	m.Header.Set(HeaderPrevSeq, fmt.Sprint(at.Sequence))
	if _, err := js.PublishMsg(testCtx(t), m); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Load(testCtx(t), k); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Load of a chain with a gap: %v, want ErrCorrupt", err)
	}
}

func TestFileStorageSurvivesServerRestart(t *testing.T) {
	dir := t.TempDir()
	start := func() (*Embedded, *Store) {
		e, err := StartEmbedded(EmbeddedConfig{StoreDir: dir, SyncAlways: true})
		if err != nil {
			t.Fatalf("start: %v", err)
		}
		nc, err := e.Connect()
		if err != nil {
			e.Shutdown()
			t.Fatalf("connect: %v", err)
		}
		s, err := Open(testCtx(t), nc, Config{}, testRegistry())
		if err != nil {
			nc.Close()
			e.Shutdown()
			t.Fatalf("open: %v", err)
		}
		return e, s
	}

	e, s := start()
	k := Key{Type: "thing", ID: "durable"}
	other := Key{Type: "other", ID: "noise"}
	at := mustAppend(t, s, k, Position{}, Event{Type: evOpened, Data: note{Text: "hello"}})
	mustAppend(t, s, other, Position{}, noteEv("noise", 0))
	at = mustAppend(t, s, k, at, noteEv("a", 1), noteEv("b", 2))
	at = mustAppend(t, s, k, at, Event{Type: evClosed})
	before, beforePos := mustLoad(t, s, k)
	s.nc.Close()
	e.Shutdown()

	e, s = start()
	defer e.Shutdown()
	defer s.nc.Close()
	after, afterPos := mustLoad(t, s, k)
	if afterPos != beforePos || !reflect.DeepEqual(before, after) {
		t.Fatalf("after restart:\n got %+v at %+v\nwant %+v at %+v", after, afterPos, before, beforePos)
	}
	// The aggregate goes on where it stopped.
	next := mustAppend(t, s, k, at, noteEv("after restart", 5))
	if next.Version != 5 {
		t.Fatalf("append after restart at version %d, want 5", next.Version)
	}
}
