package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
)

// errMoved: WEIR_NOTIFY has a withdrawal notification the publisher did
// not expect (its own publish landed without an ack, or another weir
// process published): read the position again and resume from it.
var errMoved = errors.New("notify: the notification stream moved; re-reading the position")

// Publisher follows the event log and publishes a notification for every
// event that changes a withdrawal's state.
type Publisher struct {
	store  *eventstore.Store
	stream jetstream.Stream
	js     jetstream.JetStream
	log    *slog.Logger
	pause  time.Duration

	// cache holds each withdrawal folded up to the last event seen, so a
	// live stream costs one decode per event; a miss loads the aggregate.
	cache map[string]aggregate.Withdrawal

	mu      sync.Mutex
	pos     Position
	changed chan struct{}
	count   uint64
}

// maxCached bounds the fold cache (it is cleared, not evicted: a miss only
// costs a load).
const maxCached = 10_000

// NewPublisher returns a publisher reading store (opened with
// eventlog.NewRegistry()) and publishing with js to stream (EnsureStream).
func NewPublisher(store *eventstore.Store, js jetstream.JetStream, stream jetstream.Stream, log *slog.Logger) *Publisher {
	if log == nil {
		log = slog.Default()
	}
	return &Publisher{store: store, js: js, stream: stream, log: log, pause: 500 * time.Millisecond,
		cache: map[string]aggregate.Withdrawal{}}
}

