package eventstore

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
)

// sendFn is the shape of Store.send, the seam tests use to lose acks and
// messages at exact points.
type sendFn = func(ctx context.Context, msgs []*nats.Msg) (pubAck, error)

// scripted replaces s.send with steps run on successive sends; each step gets
// the real send. Sends past the script go through unchanged.
func scripted(s *Store, steps ...func(ctx context.Context, msgs []*nats.Msg, real sendFn) (pubAck, error)) *atomic.Int32 {
	real := s.send
	var calls atomic.Int32
	s.send = func(ctx context.Context, msgs []*nats.Msg) (pubAck, error) {
		n := int(calls.Add(1))
		if n <= len(steps) {
			return steps[n-1](ctx, msgs, real)
		}
		return real(ctx, msgs)
	}
	return &calls
}

// landedAckLost sends for real, then reports the ack as lost.
func landedAckLost(ctx context.Context, msgs []*nats.Msg, real sendFn) (pubAck, error) {
	if _, err := real(ctx, msgs); err != nil {
		return pubAck{}, err
	}
	return pubAck{}, nats.ErrTimeout
}

// droppedBeforeServer never sends and reports a timeout, as when the
// message dies on the way.
func droppedBeforeServer(context.Context, []*nats.Msg, sendFn) (pubAck, error) {
	return pubAck{}, nats.ErrTimeout
}

