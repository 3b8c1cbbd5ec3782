package history

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

// The index's stream and headers.
const (
	// Stream holds one entry per withdrawal, in request order.
	Stream = "WEIR_HISTORY"
	// SubjectPrefix is followed by .<account>.
	SubjectPrefix = "weir.history.withdrawal"
	// Subjects is what the stream holds.
	Subjects = "weir.history.>"
	// HeaderSourceSeq is the log sequence of the withdrawal.requested event
	// an entry indexes: the indexer's durable position.
	HeaderSourceSeq = "Weir-Source-Seq"
	// HeaderPrevSeq is the sequence, in WEIR_HISTORY, of the same
	// account's previous entry (0 for its first).
	HeaderPrevSeq = "Weir-Prev-Seq"
	// DuplicateWindow is the stream's de-duplication window.
	DuplicateWindow = 2 * time.Minute
)

// Entry is one indexed withdrawal: what is needed to find and filter it
// before loading it from the log.
type Entry struct {
	Seq         uint64    `json:"-"` // its sequence in WEIR_HISTORY
	ID          string    `json:"id"`
	Account     string    `json:"account"`
	RequestedBy string    `json:"requested_by"`
	RequestedAt time.Time `json:"requested_at"`
}

// Subject is the subject of account's entries.
func Subject(account string) string { return SubjectPrefix + "." + account }

// StreamConfig: limits retention without limits, deny delete and purge,
// direct gets (the reader's walks).
func StreamConfig(replicas int, memory bool) jetstream.StreamConfig {
	return eventstore.DerivedStreamConfig(Stream, "weir: one entry per withdrawal, derived from WEIR_EVENTS (the history index)",
		[]string{Subjects}, replicas, memory, DuplicateWindow)
}

// EnsureStream creates WEIR_HISTORY (or brings it back to StreamConfig).
func EnsureStream(ctx context.Context, js jetstream.JetStream, replicas int, memory bool) (jetstream.Stream, error) {
	s, err := js.CreateOrUpdateStream(ctx, StreamConfig(replicas, memory))
	if err != nil {
		return nil, fmt.Errorf("history: stream %s: %w", Stream, err)
	}
	return s, nil
}

// errMoved: the index's last sequence is not the one expected (a publish
// landed unacknowledged, or another weir process indexed): re-read.
var errMoved = errors.New("history: the index moved; re-reading the position")

// Indexer follows the log and appends an entry per requested withdrawal.
type Indexer struct {
	store  *eventstore.Store
	js     jetstream.JetStream
	stream jetstream.Stream
	log    *slog.Logger
	pause  time.Duration

	mu      sync.Mutex
	lastSeq uint64 // WEIR_HISTORY's last sequence
	srcSeq  uint64 // log sequence handled up to
	changed chan struct{}

	// prevs: account → the sequence of its last entry, for the accounts
	// this follow has indexed (see prevFor). Only the follow's goroutine
	// touches it; each follow starts it empty.
	prevs   map[string]uint64
	lastFor func(ctx context.Context, subject string) (uint64, error) // lastSeqFor on x.stream; tests count it
}

// maxPrevs bounds prevs; past it the map starts again (a miss reads the
// stream, as every request did before).
const maxPrevs = 1 << 16

// NewIndexer returns an indexer reading store (opened with
// eventlog.NewRegistry()) and appending with js to stream (EnsureStream).
func NewIndexer(store *eventstore.Store, js jetstream.JetStream, stream jetstream.Stream, log *slog.Logger) *Indexer {
	if log == nil {
		log = slog.Default()
	}
	x := &Indexer{store: store, js: js, stream: stream, log: log, pause: 500 * time.Millisecond}
	x.lastFor = func(ctx context.Context, subject string) (uint64, error) { return lastSeqFor(ctx, x.stream, subject) }
	return x
}

// prevFor is the sequence of account's last entry. Every entry this follow
// wrote was appended expecting the index's last sequence, so nothing was
// appended between them by anyone else (a publish that did not go as
// expected ends the follow, and the next one starts with an empty map):
// the last entry this follow wrote for an account is its last entry.
// Other accounts are read from the stream.
func (x *Indexer) prevFor(ctx context.Context, account string) (uint64, error) {
	if seq, ok := x.prevs[account]; ok {
		return seq, nil
	}
	return x.lastFor(ctx, Subject(account))
}

// wrote records that account's last entry is now seq.
func (x *Indexer) wrote(account string, seq uint64) {
	if x.prevs == nil || len(x.prevs) >= maxPrevs {
		x.prevs = make(map[string]uint64)
	}
	x.prevs[account] = seq
}

