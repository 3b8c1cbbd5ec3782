package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
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
	// batches: publish a backlog as one atomic batch (UseBatches); only
	// the sender goroutine reads or clears it once Run started.
	batches bool

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
	// The log is read here and published by send, so that what comes in
	// while a publish waits for its fsync queues up, and goes out as one
	// batch (see UseBatches). Everything passes through the queue, in log
	// order, the records that announce nothing too: the position moves only
	// once what came before it is published.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	queue := make(chan due, maxQueued)
	sent := make(chan error, 1)
	go func() {
		err := p.send(ctx, queue)
		cancel(err)
		sent <- err
	}()
	put := func(d due) error {
		select {
		case queue <- d:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	queued := pos.SourceSeq
	// Every aggregate type is read (the others are only passed over), so
	// the position says how far the whole log was examined: WaitFor and
	// the lag metric mean the log, not its withdrawal events.
	err = p.store.Subscribe(ctx, pos.SourceSeq+1, "", func(rec eventstore.Record) error {
		if rec.Sequence <= queued {
			return nil
		}
		queued = rec.Sequence
		if rec.Key.Type != eventlog.TypeWithdrawal {
			return put(due{seq: rec.Sequence})
		}
		d, err := p.handle(ctx, rec)
		if err != nil {
			return err
		}
		return put(d)
	}, eventstore.OnViolation(func(v *eventstore.IntegrityError) error {
		// Never folded, so never announced; the log goes on.
		if v.Sequence <= queued {
			return nil
		}
		queued = v.Sequence
		p.log.Error("notify: event quarantined, not announced", "seq", v.Sequence, "subject", v.Subject, "event", v.Type, "err", v.Err)
		return put(due{seq: v.Sequence})
	}))
	cancel(err)
	if serr := <-sent; serr != nil && !errors.Is(serr, context.Canceled) {
		return serr // the sender stopped first: its reason, not the cancelled read's
	}
	return err
}

// due is one record of the log for the sender: a notification to publish,
// or (msg nil) a record that announces nothing and only moves the
// position.
type due struct {
	seq     uint64 // its sequence in the log
	eventID string // Nats-Msg-Id
	msg     *nats.Msg
}

// maxQueued bounds the records read ahead of the sender; maxBatch the
// notifications one batch carries (the server's limit is 1,000).
const (
	maxQueued = 1024
	maxBatch  = 256
)

// minBatch is the backlog from which UseBatches publishes one batch rather
// than one message at a time. An atomic batch costs a few milliseconds of
// its own on file storage (the server stages it in a store of its own
// before the commit): measured on a 2-core VM with fsync always, 1,228
// single publishes/s against 612 messages/s in batches of 4, 2,495 in
// batches of 16, 8,340 in batches of 64.
const minBatch = 16

// UseBatches makes the publisher publish a backlog of minBatch
// notifications or more as one atomic batch, whose messages the server
// syncs to disk together before its one ack, instead of once each. Worth
// it only where the server fsyncs every write of an unreplicated file
// stream (weir serve's default on one node): one serial publisher there
// does about one notification per fsync, fewer than a busy engine makes.
// Elsewhere a batch costs more than it saves. Call before Run.
func (p *Publisher) UseBatches() { p.batches = true }

// send publishes what follow queues, in order: a backlog of minBatch
// notifications or more as one batch (UseBatches), anything else one
// message at a time.
func (p *Publisher) send(ctx context.Context, queue <-chan due) error {
	var ds []due
	for {
		ds = ds[:0]
		select {
		case d := <-queue:
			ds = append(ds, d)
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		notes := 0
		if ds[0].msg != nil {
			notes++
		}
	more:
		for notes < maxBatch && len(ds) < maxQueued {
			select {
			case d := <-queue:
				ds = append(ds, d)
				if d.msg != nil {
					notes++
				}
			default:
				break more
			}
		}
		if p.batches && notes >= minBatch {
			done, err := p.publishBatch(ctx, ds, notes)
			if err != nil {
				return err
			}
			if done {
				continue
			}
		}
		for _, d := range ds {
			if d.msg == nil {
				p.advance(d.seq)
				continue
			}
			if err := p.publishMsg(ctx, d); err != nil {
				return err
			}
		}
	}
}

// handle folds rec and returns what it means for the sender: its
// notification if it changes the withdrawal's state.
func (p *Publisher) handle(ctx context.Context, rec eventstore.Record) (due, error) {
	before, after, err := p.fold(ctx, rec)
	if errors.Is(err, eventstore.ErrIntegrity) {
		// An earlier event of this withdrawal is quarantined: nothing after
		// it can be folded, so nothing about it is announced.
		p.log.Error("notify: withdrawal quarantined, not announced", "id", rec.Key.ID, "seq", rec.Sequence, "err", err)
		return due{seq: rec.Sequence}, nil
	}
	if err != nil {
		return due{}, err
	}
	if before.State == after.State {
		return due{seq: rec.Sequence}, nil
	}
	n := Notification{EventID: rec.EventID, Type: TypeStateChanged, At: after.UpdatedAt.UTC(), Withdrawal: after.View()}
	if n.At.IsZero() {
		n.At = rec.Time.UTC()
	}
	msg, err := message(rec, n)
	if err != nil {
		return due{}, err
	}
	return due{seq: rec.Sequence, eventID: rec.EventID, msg: msg}, nil
}

// message is n's message, announcing rec.
func message(rec eventstore.Record, n Notification) (*nats.Msg, error) {
	body, err := json.Marshal(n)
	if err != nil {
		return nil, fmt.Errorf("notify: encode %s: %w", rec.EventID, err)
	}
	msg := nats.NewMsg(Subject(n.Withdrawal.Account, n.Withdrawal.State))
	msg.Data = body
	msg.Header.Set(HeaderSourceSeq, strconv.FormatUint(rec.Sequence, 10))
	return msg, nil
}

// publish publishes n, announcing rec, alone.
func (p *Publisher) publish(ctx context.Context, rec eventstore.Record, n Notification) error {
	msg, err := message(rec, n)
	if err != nil {
		return err
	}
	return p.publishMsg(ctx, due{seq: rec.Sequence, eventID: rec.EventID, msg: msg})
}

// publishMsg publishes one notification, expecting the stream's end.
func (p *Publisher) publishMsg(ctx context.Context, d due) error {
	for range maxReads {
		pos := p.Position()
		// Expects the stream's last message, one number the server compares
		// (see Position): nothing came since the position was read.
		ack, err := p.js.PublishMsg(ctx, d.msg, jetstream.WithMsgID(d.eventID), jetstream.WithExpectLastSequence(pos.StreamSeq))
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
			if err := p.readAgain(ctx, pos); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("notify: publish %s: %w", d.eventID, err)
		}
		if ack.Duplicate {
			// Already there (a cluster de-duplicates before the sequence
			// check); where the stream ends now is read again.
			return errMoved
		}
		p.published(1, d.seq, ack.Sequence)
		return nil
	}
	return errMoved
}

// readAgain follows a publish refused for expecting pos.StreamSeq: if only
// wallet notifications came in between, the position expects the new end
// and the publish can go again; anything else is errMoved.
func (p *Publisher) readAgain(ctx context.Context, pos Position) error {
	now, err := ReadPosition(ctx, p.stream)
	if err != nil {
		return err
	}
	if now.NotifySeq != pos.NotifySeq {
		// Another publisher, or this one's publish that landed without an
		// ack: resume from the stream.
		return errMoved
	}
	pos.StreamSeq = now.StreamSeq
	p.setPos(pos)
	return nil
}

// publishBatch publishes the notes notifications of ds as one atomic
// batch (eventstore.PublishAtomic), its first message expecting the
// stream's end as a single publish does, so the batch is stored whole,
// right after what the position says, or not at all. It reports false,
// having published nothing, when the server refuses the batch for any
// other reason than a publisher ahead of this one: the caller publishes
// them one at a time, and, when the refusal says the stream takes no
// batches at all, the publisher does from then on.
func (p *Publisher) publishBatch(ctx context.Context, ds []due, notes int) (bool, error) {
	msgs := make([]*nats.Msg, 0, notes)
	for _, d := range ds {
		if d.msg != nil {
			d.msg.Header.Set(jetstream.MsgIDHeader, d.eventID) // as a single publish sends it
			msgs = append(msgs, d.msg)
		}
	}
	// The expectation goes on a copy: a message left for a single publish
	// carries none.
	first := &nats.Msg{Subject: msgs[0].Subject, Data: msgs[0].Data, Header: maps.Clone(msgs[0].Header)}
	msgs[0] = first
	for range maxReads {
		pos := p.Position()
		first.Header.Set(jetstream.ExpectedLastSeqHeader, strconv.FormatUint(pos.StreamSeq, 10))
		cctx, cancel := context.WithTimeout(ctx, commitTimeout)
		last, err := eventstore.PublishAtomic(cctx, p.js.Conn(), Stream, msgs)
		cancel()
		var refused *jetstream.APIError
		switch {
		case err == nil:
			p.published(notes, ds[len(ds)-1].seq, last)
			return true, nil
		case errors.Is(err, eventstore.ErrUnexpectedAck):
			// Perhaps stored, not as sent: the stream says what it holds.
			return false, errMoved
		case !errors.As(err, &refused):
			return false, fmt.Errorf("notify: publish a batch of %d: %w", notes, err)
		case refused.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence, refused.ErrorCode == codeBatchDuplicate:
			// Behind the stream: inside a batch the server finds a stored
			// id (10201) before it compares the expected end (10071).
			if err := p.readAgain(ctx, pos); err != nil {
				return false, err
			}
		case batchesRefused[refused.ErrorCode]:
			p.log.Warn("notify: the stream does not take batches of notifications; publishing one at a time from now on",
				"notifications", notes, "err", refused)
			p.batches = false
			return false, nil
		default:
			// Refused this time (incomplete, too many in flight): this
			// backlog goes one at a time.
			p.log.Warn("notify: a batch of notifications was refused; publishing it one at a time", "notifications", notes, "err", refused)
			return false, nil
		}
	}
	return false, errMoved
}

// commitTimeout bounds the wait for a batch's ack, as nats.go's default
// bounds a single publish's; past it the publisher reads the stream again.
const commitTimeout = 10 * time.Second

// Atomic batch refusals (nats-server's error codes): a stored id in the
// batch, and those that say the stream will not take batches at all.
const codeBatchDuplicate = jetstream.ErrorCode(10201)

var batchesRefused = map[jetstream.ErrorCode]bool{
	10174: true, // atomic publish disabled on the stream
	10177: true, // a header the batch may not carry
	10199: true, // a batch larger than the server allows
}

// maxReads bounds the re-reads of one publish against wallet notifications
// (past it the publisher resumes from the stream, after a pause).
const maxReads = 10

// published counts n notifications, the last at seq in the stream, and
// moves the position to them and to the log's sourceSeq.
func (p *Publisher) published(n int, sourceSeq, seq uint64) {
	// Counted before the position moves: whoever waits for the position
	// (WaitFor) then sees the count that goes with it.
	p.mu.Lock()
	p.count += uint64(n)
	p.mu.Unlock()
	p.setPos(Position{NotifySeq: seq, SourceSeq: sourceSeq, StreamSeq: seq})
}

// advance moves the source position over a record that announces nothing.
func (p *Publisher) advance(seq uint64) {
	pos := p.Position()
	if seq > pos.SourceSeq {
		pos.SourceSeq = seq
		p.setPos(pos)
	}
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
