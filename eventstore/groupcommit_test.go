package eventstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// heldGroup gives s a group commit whose first send waits until release
// is called, so that the appends started meanwhile all wait behind it:
// what goes out next is decided, not raced. batch, if not nil, stands in
// for the batch send (it gets the real one).
type heldGroup struct {
	g       *groupCommit
	held    chan struct{} // closed once the first send is on the wire
	waiting chan struct{} // one value per append that waits
	release func()
}

func holdGroup(s *Store, batch func(ctx context.Context, msgs []*nats.Msg, real func(context.Context, []*nats.Msg) (batchAck, error)) (batchAck, error)) *heldGroup {
	gate := make(chan struct{})
	var once sync.Once
	var first sync.Once
	h := &heldGroup{held: make(chan struct{}), waiting: make(chan struct{}, 1024),
		release: func() { once.Do(func() { close(gate) }) }}
	h.g = &groupCommit{
		direct: func(ctx context.Context, msgs []*nats.Msg) (pubAck, error) {
			first.Do(func() { close(h.held); <-gate })
			return s.publish(ctx, msgs)
		},
		batch:    s.atomicBatch,
		minBatch: gcMinBatch,
		onWait:   func() { h.waiting <- struct{}{} },
	}
	if batch != nil {
		h.g.batch = func(ctx context.Context, msgs []*nats.Msg) (batchAck, error) { return batch(ctx, msgs, s.atomicBatch) }
	}
	s.send = h.g.send
	return h
}

// appendsBehind starts one append per key (at the given positions; the
// zero Position for a new aggregate) behind a held first append, waits
// until all of them wait, releases, and returns each append's outcome.
func appendsBehind(t *testing.T, s *Store, h *heldGroup, keys []Key, at []Position, evs [][]Event) ([]Position, []error) {
	t.Helper()
	ctx := testCtx(t)
	firstDone := make(chan error, 1)
	go func() {
		_, err := s.Append(ctx, Key{Type: "thing", ID: "first"}, Position{}, Event{Type: evOpened})
		firstDone <- err
	}()
	<-h.held
	pos := make([]Position, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		e := []Event{{Type: evOpened}}
		if evs != nil {
			e = evs[i]
		}
		wg.Go(func() { pos[i], errs[i] = s.Append(ctx, k, at[i], e...) })
	}
	for range keys {
		<-h.waiting
	}
	h.release()
	wg.Wait()
	if err := <-firstDone; err != nil {
		t.Fatalf("the held append: %v", err)
	}
	return pos, errs
}

// batchOf reads the batch id each stored message of keys was sent under.
func batchOf(t *testing.T, s *Store, pos []Position) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, p := range pos {
		m, err := s.stream.GetMsg(testCtx(t), p.Sequence)
		if err != nil {
			t.Fatal(err)
		}
		out[m.Header.Get(hdrBatchID)]++
	}
	return out
}

func keysN(n int, prefix string) ([]Key, []Position) {
	keys := make([]Key, n)
	for i := range keys {
		keys[i] = Key{Type: "thing", ID: fmt.Sprintf("%s-%02d", prefix, i)}
	}
	return keys, make([]Position, n)
}

func TestAppendsWaitingBehindOneGoOutAsOneBatchEachAtItsOwnPosition(t *testing.T) {
	_, s := newMemStore(t)
	h := holdGroup(s, nil)
	keys, at := keysN(40, "w")
	// Two of them carry two events: an append's events stay together.
	evs := make([][]Event, len(keys))
	for i := range evs {
		evs[i] = []Event{{Type: evOpened}}
		if i%20 == 7 {
			evs[i] = append(evs[i], noteEv("second", i))
		}
	}
	pos, errs := appendsBehind(t, s, h, keys, at, evs)
	for i, k := range keys {
		if errs[i] != nil {
			t.Fatalf("append %v: %v", k, errs[i])
		}
		recs := assertAggregate(t, s, k, pos[i], len(evs[i]))
		if recs[0].PrevSequence != 0 {
			t.Fatalf("%v: first event after %d", k, recs[0].PrevSequence)
		}
	}
	if b := batchOf(t, s, pos); len(b) != 1 || b[""] != 0 {
		t.Fatalf("the appends by batch id: %v; want one batch for all %d", b, len(keys))
	}
}