// Run indexes until ctx is done, resuming after the index's last entry.
func (x *Indexer) Run(ctx context.Context) error {
	for {
		err := x.follow(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !errors.Is(err, errMoved) {
			x.log.Warn("history: indexer will resume", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(x.pause):
		}
	}
}

// WaitFor blocks until the log is indexed up to sourceSeq or ctx is done.
func (x *Indexer) WaitFor(ctx context.Context, sourceSeq uint64) error {
	for {
		x.mu.Lock()
		if x.srcSeq >= sourceSeq {
			x.mu.Unlock()
			return nil
		}
		if x.changed == nil {
			x.changed = make(chan struct{})
		}
		ch := x.changed
		x.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (x *Indexer) set(lastSeq, srcSeq uint64) {
	x.mu.Lock()
	x.lastSeq, x.srcSeq = lastSeq, max(srcSeq, x.srcSeq)
	if x.changed != nil {
		close(x.changed)
		x.changed = nil
	}
	x.mu.Unlock()
}

func (x *Indexer) position() (lastSeq, srcSeq uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.lastSeq, x.srcSeq
}

func (x *Indexer) follow(ctx context.Context) error {
	last, src, err := readPosition(ctx, x.stream)
	if err != nil {
		return err
	}
	x.mu.Lock()
	x.lastSeq, x.srcSeq = last, src
	x.mu.Unlock()
	x.prevs = make(map[string]uint64)
	// Every record, not only withdrawals': the position then reaches the
	// log's end, which is what a reader waits for (WaitFor).
	return x.store.Subscribe(ctx, src+1, "", func(rec eventstore.Record) error {
		return x.handle(ctx, rec)
	}, eventstore.OnViolation(func(v *eventstore.IntegrityError) error {
		// Never indexed: a withdrawal whose request cannot be verified is
		// not listed (Load would refuse it anyway).
		x.log.Error("history: event quarantined, not indexed", "seq", v.Sequence, "subject", v.Subject, "err", v.Err)
		lastSeq, _ := x.position()
		x.set(lastSeq, v.Sequence)
		return nil
	}))
}

func (x *Indexer) handle(ctx context.Context, rec eventstore.Record) error {
	lastSeq, srcSeq := x.position()
	if rec.Sequence <= srcSeq {
		return nil
	}
	if rec.Key.Type != eventlog.TypeWithdrawal || rec.AggregateVersion != 1 || rec.Type != aggregate.EventRequested {
		x.set(lastSeq, rec.Sequence)
		return nil
	}
	e, err := aggregate.DecodeWithdrawalEvent(rec.Type, rec.Payload)
	if err != nil {
		return fmt.Errorf("history: decode %s: %w", rec.EventID, err)
	}
	req, ok := e.(aggregate.Requested)
	if !ok {
		return fmt.Errorf("history: %s is not a request", rec.EventID)
	}
	entry := Entry{ID: req.ID, Account: req.Account, RequestedBy: req.RequestedBy, RequestedAt: req.At.UTC()}
	prev, err := x.prevFor(ctx, req.Account)
	if err != nil {
		return err
	}
	body, err := json.Marshal(entry)
	if err != nil {
		return fmt.Errorf("history: encode %s: %w", rec.EventID, err)
	}
	msg := nats.NewMsg(Subject(req.Account))
	msg.Data = body
	msg.Header.Set(HeaderSourceSeq, strconv.FormatUint(rec.Sequence, 10))
	msg.Header.Set(HeaderPrevSeq, strconv.FormatUint(prev, 10))
	ack, err := x.js.PublishMsg(ctx, msg, jetstream.WithMsgID("history-"+rec.EventID), jetstream.WithExpectLastSequence(lastSeq))
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		return errMoved
	}
	if err != nil {
		return fmt.Errorf("history: index %s: %w", rec.EventID, err)
	}
	if ack.Duplicate {
		return errMoved
	}
	x.wrote(req.Account, ack.Sequence)
	x.set(ack.Sequence, rec.Sequence)
	return nil
}

// readPosition reads the index's last entry: its sequence and the log
// sequence it indexed (0, 0 on an empty index).
func readPosition(ctx context.Context, s jetstream.Stream) (lastSeq, srcSeq uint64, err error) {
	info, err := s.Info(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("history: %s info: %w", Stream, err)
	}
	if info.State.LastSeq == 0 {
		return 0, 0, nil
	}
	msg, err := s.GetMsg(ctx, info.State.LastSeq)
	if err != nil {
		return 0, 0, fmt.Errorf("history: %s last entry %d: %w", Stream, info.State.LastSeq, err)
	}
	src, err := strconv.ParseUint(msg.Header.Get(HeaderSourceSeq), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("history: %s entry %d has no %s: %w", Stream, info.State.LastSeq, HeaderSourceSeq, err)
	}
	return info.State.LastSeq, src, nil
}

// lastSeqFor is the sequence of subject's last entry (0: none).
func lastSeqFor(ctx context.Context, s jetstream.Stream, subject string) (uint64, error) {
	m, err := s.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("history: last entry of %s: %w", subject, err)
	}
	return m.Sequence, nil
}