func TestAmbiguousAppendIsResolvedByReadBack(t *testing.T) {
	ctx := testCtx(t)
	k := Key{Type: "thing", ID: "ambiguous"}

	t.Run("landed, ack lost: success without a resend", func(t *testing.T) {
		_, s := newMemStore(t)
		at := mustAppend(t, s, k, Position{}, Event{Type: evOpened})
		calls := scripted(s, landedAckLost)
		pos, err := s.Append(ctx, k, at, noteEv("a", 1))
		if err != nil {
			t.Fatalf("append: %v", err)
		}
		assertAggregate(t, s, k, pos, 2)
		if calls.Load() != 1 {
			t.Fatalf("%d sends, want 1 (the read-back settles it)", calls.Load())
		}
	})

	t.Run("not landed: resent once with the same id, success", func(t *testing.T) {
		_, s := newMemStore(t)
		at := mustAppend(t, s, k, Position{}, Event{Type: evOpened})
		var firstID, secondID string
		calls := scripted(s,
			func(ctx context.Context, msgs []*nats.Msg, real sendFn) (pubAck, error) {
				firstID = msgs[0].Header.Get(HeaderEventID)
				return droppedBeforeServer(ctx, msgs, real)
			},
			func(ctx context.Context, msgs []*nats.Msg, real sendFn) (pubAck, error) {
				secondID = msgs[0].Header.Get(HeaderEventID)
				return real(ctx, msgs)
			})
		pos, err := s.Append(ctx, k, at, noteEv("a", 1))
		if err != nil {
			t.Fatalf("append: %v", err)
		}
		assertAggregate(t, s, k, pos, 2)
		if calls.Load() != 2 || firstID == "" || firstID != secondID {
			t.Fatalf("%d sends with ids %q then %q, want 2 with the same id", calls.Load(), firstID, secondID)
		}
	})

	t.Run("never lands: outcome unknown, nothing stored, retry with the returned events succeeds", func(t *testing.T) {
		_, s := newMemStore(t)
		at := mustAppend(t, s, k, Position{}, Event{Type: evOpened})
		before := lastSeq(t, s)
		scripted(s, droppedBeforeServer, droppedBeforeServer)
		_, err := s.Append(ctx, k, at, noteEv("a", 1), noteEv("b", 2))
		var ue *OutcomeUnknownError
		if !errors.Is(err, ErrOutcomeUnknown) || !errors.As(err, &ue) {
			t.Fatalf("append: %v, want ErrOutcomeUnknown", err)
		}
		if !errors.Is(err, nats.ErrTimeout) {
			t.Fatalf("outcome-unknown error hides its cause: %v", err)
		}
		if lastSeq(t, s) != before {
			t.Fatal("a dropped append was stored")
		}
		if len(ue.Events) != 2 || ue.Events[0].ID == "" || ue.Events[1].ID == "" {
			t.Fatalf("error does not carry the ids to retry with: %+v", ue.Events)
		}
		pos, err := s.Append(ctx, k, ue.Expected, ue.Events...)
		if err != nil {
			t.Fatalf("retry: %v", err)
		}
		recs := assertAggregate(t, s, k, pos, 3)
		if recs[1].EventID != ue.Events[0].ID || recs[2].EventID != ue.Events[1].ID {
			t.Fatal("retry did not use the returned ids")
		}
	})

	t.Run("landed, ack lost, then another writer appended: success at our position", func(t *testing.T) {
		_, s := newMemStore(t)
		at := mustAppend(t, s, k, Position{}, Event{Type: evOpened})
		var ours Position
		scripted(s, func(ctx context.Context, msgs []*nats.Msg, real sendFn) (pubAck, error) {
			ack, err := real(ctx, msgs)
			if err != nil {
				return pubAck{}, err
			}
			ours = Position{Sequence: ack.Sequence, Version: at.Version + 1}
			// Another writer, who loaded after our event landed.
			if _, err := s.Append(ctx, k, ours, noteEv("someone else", 7)); err != nil {
				return pubAck{}, err
			}
			return pubAck{}, nats.ErrConnectionClosed
		})
		pos, err := s.Append(ctx, k, at, noteEv("ours", 1))
		if err != nil {
			t.Fatalf("append: %v", err)
		}
		if pos != ours {
			t.Fatalf("position %+v, want ours %+v", pos, ours)
		}
		assertAggregateLen(t, s, k, 3)
	})

	t.Run("not landed, another writer took the slot: conflict", func(t *testing.T) {
		_, s := newMemStore(t)
		at := mustAppend(t, s, k, Position{}, Event{Type: evOpened})
		var theirs Position
		calls := scripted(s, func(ctx context.Context, msgs []*nats.Msg, real sendFn) (pubAck, error) {
			var err error
			theirs, err = s.Append(ctx, k, at, noteEv("someone else", 7))
			if err != nil {
				return pubAck{}, err
			}
			return pubAck{}, nats.ErrNoResponders
		})
		_, err := s.Append(ctx, k, at, noteEv("ours", 1))
		var ce *ConflictError
		if !errors.As(err, &ce) || ce.Actual != theirs {
			t.Fatalf("append: %v, want conflict with actual %+v", err, theirs)
		}
		// One send for ours and one nested for theirs; no resend of ours.
		if calls.Load() != 2 {
			t.Fatalf("%d sends, want 2", calls.Load())
		}
		assertAggregateLen(t, s, k, 2)
	})

	t.Run("batch landed, ack lost: success", func(t *testing.T) {
		_, s := newMemStore(t)
		at := mustAppend(t, s, k, Position{}, Event{Type: evOpened})
		scripted(s, landedAckLost)
		pos, err := s.Append(ctx, k, at, noteEv("a", 1), noteEv("b", 2), noteEv("c", 3))
		if err != nil {
			t.Fatalf("append: %v", err)
		}
		assertAggregate(t, s, k, pos, 4)
	})

	t.Run("caller context expires after the send: read-back still settles it", func(t *testing.T) {
		_, s := newMemStore(t)
		at := mustAppend(t, s, k, Position{}, Event{Type: evOpened})
		actx, cancel := context.WithCancel(ctx)
		scripted(s, func(ctx context.Context, msgs []*nats.Msg, real sendFn) (pubAck, error) {
			if _, err := real(ctx, msgs); err != nil {
				return pubAck{}, err
			}
			cancel()
			return pubAck{}, ctx.Err()
		})
		pos, err := s.Append(actx, k, at, noteEv("a", 1))
		if err != nil {
			t.Fatalf("append: %v", err)
		}
		assertAggregate(t, s, k, pos, 2)
	})

	t.Run("caller context expires before landing: outcome unknown, no resend", func(t *testing.T) {
		_, s := newMemStore(t)
		at := mustAppend(t, s, k, Position{}, Event{Type: evOpened})
		actx, cancel := context.WithCancel(ctx)
		calls := scripted(s, func(ctx context.Context, msgs []*nats.Msg, real sendFn) (pubAck, error) {
			cancel()
			return pubAck{}, ctx.Err()
		})
		_, err := s.Append(actx, k, at, noteEv("a", 1))
		if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, context.Canceled) {
			t.Fatalf("append: %v, want ErrOutcomeUnknown wrapping context.Canceled", err)
		}
		if calls.Load() != 1 {
			t.Fatalf("%d sends after the caller gave up, want 1", calls.Load())
		}
		assertAggregateLen(t, s, k, 1)
	})
}

// assertAggregate checks that k holds exactly n events and ends at pos.
func assertAggregate(t *testing.T, s *Store, k Key, pos Position, n int) []Record {
	t.Helper()
	recs, got := mustLoad(t, s, k)
	if len(recs) != n || got != pos || pos.Version != uint64(n) {
		t.Fatalf("aggregate has %d events at %+v; want %d at %+v", len(recs), got, n, pos)
	}
	return recs
}

func assertAggregateLen(t *testing.T, s *Store, k Key, n int) {
	t.Helper()
	if recs, _ := mustLoad(t, s, k); len(recs) != n {
		t.Fatalf("aggregate has %d events, want %d", len(recs), n)
	}
}