func TestFewAppendsWaitingGoOutAloneSideBySide(t *testing.T) {
	_, s := newMemStore(t)
	h := holdGroup(s, nil)
	keys, at := keysN(gcMinBatch-1, "few")
	pos, errs := appendsBehind(t, s, h, keys, at, nil)
	for i, k := range keys {
		if errs[i] != nil {
			t.Fatalf("append %v: %v", k, errs[i])
		}
		assertAggregate(t, s, k, pos[i], 1)
	}
	if b := batchOf(t, s, pos); len(b) != 1 || b[""] != len(keys) {
		t.Fatalf("the appends by batch id: %v; want all %d alone", b, len(keys))
	}
}

// One member the server refuses refuses the whole batch; each member then
// gets, alone, the answer it would have had without the batch: the stale
// one a conflict, the one whose events are already stored its landed
// position, the rest their slots.
func TestARefusedMemberCostsTheBatchNotTheOtherAppends(t *testing.T) {
	_, s := newMemStore(t)
	s.cfg.AmbiguousRetries = 0 // commit's own re-send must not stand in for the fallback
	stale := Key{Type: "thing", ID: "stale"}
	old := mustAppend(t, s, stale, Position{}, Event{Type: evOpened})
	now := mustAppend(t, s, stale, old, noteEv("moved on", 1))
	again := Key{Type: "thing", ID: "again"}
	retried := Event{ID: NewEventID(), Type: evOpened}
	landed := mustAppend(t, s, again, Position{}, retried)

	batches := 0
	h := holdGroup(s, func(ctx context.Context, msgs []*nats.Msg, real func(context.Context, []*nats.Msg) (batchAck, error)) (batchAck, error) {
		batches++
		return real(ctx, msgs)
	})
	keys, at := keysN(30, "r")
	evs := make([][]Event, len(keys))
	for i := range evs {
		evs[i] = []Event{{Type: evOpened}}
	}
	keys[5], at[5] = stale, old // a conflict: the aggregate moved on
	evs[5] = []Event{noteEv("late", 2)}
	keys[17], evs[17] = again, []Event{retried} // a retry of an append that landed
	pos, errs := appendsBehind(t, s, h, keys, at, evs)

	if batches != 1 {
		t.Fatalf("%d batches sent, want 1 (refused, then each alone)", batches)
	}
	var conflict *ConflictError
	if !errors.As(errs[5], &conflict) || conflict.Actual != now {
		t.Fatalf("the stale append: %v, want a conflict at %+v", errs[5], now)
	}
	if errs[17] != nil || pos[17] != landed {
		t.Fatalf("the retried append: %+v %v, want its landed position %+v", pos[17], errs[17], landed)
	}
	assertAggregate(t, s, again, landed, 1)
	assertAggregate(t, s, stale, now, 2)
	for i, k := range keys {
		if i == 5 || i == 17 {
			continue
		}
		if errs[i] != nil {
			t.Fatalf("append %v: %v", k, errs[i])
		}
		assertAggregate(t, s, k, pos[i], 1)
	}
}

// A batch stored without an answer leaves each member's outcome unknown
// to the batch; each append reads its own subject back and finds itself
// landed, without sending again.
func TestABatchWhoseAckIsLostIsSettledByEachAppendReadingBack(t *testing.T) {
	_, s := newMemStore(t)
	h := holdGroup(s, func(ctx context.Context, msgs []*nats.Msg, real func(context.Context, []*nats.Msg) (batchAck, error)) (batchAck, error) {
		if _, err := real(ctx, msgs); err != nil {
			return batchAck{}, err
		}
		return batchAck{}, nats.ErrTimeout
	})
	keys, at := keysN(20, "lost")
	before := lastSeq(t, s)
	pos, errs := appendsBehind(t, s, h, keys, at, nil)
	for i, k := range keys {
		if errs[i] != nil {
			t.Fatalf("append %v: %v", k, errs[i])
		}
		assertAggregate(t, s, k, pos[i], 1)
	}
	if got, want := lastSeq(t, s)-before, uint64(len(keys)+1); got != want {
		t.Fatalf("%d messages stored, want %d (nothing sent twice)", got, want)
	}
}

