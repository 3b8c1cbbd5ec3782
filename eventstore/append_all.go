package eventstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Part is one aggregate's share of an AppendAll: its events, appended if
// and only if the aggregate still stands at Expected.
type Part struct {
	Key      Key
	Expected Position
	Events   []Event
}

// AppendAll writes the events of several aggregates as one nats-server
// atomic batch: every part lands, each at its expected position, or none
// does. It is how a decision that spans two aggregates (a reservation on
// an account and its record on the withdrawal) is fenced by both streams
// at once, so that no writer holding a stale view of either can make it.
//
// It returns each part's new position in order, a *ConflictError
// (errors.Is ErrConflict) naming a part whose aggregate had moved, or a
// hard error; an unknown outcome is settled as Append settles it, on the
// first part (an atomic batch that holds the first part's events holds
// all of them), and reported as *OutcomeUnknownError when it cannot be.
// Keys must be distinct.
func (s *Store) AppendAll(ctx context.Context, parts ...Part) ([]Position, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("%w: no parts", ErrInvalidEvent)
	}
	if len(parts) == 1 {
		p, err := s.Append(ctx, parts[0].Key, parts[0].Expected, parts[0].Events...)
		if err != nil {
			return nil, err
		}
		return []Position{p}, nil
	}
	var msgs []*nats.Msg
	sent := make([][]Event, len(parts))
	seen := map[Key]bool{}
	generated := true
	for i, p := range parts {
		if err := p.Key.Validate(); err != nil {
			return nil, err
		}
		if seen[p.Key] {
			return nil, fmt.Errorf("%w: %s/%s appears twice in one batch", ErrInvalidEvent, p.Key.Type, p.Key.ID)
		}
		seen[p.Key] = true
		if (p.Expected.Sequence == 0) != (p.Expected.Version == 0) || p.Expected.Version > p.Expected.Sequence {
			return nil, fmt.Errorf("%w: %+v", ErrInvalidPosition, p.Expected)
		}
		if len(p.Events) == 0 {
			return nil, fmt.Errorf("%w: no events for %s/%s", ErrInvalidEvent, p.Key.Type, p.Key.ID)
		}
		m, ev, gen, err := s.prepare(p.Key, p.Expected, p.Events)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m...)
		sent[i] = ev
		generated = generated && gen
	}
	if len(msgs) > MaxEventsPerAppend {
		return nil, fmt.Errorf("%w: %d events in one append (max %d)", ErrInvalidEvent, len(msgs), MaxEventsPerAppend)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// positions from the sequence of the batch's last message: a batch is
	// contiguous in the stream.
	positions := func(last uint64) []Position {
		out := make([]Position, len(parts))
		seq := last - uint64(len(msgs))
		for i, p := range parts {
			seq += uint64(len(sent[i]))
			out[i] = Position{Sequence: seq, Version: p.Expected.Version + uint64(len(sent[i]))}
		}
		return out
	}
	first := parts[0]
	unknown := func(err error) error {
		return &OutcomeUnknownError{Key: first.Key, Expected: first.Expected, Events: sent[0], Err: err}
	}
	for attempt := 0; ; attempt++ {
		ack, sendErr := s.send(ctx, msgs)
		if sendErr == nil && !ack.Duplicate {
			return positions(ack.Sequence), nil
		}
		mayBeOurs, refused := true, false
		var apiErr *jetstream.APIError
		switch {
		case sendErr == nil: // a duplicate ack: read back below
		case errors.As(sendErr, &apiErr):
			switch apiErr.ErrorCode {
			case codeWrongLastSeq, codeWrongLastSeqConstant, codeBatchDuplicate, codeDupInProcess:
				refused = true
				mayBeOurs = !(generated && attempt == 0)
			default:
				return nil, fmt.Errorf("eventstore: append to %s and %d more: %w", s.Subject(first.Key), len(parts)-1, sendErr)
			}
		case isLocalRefusal(sendErr):
			return nil, fmt.Errorf("eventstore: append to %s and %d more: %w", s.Subject(first.Key), len(parts)-1, sendErr)
		}
		res, err := s.resolve(ctx, first.Key, first.Expected, sent[0], mayBeOurs)
		if err != nil {
			if errors.Is(err, ErrInvalidPosition) || errors.Is(err, ErrCorrupt) {
				return nil, err
			}
			return nil, unknown(errors.Join(sendErr, err))
		}
		switch res.verdict {
		case verdictLanded:
			return positions(res.pos.Sequence + s.after(parts, sent)), nil
		case verdictTaken:
			return nil, &ConflictError{Key: first.Key, Expected: first.Expected, Actual: res.pos}
		}
		// The first part's slot is empty: if another part's aggregate moved,
		// the batch can never land.
		for _, p := range parts[1:] {
			r, err := s.resolve(ctx, p.Key, p.Expected, nil, false)
			if err != nil {
				if errors.Is(err, ErrInvalidPosition) || errors.Is(err, ErrCorrupt) {
					return nil, err
				}
				return nil, unknown(errors.Join(sendErr, err))
			}
			if r.verdict != verdictEmpty {
				return nil, &ConflictError{Key: p.Key, Expected: p.Expected, Actual: r.pos}
			}
		}
		if attempt >= s.cfg.AmbiguousRetries || ctx.Err() != nil {
			if sendErr == nil {
				sendErr = errors.New("slot still empty after a duplicate ack")
			}
			return nil, unknown(errors.Join(sendErr, ctx.Err()))
		}
		if refused {
			if err := sleepCtx(ctx, attempt); err != nil {
				return nil, unknown(errors.Join(sendErr, err))
			}
		}
	}
}

// after is how many messages of the batch follow the first part's last one.
func (s *Store) after(parts []Part, sent [][]Event) uint64 {
	var n uint64
	for i := 1; i < len(parts); i++ {
		n += uint64(len(sent[i]))
	}
	return n
}

// sleepCtx waits a little longer after each refused attempt (another
// append to one of the subjects is in flight on a cluster).
func sleepCtx(ctx context.Context, attempt int) error {
	t := time.NewTimer(time.Duration(attempt+1) * 20 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
