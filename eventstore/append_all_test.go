package eventstore

import (
	"errors"
	"testing"
)

// Two aggregates in one atomic append: both land at their positions, or
// neither does when either has moved; a lost ack is settled by reading the
// first part back.
func TestAppendAllIsAtomicAcrossAggregates(t *testing.T) {
	ctx := testCtx(t)
	_, s := newMemStore(t)
	a, b := Key{Type: "thing", ID: "a"}, Key{Type: "thing", ID: "b"}
	pa := mustAppend(t, s, a, Position{}, Event{Type: evOpened})
	pb := mustAppend(t, s, b, Position{}, Event{Type: evOpened})

	got, err := s.AppendAll(ctx, Part{Key: a, Expected: pa, Events: []Event{noteEv("a1", 1)}},
		Part{Key: b, Expected: pb, Events: []Event{noteEv("b1", 1), noteEv("b2", 2)}})
	if err != nil {
		t.Fatal(err)
	}
	assertAggregate(t, s, a, got[0], 2)
	assertAggregate(t, s, b, got[1], 3)
	if got[1].Sequence != got[0].Sequence+2 {
		t.Fatalf("positions %+v", got)
	}

	// b moves; a batch still expecting b's old position lands nowhere.
	pb2 := mustAppend(t, s, b, got[1], noteEv("other", 9))
	_, err = s.AppendAll(ctx, Part{Key: a, Expected: got[0], Events: []Event{noteEv("a2", 2)}},
		Part{Key: b, Expected: got[1], Events: []Event{noteEv("b3", 3)}})
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Key != b || ce.Actual != pb2 {
		t.Fatalf("want a conflict on b at %+v, got %v", pb2, err)
	}
	assertAggregate(t, s, a, got[0], 2) // a untouched

	// Landed, ack lost: settled by the read-back, no second copy.
	calls := scripted(s, landedAckLost)
	got2, err := s.AppendAll(ctx, Part{Key: a, Expected: got[0], Events: []Event{noteEv("a2", 2)}},
		Part{Key: b, Expected: pb2, Events: []Event{noteEv("b4", 4)}})
	if err != nil {
		t.Fatal(err)
	}
	assertAggregate(t, s, a, got2[0], 3)
	assertAggregate(t, s, b, got2[1], 5)
	if calls.Load() != 1 {
		t.Fatalf("%d sends", calls.Load())
	}
	if _, err := s.AppendAll(ctx, Part{Key: a, Expected: got2[0], Events: []Event{noteEv("x", 1)}},
		Part{Key: a, Expected: got2[0], Events: []Event{noteEv("y", 1)}}); !errors.Is(err, ErrInvalidEvent) {
		t.Fatalf("same key twice: %v", err)
	}
}