// Run publishes until ctx is done, resuming after the last message of
// WEIR_NOTIFY. A failed publish or read is retried from the position read
// again: nothing is skipped, nothing published twice.
func (p *Publisher) Run(ctx context.Context) error {
	for {
		err := p.follow(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !errors.Is(err, errMoved) {
			p.log.Warn("notify: publisher will resume", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(p.pause):
		}
	}
}

// Position is the last position the publisher read or reached.
func (p *Publisher) Position() Position {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pos
}

// WaitFor blocks until the publisher has handled the log up to sourceSeq
// (published its notification or found it is none) or ctx is done.
func (p *Publisher) WaitFor(ctx context.Context, sourceSeq uint64) error {
	for {
		p.mu.Lock()
		if p.pos.SourceSeq >= sourceSeq {
			p.mu.Unlock()
			return nil
		}
		if p.changed == nil {
			p.changed = make(chan struct{})
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (p *Publisher) setPos(pos Position) {
	p.mu.Lock()
	p.pos = pos
	if p.changed != nil {
		close(p.changed)
		p.changed = nil
	}
	p.mu.Unlock()
}

func (p *Publisher) follow(ctx context.Context) error {
	pos, err := ReadPosition(ctx, p.stream)
	if err != nil {
		return err
	}
	p.setPos(pos)
	clear(p.cache)
	// Every aggregate type is read (the others are only passed over), so
	// the position says how far the whole log was examined: WaitFor and
	// the lag metric mean the log, not its withdrawal events.
	return p.store.Subscribe(ctx, pos.SourceSeq+1, "", func(rec eventstore.Record) error {
		if rec.Key.Type != eventlog.TypeWithdrawal {
			p.advance(rec.Sequence)
			return nil
		}
		return p.handle(ctx, rec)
	}, eventstore.OnViolation(func(v *eventstore.IntegrityError) error {
		// Never folded, so never announced; the log goes on.
		p.log.Error("notify: event quarantined, not announced", "seq", v.Sequence, "subject", v.Subject, "event", v.Type, "err", v.Err)
		p.advance(v.Sequence)
		return nil
	}))
}

// advance moves the source position over a record that announces nothing.
func (p *Publisher) advance(seq uint64) {
	pos := p.Position()
	if seq > pos.SourceSeq {
		pos.SourceSeq = seq
		p.setPos(pos)
	}
}

func (p *Publisher) handle(ctx context.Context, rec eventstore.Record) error {
	if rec.Sequence <= p.Position().SourceSeq {
		return nil
	}
	before, after, err := p.fold(ctx, rec)
	if errors.Is(err, eventstore.ErrIntegrity) {
		// An earlier event of this withdrawal is quarantined: nothing after
		// it can be folded, so nothing about it is announced.
		p.log.Error("notify: withdrawal quarantined, not announced", "id", rec.Key.ID, "seq", rec.Sequence, "err", err)
		p.advance(rec.Sequence)
		return nil
	}
	if err != nil {
		return err
	}
	if before.State == after.State {
		p.advance(rec.Sequence)
		return nil
	}
	n := Notification{EventID: rec.EventID, Type: TypeStateChanged, At: after.UpdatedAt.UTC(), Withdrawal: after.View()}
	if n.At.IsZero() {
		n.At = rec.Time.UTC()
	}
	return p.publish(ctx, rec, n)
}

func (p *Publisher) publish(ctx context.Context, rec eventstore.Record, n Notification) error {
	body, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("notify: encode %s: %w", rec.EventID, err)
	}
	msg := nats.NewMsg(Subject(n.Withdrawal.Account, n.Withdrawal.State))
	msg.Data = body
	msg.Header.Set(HeaderSourceSeq, strconv.FormatUint(rec.Sequence, 10))
	for range maxReads {
		pos := p.Position()
		// Expects the stream's last message, one number the server compares
		// (see Position): nothing came since the position was read.
		ack, err := p.js.PublishMsg(ctx, msg, jetstream.WithMsgID(rec.EventID), jetstream.WithExpectLastSequence(pos.StreamSeq))
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
			now, err := ReadPosition(ctx, p.stream)
			if err != nil {
				return err
			}
			if now.NotifySeq != pos.NotifySeq {
				// Another publisher, or this one's publish that landed
				// without an ack: resume from the stream.
				return errMoved
			}
			// Only wallet notifications came in between: expect the new
			// end and publish again, without leaving the log.
			pos.StreamSeq = now.StreamSeq
			p.setPos(pos)
			continue
		}
		if err != nil {
			return fmt.Errorf("notify: publish %s: %w", rec.EventID, err)
		}
		if ack.Duplicate {
			// Already there (a cluster de-duplicates before the sequence
			// check); where the stream ends now is read again.
			return errMoved
		}
		p.published(rec, ack.Sequence)
		return nil
	}
	return errMoved
}

// maxReads bounds the re-reads of one publish against wallet notifications
// (past it the publisher resumes from the stream, after a pause).
const maxReads = 10

// published counts a notification of rec at seq and moves the position.
func (p *Publisher) published(rec eventstore.Record, seq uint64) {
	// Counted before the position moves: whoever waits for the position
	// (WaitFor) then sees the count that goes with it.
	p.mu.Lock()
	p.count++
	p.mu.Unlock()
	p.setPos(Position{NotifySeq: seq, SourceSeq: rec.Sequence, StreamSeq: seq})
}

// Published counts the notifications this publisher has published.
func (p *Publisher) Published() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count
}

// fold returns the withdrawal just before and just after rec.
func (p *Publisher) fold(ctx context.Context, rec eventstore.Record) (before, after aggregate.Withdrawal, err error) {
	id := rec.Key.ID
	w, ok := p.cache[id]
	if rec.AggregateVersion == 1 {
		// A withdrawal's first event folds onto nothing: no read of the
		// log for the one event every withdrawal has.
		w, ok = aggregate.Withdrawal{}, true
	}
	if ok && w.Version+1 == rec.AggregateVersion {
		e, err := aggregate.DecodeWithdrawalEvent(rec.Type, rec.Payload)
		if err != nil {
			return before, after, fmt.Errorf("notify: %s event %d: %w", id, rec.AggregateVersion, err)
		}
		after = aggregate.EvolveRecorded(w, e, rec.Time)
		p.remember(id, after)
		return w, after, nil
	}
	recs, _, err := p.store.Load(ctx, rec.Key)
	if err != nil {
		return before, after, fmt.Errorf("notify: load %s: %w", id, err)
	}
	for _, r := range recs {
		if r.AggregateVersion > rec.AggregateVersion {
			break
		}
		e, err := aggregate.DecodeWithdrawalEvent(r.Type, r.Payload)
		if err != nil {
			return before, after, fmt.Errorf("notify: %s event %d: %w", id, r.AggregateVersion, err)
		}
		before = after
		after = aggregate.EvolveRecorded(after, e, r.Time)
	}
	if after.Version != rec.AggregateVersion {
		return before, after, fmt.Errorf("notify: %s loaded up to version %d, event is version %d", id, after.Version, rec.AggregateVersion)
	}
	p.remember(id, after)
	return before, after, nil
}

func (p *Publisher) remember(id string, w aggregate.Withdrawal) {
	if w.Terminal() {
		delete(p.cache, id)
		return
	}
	if len(p.cache) >= maxCached {
		clear(p.cache)
	}
	p.cache[id] = w
}
