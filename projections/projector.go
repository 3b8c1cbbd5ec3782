package projections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
)

// Options configures a Projector. The zero value works: no checkpoints,
// default cadences.
type Options struct {
	// Name is the checkpoint key; default "views". Projectors in different
	// processes sharing a bucket need different names (see KVCheckpoints).
	Name string
	// Checkpoints stores snapshots; nil disables checkpointing (every start
	// replays the log from the beginning).
	Checkpoints Checkpoints
	// CheckpointEvery saves after this many folded records; default 1000;
	// negative: by CheckpointInterval only (a save re-encodes every open
	// withdrawal, which under load costs more than it saves at restart).
	CheckpointEvery int
	// CheckpointInterval saves this often while records keep coming (and once
	// more after they stop); default 10s.
	CheckpointInterval time.Duration
	// CompactAccountsAfter compacts an account after this many of its
	// reservations closed (see compactAccount); default 256, negative never.
	CompactAccountsAfter int
	// Logger receives warnings (discarded checkpoints, retries); default
	// slog.Default().
	Logger *slog.Logger
}

func (o *Options) withDefaults() {
	if o.Name == "" {
		o.Name = "views"
	}
	if o.CheckpointEvery == 0 {
		o.CheckpointEvery = 1000
	}
	if o.CheckpointInterval <= 0 {
		o.CheckpointInterval = 10 * time.Second
	}
	if o.CompactAccountsAfter == 0 {
		o.CompactAccountsAfter = 256
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

var (
	// ErrNotRunning: WaitFor was asked for a sequence the projector has not
	// reached, and it is not running, so it never will.
	ErrNotRunning = errors.New("projections: projector is not running")
	// ErrAlreadyRunning: Start on a running projector.
	ErrAlreadyRunning = errors.New("projections: projector already running")
)

// Projector folds the event log into the read models: open withdrawals (for
// the approval, ready and in-flight queues) and account balances. It follows
// the log with store.Subscribe from the sequence after the last one it
// applied, so it sees every record once and in order; records at or below
// that sequence (redeliveries) are skipped, and each aggregate's version is
// checked so that nothing is folded twice or over a gap.
//
// All methods are safe for concurrent use. Views are served from memory and
// may lag the log; WaitFor gives read-your-writes.
type Projector struct {
	store *eventstore.Store
	opts  Options
	log   *slog.Logger

	mu           sync.RWMutex
	st           *state
	changed      chan struct{} // closed when applied moves or the run state changes; nil if nobody waits
	running      bool          // between Start and Stop (also while Rebuild restarts the loop)
	failed       error         // why the loop stopped on its own; nil while healthy
	unsaved      int           // records folded since the last checkpoint
	savedApplied uint64        // applied sequence of the last checkpoint written or restored

	life   sync.Mutex // serialises Start, Stop and Rebuild
	cancel context.CancelFunc
	done   chan struct{} // closed when the loop goroutines have returned
	kick   chan struct{} // asks the checkpointer to save now

	saveMu sync.Mutex // one checkpoint write at a time, in state order

	readyMu sync.Mutex
	onReady []func() // told when a withdrawal became ready to send (OnReady)
}

// OnReady registers fn, called each time a record folded leaves a
// withdrawal ready to send (approved and reserved, or one of its events
// while it is: a claim released by a lapse is found by the workers' own
// poll). Each process follows the whole log, so a withdrawal made ready by
// any process wakes the workers of every process. fn runs on the
// projector's goroutine with its lock held: it must not block nor call the
// projector (sagas.Worker.Notify does neither).
func (p *Projector) OnReady(fn func()) {
	p.readyMu.Lock()
	defer p.readyMu.Unlock()
	p.onReady = append(p.onReady, fn)
}

// notifyReady calls the OnReady functions.
func (p *Projector) notifyReady() {
	p.readyMu.Lock()
	fns := p.onReady
	p.readyMu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// New returns a stopped projector over store (opened with eventlog.NewRegistry()).
func New(store *eventstore.Store, opts Options) *Projector {
	opts.withDefaults()
	p := &Projector{
		store: store,
		opts:  opts,
		log:   opts.Logger,
		kick:  make(chan struct{}, 1),
	}
	p.st = p.newState()
	return p
}

func (p *Projector) newState() *state {
	st := newState(p.opts.CompactAccountsAfter, p.log)
	st.onQuarantine = p.noteQuarantine
	return st
}

// violation is the follower's eventstore.OnViolation: the event is
// quarantined (never folded) and the log goes on being folded.
func (p *Projector) violation(v *eventstore.IntegrityError) error {
	p.mu.Lock()
	_ = p.st.violation(v)
	p.unsaved++
	p.wakeLocked()
	p.mu.Unlock()
	return nil
}

// Start restores the last checkpoint (when the projector holds nothing yet)
// and starts following the log from the sequence after it. ctx bounds the
// restore only; the projector runs until Stop. A checkpoint that cannot be
// trusted is discarded with a warning and the log is replayed from zero; an
// error is returned only when the checkpoint store or the log cannot be read.
func (p *Projector) Start(ctx context.Context) error {
	p.life.Lock()
	defer p.life.Unlock()
	if p.cancel != nil {
		return ErrAlreadyRunning
	}
	if p.Applied() == 0 {
		if err := p.restore(ctx); err != nil {
			return err
		}
	}
	p.mu.Lock()
	p.running, p.failed = true, nil
	p.wakeLocked()
	p.mu.Unlock()
	p.startLoop()
	return nil
}

// Stop stops following the log and writes a final checkpoint (bounded by
// ctx). The views stay readable. It returns the checkpoint error, if any.
func (p *Projector) Stop(ctx context.Context) error {
	p.life.Lock()
	defer p.life.Unlock()
	if p.cancel == nil {
		return nil
	}
	p.stopLoop()
	p.mu.Lock()
	p.running = false
	p.wakeLocked()
	p.mu.Unlock()
	return p.Checkpoint(ctx)
}

// Err reports why the projector stopped on its own (a record it could not
// fold, an unreadable stream); nil while it is healthy or stopped by Stop.
func (p *Projector) Err() error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.failed
}

// Applied is the stream sequence of the last record folded into the views.
func (p *Projector) Applied() uint64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.st.applied
}

// Lag is how many stream sequences the views are behind the log.
func (p *Projector) Lag(ctx context.Context) (uint64, error) {
	last, err := p.store.LastSequence(ctx)
	if err != nil {
		return 0, err
	}
	if applied := p.Applied(); applied < last {
		return last - applied, nil
	}
	return 0, nil
}

// WaitFor blocks until the views include stream sequence seq (for example
// the sequence an append returned), ctx is done, or the projector stops —
// returning nil, ctx.Err(), or why it stopped (ErrNotRunning after Stop).
func (p *Projector) WaitFor(ctx context.Context, seq uint64) error {
	for {
		p.mu.Lock()
		switch {
		case p.st.applied >= seq:
			p.mu.Unlock()
			return nil
		case p.failed != nil:
			err := p.failed
			p.mu.Unlock()
			return err
		case !p.running:
			p.mu.Unlock()
			return fmt.Errorf("%w (applied %d, waiting for %d)", ErrNotRunning, p.st.applied, seq)
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

// CatchUp waits until the views include everything in the log when it is
// called.
func (p *Projector) CatchUp(ctx context.Context) error {
	last, err := p.store.LastSequence(ctx)
	if err != nil {
		return err
	}
	return p.WaitFor(ctx, last)
}

// wakeLocked releases every WaitFor. The caller holds p.mu.
func (p *Projector) wakeLocked() {
	if p.changed != nil {
		close(p.changed)
		p.changed = nil
	}
}

// handle folds one delivered record.
func (p *Projector) handle(rec eventstore.Record) error {
	p.mu.Lock()
	moved, err := p.st.apply(rec)
	if moved && rec.Key.Type == eventlog.TypeWithdrawal {
		// Before WaitFor returns for this record: whoever waited for it
		// finds the workers already told.
		if o, open := p.st.withdrawals[rec.Key.ID]; open && o.w.ReadyToSend() {
			p.notifyReady()
		}
	}
	if moved {
		p.unsaved++
		p.wakeLocked()
	}
	due := p.opts.CheckpointEvery > 0 && p.unsaved >= p.opts.CheckpointEvery
	p.mu.Unlock()
	if due && p.opts.Checkpoints != nil {
		select {
		case p.kick <- struct{}{}:
		default: // a save is already asked for
		}
	}
	return err
}

// startLoop starts the follower and the checkpointer. The caller holds life.
func (p *Projector) startLoop() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	p.cancel, p.done = cancel, done
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.follow(ctx) }()
	go func() { defer wg.Done(); p.checkpointer(ctx) }()
	go func() { wg.Wait(); close(done) }()
}

// stopLoop stops both goroutines and waits for them. The caller holds life.
func (p *Projector) stopLoop() {
	p.cancel()
	<-p.done
	p.cancel, p.done = nil, nil
}

// follow subscribes from the sequence after the last applied one until ctx
// ends. A record it cannot fold, or a stream it cannot decode, stops it for
// good (Err): retrying would fail the same way, and skipping would leave the
// views wrong forever. Anything else (a connection blip) is retried from the
// last applied sequence, which is why redelivery must be harmless.
func (p *Projector) follow(ctx context.Context) {
	backoff := 50 * time.Millisecond
	for {
		from := p.Applied() + 1
		err := p.store.Subscribe(ctx, from, "", p.handle, eventstore.OnViolation(p.violation))
		if ctx.Err() != nil {
			return
		}
		if isFatal(err) {
			p.log.Error("projections: projector stopped", "name", p.opts.Name, "applied", p.Applied(), "err", err)
			p.mu.Lock()
			p.failed = err
			p.wakeLocked()
			p.mu.Unlock()
			return
		}
		p.log.Warn("projections: subscription ended; resuming", "name", p.opts.Name, "from", p.Applied()+1, "retry_in", backoff, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func isFatal(err error) bool {
	var ae *ApplyError
	return errors.As(err, &ae) ||
		errors.Is(err, eventstore.ErrUnknownEventType) ||
		errors.Is(err, eventstore.ErrUnknownSchema) ||
		errors.Is(err, eventstore.ErrCorrupt) ||
		errors.Is(err, eventstore.ErrInvalidKey)
}

// checkpointer saves every CheckpointInterval while there is something new,
// and at once when handle says CheckpointEvery records are unsaved.
func (p *Projector) checkpointer(ctx context.Context) {
	if p.opts.Checkpoints == nil {
		return
	}
	t := time.NewTicker(p.opts.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.kick:
		}
		if err := p.Checkpoint(ctx); err != nil && ctx.Err() == nil {
			// Not fatal: the views are right, only a restart gets slower.
			p.log.Warn("projections: checkpoint failed", "name", p.opts.Name, "err", err)
		}
	}
}

// Checkpoint saves the current views now, if anything changed since the
// last save. It is a no-op without Options.Checkpoints.
func (p *Projector) Checkpoint(ctx context.Context) error {
	if p.opts.Checkpoints == nil {
		return nil
	}
	// saveMu makes "capture the state, write it" one step, so saves land in
	// state order and a slow old save never overwrites a newer one.
	p.saveMu.Lock()
	defer p.saveMu.Unlock()
	p.mu.RLock()
	if p.st.applied == p.savedApplied {
		p.mu.RUnlock()
		return nil
	}
	snap := p.st.snapshot()
	unsaved := p.unsaved
	p.mu.RUnlock()

	data, err := encodeCheckpoint(checkpointDoc{Name: p.opts.Name, Stream: p.store.StreamName(), SavedAt: time.Now().UTC(), Snapshot: snap})
	if err != nil {
		return fmt.Errorf("projections: encode checkpoint: %w", err)
	}
	if err := p.opts.Checkpoints.Save(ctx, p.opts.Name, data); err != nil {
		return err
	}
	p.mu.Lock()
	p.savedApplied = snap.Applied
	p.unsaved = max(0, p.unsaved-unsaved)
	p.mu.Unlock()
	return nil
}

// restore loads the checkpoint into the state. The caller holds life and
// the loop is not running.
func (p *Projector) restore(ctx context.Context) error {
	if p.opts.Checkpoints == nil {
		return nil
	}
	data, err := p.opts.Checkpoints.Load(ctx, p.opts.Name)
	switch {
	case errors.Is(err, ErrNoCheckpoint):
		p.log.Info("projections: no checkpoint; replaying the log from the start", "name", p.opts.Name)
		return nil
	case errors.Is(err, ErrCheckpointCorrupt):
		p.discard(err)
		return nil
	case err != nil:
		return fmt.Errorf("projections: load checkpoint %s: %w", p.opts.Name, err)
	}
	doc, err := decodeCheckpoint(data)
	if err != nil {
		p.discard(err)
		return nil
	}
	if err := p.belongsToLog(ctx, doc); err != nil {
		if errors.Is(err, ErrCheckpointCorrupt) {
			p.discard(err)
			return nil
		}
		return err
	}
	st, err := stateFromSnapshot(doc.Snapshot, p.opts.CompactAccountsAfter, p.log)
	if err != nil {
		p.discard(fmt.Errorf("%w: %v", ErrCheckpointCorrupt, err))
		return nil
	}
	st.onQuarantine = p.noteQuarantine
	for _, q := range st.quarantinedList() {
		p.noteQuarantine(q) // the store learns of quarantines folded before the checkpoint
	}
	p.mu.Lock()
	p.st, p.savedApplied, p.unsaved = st, st.applied, 0
	p.wakeLocked()
	p.mu.Unlock()
	p.log.Info("projections: restored checkpoint", "name", p.opts.Name, "applied", st.applied,
		"open_withdrawals", len(st.withdrawals), "accounts", len(st.accounts), "saved_at", doc.SavedAt)
	return nil
}

func (p *Projector) discard(err error) {
	p.log.Warn("projections: discarding checkpoint; replaying the log from the start", "name", p.opts.Name, "err", err)
}

var errStopRead = errors.New("stop reading")

// belongsToLog checks that a checkpoint was folded from this log: same
// stream, a sequence the log has reached, and the same event at that
// sequence. A checkpoint that outlived its log (a memory stream restarted, a
// store directory replaced) would otherwise graft stale views onto a new log.
func (p *Projector) belongsToLog(ctx context.Context, doc checkpointDoc) error {
	if doc.Stream != p.store.StreamName() {
		return fmt.Errorf("%w: folded from stream %q, this log is %q", ErrCheckpointCorrupt, doc.Stream, p.store.StreamName())
	}
	applied := doc.Snapshot.Applied
	if applied == 0 {
		return nil
	}
	last, err := p.store.LastSequence(ctx)
	if err != nil {
		return err
	}
	if applied > last {
		return fmt.Errorf("%w: checkpoint at seq %d, the log ends at %d", ErrCheckpointCorrupt, applied, last)
	}
	var found string
	seen := false
	_, err = p.store.ReadAll(ctx, applied, "", func(r eventstore.Record) error {
		if r.Sequence == applied {
			found, seen = r.EventID, true
		}
		return errStopRead
	}, eventstore.OnViolation(func(v *eventstore.IntegrityError) error {
		if v.Sequence == applied {
			found, seen = v.EventID, true
		}
		return errStopRead
	}))
	if err != nil && !errors.Is(err, errStopRead) {
		return err
	}
	if !seen || found != doc.Snapshot.LastEventID {
		return fmt.Errorf("%w: the log holds event %q at seq %d, the checkpoint expects %q", ErrCheckpointCorrupt, found, applied, doc.Snapshot.LastEventID)
	}
	return nil
}

// Rebuild drops the views and folds the whole log again from sequence 1.
// The old views keep serving until the new ones are complete, then are
// replaced at once; a running projector resumes following the log after the
// rebuild, and a checkpoint of the new views is written.
func (p *Projector) Rebuild(ctx context.Context) error {
	p.life.Lock()
	defer p.life.Unlock()
	wasRunning := p.cancel != nil
	if wasRunning {
		p.stopLoop()
	}
	fresh := p.newState()
	end, err := p.store.ReadAll(ctx, 1, "", func(r eventstore.Record) error {
		_, err := fresh.apply(r)
		return err
	}, eventstore.OnViolation(fresh.violation))
	if err == nil && end > fresh.applied {
		err = fmt.Errorf("projections: rebuild read to seq %d but folded only to %d", end, fresh.applied)
	}
	if err != nil {
		if wasRunning {
			p.startLoop()
		}
		return fmt.Errorf("projections: rebuild: %w", err)
	}
	p.mu.Lock()
	p.st, p.failed = fresh, nil
	// The old checkpoint describes the dropped views: force the next save.
	p.unsaved, p.savedApplied = 0, 0
	p.wakeLocked()
	p.mu.Unlock()
	if wasRunning {
		p.startLoop()
	}
	return p.Checkpoint(ctx)
}