// Through Config.GroupCommit, on a real file store: many appends at once,
// each lands once at its own position, whatever the grouping.
func TestGroupCommitOnAFileStoreLandsEveryConcurrentAppendOnce(t *testing.T) {
	e, err := StartEmbedded(EmbeddedConfig{StoreDir: t.TempDir(), SyncAlways: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	s := openStore(t, connect(t, e), Config{GroupCommit: true}, testRegistry())
	ctx := testCtx(t)
	const n, each = 64, 3
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			k := Key{Type: "thing", ID: fmt.Sprintf("g-%02d", i)}
			at := Position{}
			for j := range each {
				var err error
				if at, err = s.Append(ctx, k, at, noteEv("step", j)); err != nil {
					errs <- fmt.Errorf("%v step %d: %w", k, j, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range n {
		k := Key{Type: "thing", ID: fmt.Sprintf("g-%02d", i)}
		recs, pos := mustLoad(t, s, k)
		if len(recs) != each || pos.Version != each {
			t.Fatalf("%v: %d events at %+v", k, len(recs), pos)
		}
		for j, r := range recs {
			if payloadNote(t, r).N != j {
				t.Fatalf("%v event %d is step %d", k, j, payloadNote(t, r).N)
			}
		}
	}
	if got := lastSeq(t, s); got != n*each {
		t.Fatalf("%d messages stored, want %d", got, n*each)
	}
}

// A message the client refuses (over max_payload) stops the batch before
// its commit goes out: nothing is stored, and each member is sent alone,
// so only the oversized append fails.
func TestAnOversizedAppendFailsAloneNotItsBatchMates(t *testing.T) {
	_, s := newMemStore(t)
	h := holdGroup(s, nil)
	keys, at := keysN(20, "big")
	evs := make([][]Event, len(keys))
	for i := range evs {
		evs[i] = []Event{{Type: evOpened}}
	}
	evs[19] = []Event{noteEv(strings.Repeat("x", int(s.nc.MaxPayload())+1), 1)}
	pos, errs := appendsBehind(t, s, h, keys, at, evs)
	if !errors.Is(errs[19], nats.ErrMaxPayload) {
		t.Fatalf("the oversized append: %v", errs[19])
	}
	assertAggregateLen(t, s, keys[19], 0)
	for i := range 19 {
		if errs[i] != nil {
			t.Fatalf("append %v failed for its batch-mate: %v", keys[i], errs[i])
		}
		assertAggregate(t, s, keys[i], pos[i], 1)
	}
}

// An append whose caller gives up while it waits for its turn leaves the
// queue: it returns at once, unsent, and is never stored.
func TestAnAppendGivenUpWhileWaitingIsNeverSent(t *testing.T) {
	_, s := newMemStore(t)
	h := holdGroup(s, nil)
	ctx := testCtx(t)
	first := make(chan error, 1)
	go func() {
		_, err := s.Append(ctx, Key{Type: "thing", ID: "first"}, Position{}, Event{Type: evOpened})
		first <- err
	}()
	<-h.held
	keys, _ := keysN(20, "gone")
	wctx, giveUp := context.WithCancel(ctx)
	errs := make(chan error, len(keys))
	for _, k := range keys {
		go func() {
			_, err := s.Append(wctx, k, Position{}, Event{Type: evOpened})
			errs <- err
		}()
	}
	for range keys {
		<-h.waiting
	}
	giveUp()
	for range keys { // before the held send is released
		select {
		case err := <-errs:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("an append given up while waiting: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("appends given up while waiting still wait for the held send")
		}
	}
	h.release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if got := lastSeq(t, s); got != 1 {
		t.Fatalf("%d messages stored, want only the held one", got)
	}
}

// Two appends to one aggregate waiting together would make the batch
// refuse itself (the second expects what the first changes): the second
// waits for the next round, and the batch goes through.
func TestASecondAppendToAnAggregateWaitsForTheNextBatch(t *testing.T) {
	_, s := newMemStore(t)
	refused := 0
	h := holdGroup(s, func(ctx context.Context, msgs []*nats.Msg, real func(context.Context, []*nats.Msg) (batchAck, error)) (batchAck, error) {
		ack, err := real(ctx, msgs)
		if err != nil {
			refused++
		}
		return ack, err
	})
	keys, at := keysN(20, "twice")
	keys[19] = keys[3] // both new: one of the two can land
	pos, errs := appendsBehind(t, s, h, keys, at, nil)
	if refused != 0 {
		t.Fatalf("%d batches refused", refused)
	}
	var conflict *ConflictError
	first, second := errs[3], errs[19]
	if (first == nil) == (second == nil) || !(errors.As(first, &conflict) || errors.As(second, &conflict)) {
		t.Fatalf("the two appends to %v: %v, %v; want one landed, one conflict", keys[3], first, second)
	}
	for i, k := range keys[:19] {
		if i == 3 {
			continue
		}
		if errs[i] != nil {
			t.Fatalf("append %v: %v", k, errs[i])
		}
		assertAggregate(t, s, k, pos[i], 1)
	}
}
