package sagas

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/tron"
)

// WorkSource is where a broadcast worker finds candidates: the read models
// of the ready-to-send queue (approved and reserved, no live lease) and of
// the in-flight withdrawals (signing … broadcast). It is only a hint: a
// worker reloads a withdrawal from its stream before acting on it, and the
// stream's optimistic concurrency — not the read model — decides who owns
// it. projections implements it; tests may use anything that returns
// withdrawals.
type WorkSource interface {
	Ready(now time.Time) []aggregate.Withdrawal
	InFlightWithdrawals(now time.Time) []aggregate.Withdrawal
}

// Defaults of WorkerConfig.
const (
	DefaultLease            = 30 * time.Second
	DefaultExpirationWindow = tron.DefaultExpiration // 60 s of chain time
	DefaultExpiryMargin     = 30 * time.Second       // chain time beyond expiration before a rebuild
	DefaultMaxAttempts      = 3
	DefaultPollInterval     = time.Second
	DefaultNodeTimeout      = 10 * time.Second
)

// WorkerConfig configures one broadcast worker. ID, Repo, Node, Signer and
// Work are required.
type WorkerConfig struct {
	// ID names the worker in its claims and in the node's send log. Two live
	// workers must not share an ID: the same ID is the same owner.
	ID     string
	Repo   *Repo
	Node   tron.Node
	Signer tron.Signer
	// Custody says whether a destination address is custodied by us and
	// into which account: such withdrawals are ledger transfers (internal
	// route) and never touch the chain. Nil means nothing is custodied.
	Custody func(to string) (account string, ok bool)
	Work    WorkSource
	// Approver reports whether a principal holds the approver role in the
	// principals in force now (cmd/weir passes its principals file).
	// Approvals by principals who no longer do are not counted at the
	// re-check before building and right before signing. Nil: every
	// recorded approval counts.
	Approver func(principal string) bool

	// Clock is the wall clock, used for leases only: every decision about
	// a transaction's life is taken on chain time read from the node. A
	// lease is also bounded by the server's record time of the claim
	// (aggregate.Claim.Until), so a clock that runs fast cannot hold a
	// withdrawal longer than Lease of server time. Default time.Now.
	Clock Clock
	// Lease is how long a claim keeps other workers away; it is renewed
	// when less than half of it is left. Default DefaultLease.
	Lease time.Duration
	// ExpirationWindow is added to the head block's time to make an
	// envelope's expiration (chain time; at most tron.MaxExpiration).
	// Default DefaultExpirationWindow.
	ExpirationWindow time.Duration
	// FeeLimit in sun, recorded in every envelope. Default
	// tron.DefaultFeeLimit.
	FeeLimit int64
	// ExpiryMargin is how far past an envelope's expiration the latest
	// solid block must be before the envelope counts as dead and may be
	// replaced. Default DefaultExpiryMargin.
	ExpiryMargin time.Duration
	// MaxAttempts bounds the envelopes built for one withdrawal (the first
	// and its rebuilds); when the last one is proven dead the withdrawal
	// fails with attempts_exhausted. Default DefaultMaxAttempts.
	MaxAttempts int
	// PollInterval is how often Run looks for work without being notified
	// (leases lapse and chains move without telling anyone). Default
	// DefaultPollInterval.
	PollInterval time.Duration
	// NodeTimeout bounds each node call. Default DefaultNodeTimeout.
	NodeTimeout time.Duration
	// Crash, when set, is consulted at every crash point (tests).
	Crash CrashHook
	// Logger; default slog.Default().
	Logger *slog.Logger
}

func (c *WorkerConfig) withDefaults() error {
	switch {
	case c.ID == "":
		return errors.New("sagas: worker config: ID is required")
	case c.Repo == nil:
		return errors.New("sagas: worker config: Repo is required")
	case c.Node == nil:
		return errors.New("sagas: worker config: Node is required")
	case c.Signer == nil:
		return errors.New("sagas: worker config: Signer is required")
	case c.Work == nil:
		return errors.New("sagas: worker config: Work is required")
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Custody == nil {
		c.Custody = func(string) (string, bool) { return "", false }
	}
	c.Lease = cmp.Or(c.Lease, DefaultLease)
	c.ExpirationWindow = cmp.Or(c.ExpirationWindow, DefaultExpirationWindow)
	c.FeeLimit = cmp.Or(c.FeeLimit, tron.DefaultFeeLimit)
	c.ExpiryMargin = cmp.Or(c.ExpiryMargin, DefaultExpiryMargin)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, DefaultMaxAttempts)
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	c.NodeTimeout = cmp.Or(c.NodeTimeout, DefaultNodeTimeout)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.Lease < 0, c.ExpirationWindow < 0, c.ExpiryMargin < 0, c.PollInterval < 0, c.NodeTimeout < 0:
		return errors.New("sagas: worker config: durations must not be negative")
	case c.ExpirationWindow > tron.MaxExpiration:
		return fmt.Errorf("sagas: worker config: expiration window %v exceeds TRON's maximum %v", c.ExpirationWindow, tron.MaxExpiration)
	case c.MaxAttempts < 1:
		return errors.New("sagas: worker config: MaxAttempts must be at least 1")
	case c.FeeLimit < 0:
		return errors.New("sagas: worker config: negative fee limit")
	}
	return nil
}

// ErrFenced means the worker lost a withdrawal: its stream moved on (an
// append at the position the worker held was refused) or another worker
// holds a live lease. The worker stopped working on it before any further
// network call. It is the normal outcome of a race, not a failure.
var ErrFenced = errors.New("sagas: fenced: another worker owns the withdrawal")

// Worker is one broadcast saga worker: it claims withdrawals from the
// ready queue (or in-flight ones whose lease lapsed) and drives each state
// by state to an outcome. Every state's handler is its own recovery
// procedure, so a withdrawal left anywhere by a dead worker is finished by
// whichever worker claims it next — there is no reaper and no startup scan.
//
// A Worker drives one withdrawal at a time; run several Workers (each its
// own ID) for parallelism. Its methods may be called from any goroutine.
type Worker struct {
	cfg  WorkerConfig
	log  *slog.Logger
	wake chan struct{}
	dead atomic.Bool

	mu     sync.Mutex         // serialises Step and Drive
	held   map[string]*flight // withdrawals this worker holds a claim on, at the position it last saw
	sentAt map[string]int64   // txid → head block number at this worker's last send of it
	rounds uint64
	spread uint64 // where in the ready queue this worker starts, so workers do not all race for the same one

	// rejected holds the hard rejects (SIGERROR, BANDWITH_ERROR, …) this
	// worker got for a txid: it sends those bytes no more, and once the
	// chain-time proof holds the withdrawal fails with node_rejected
	// instead of being rebuilt. Memory only, cleared with sentAt: a worker
	// that lost it sends once more and is refused again (or, past the
	// expiration, rebuilds on the proof as for any unseen envelope).
	rejected map[string]tron.BroadcastResult

	// scans holds the proofs of death in progress, by txid (proof.go).
	scans map[string]*expiryScan

	// acceptedBy holds the node's acceptance of a send by this worker, by
	// txid, kept in hand rather than appended: the withdrawal stays
	// broadcasting in the log and is confirmed straight from there when
	// its solid block is found. A worker that lost it reconciles by txid
	// (and records the acceptance it finds), as after any crash.
	acceptedBy map[string]string
}

// flight is a withdrawal in a worker's hands: the state it decided against
// and the position it must append at. The position is the fence: any
// append by someone else since makes the next one of ours fail.
type flight struct {
	w     aggregate.Withdrawal
	pos   eventstore.Position
	moved int // events appended in this drive, lease renewals excluded
}

// NewWorker validates cfg (filling defaults) and returns a worker.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	h := fnv.New64a()
	h.Write([]byte(cfg.ID))
	return &Worker{
		cfg:        cfg,
		log:        cfg.Logger.With("worker", cfg.ID),
		wake:       make(chan struct{}, 1),
		held:       map[string]*flight{},
		sentAt:     map[string]int64{},
		rejected:   map[string]tron.BroadcastResult{},
		scans:      map[string]*expiryScan{},
		acceptedBy: map[string]string{},
		spread:     h.Sum64(),
	}, nil
}

// ID returns the worker's id.
func (wk *Worker) ID() string { return wk.cfg.ID }

// Notify tells Run that new work may exist (a withdrawal became ready); it
// never blocks.
func (wk *Worker) Notify() {
	select {
	case wk.wake <- struct{}{}:
	default:
	}
}

// Run steps until ctx ends (returning nil) or a crash hook kills the worker
// (returning ErrCrashed). Between steps that found nothing to do it waits
// for Notify or for the poll interval, which is when leases lapse and
// chains move.
func (wk *Worker) Run(ctx context.Context) error {
	t := time.NewTicker(wk.cfg.PollInterval)
	defer t.Stop()
	for {
		progressed, err := wk.Step(ctx)
		if errors.Is(err, ErrCrashed) {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		if progressed {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wk.wake:
		case <-t.C:
		}
	}
}

// Step drives every candidate once: withdrawals this worker holds, the
// ready queue, and in-flight withdrawals whose lease lapsed. It reports
// whether any withdrawal moved. Errors about one withdrawal (a node
// timeout, a lost race, a store hiccup) are logged and do not stop the
// step; the error returned is ErrCrashed or the context's.
func (wk *Worker) Step(ctx context.Context) (bool, error) {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	if wk.dead.Load() {
		return false, ErrCrashed
	}
	progressed := false
	for _, id := range wk.candidates() {
		if err := ctx.Err(); err != nil {
			return progressed, err
		}
		moved, err := wk.drive(ctx, id)
		progressed = progressed || moved
		switch {
		case err == nil:
		case errors.Is(err, ErrCrashed):
			return progressed, err
		case ctx.Err() != nil:
			return progressed, ctx.Err()
		case errors.Is(err, ErrFenced):
			wk.log.Debug("lost withdrawal", "withdrawal", id, "err", err)
		case aggregate.CodeOf(err) != "":
			// The domain refused a command this worker decided: a bug, or
			// a configuration the domain will not accept.
			wk.log.Error("command refused", "withdrawal", id, "err", err)
		default:
			wk.log.Warn("will retry", "withdrawal", id, "err", err)
		}
	}
	return progressed, nil
}

// Drive takes one withdrawal as far as it can go now: claims it if nobody
// holds it, then runs state handlers until it is terminal or must wait for
// the chain. It reports whether the withdrawal moved. ErrFenced (wrapped)
// means another worker owns it; ErrCrashed that a crash hook fired.
func (wk *Worker) Drive(ctx context.Context, id string) (bool, error) {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	if wk.dead.Load() {
		return false, ErrCrashed
	}
	return wk.drive(ctx, id)
}

// candidates lists the ids to visit this step, held ones first.
func (wk *Worker) candidates() []string {
	now := wk.cfg.Clock()
	seen := map[string]bool{}
	var out []string
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	held := make([]string, 0, len(wk.held))
	for id := range wk.held {
		held = append(held, id)
	}
	slices.Sort(held)
	for _, id := range held {
		add(id)
	}
	ready := wk.cfg.Work.Ready(now)
	if n := uint64(len(ready)); n > 0 {
		start := (wk.spread + wk.rounds) % n
		ready = append(ready[start:len(ready):len(ready)], ready[:start]...)
	}
	wk.rounds++
	for _, w := range ready {
		if !w.Claim.HeldAt(now) || w.Claim.Worker == wk.cfg.ID {
			add(w.ID)
		}
	}
	for _, w := range wk.cfg.Work.InFlightWithdrawals(now) {
		if !w.Claim.HeldAt(now) || w.Claim.Worker == wk.cfg.ID {
			add(w.ID)
		}
	}
	return out
}

// maxHandlersPerDrive bounds one drive; a withdrawal's whole life is about
// a dozen transitions, so hitting it means a handler keeps "moving" without
// getting anywhere.
const maxHandlersPerDrive = 32

func (wk *Worker) drive(ctx context.Context, id string) (bool, error) {
	f, ok := wk.held[id]
	if !ok {
		w, pos, err := wk.cfg.Repo.Withdrawal(ctx, id)
		if err != nil {
			return false, fmt.Errorf("load withdrawal %s: %w", id, err)
		}
		f = &flight{w: w, pos: pos}
	}
	f.moved = 0
	keep, err := wk.driveFlight(ctx, f)
	if keep && !f.w.Terminal() {
		wk.held[id] = f
	} else {
		// Terminal, lost, or unsure of the position: forget it. If it is
		// still ours, the next visit reloads it from the stream.
		delete(wk.held, id)
		for _, txid := range append(f.w.RetiredTxIDs(), f.w.TxID()) {
			wk.forget(txid)
		}
	}
	return f.moved > 0, err
}

// forget drops what this worker remembers about its sends of txid.
func (wk *Worker) forget(txid string) {
	delete(wk.sentAt, txid)
	delete(wk.rejected, txid)
	delete(wk.scans, txid)
	delete(wk.acceptedBy, txid)
}

// driveFlight runs handlers; keep reports whether the worker still holds
// the withdrawal at a position it is sure of afterwards.
func (wk *Worker) driveFlight(ctx context.Context, f *flight) (keep bool, err error) {
	for range maxHandlersPerDrive {
		if !f.w.Exists() || f.w.Terminal() {
			return false, nil
		}
		if !aggregate.LegalTransition(f.w.State, aggregate.EventClaimed) {
			return false, nil // not the broadcast saga's (requested, …)
		}
		if f.w.State == aggregate.StateApproved && !f.w.Reserved {
			return false, nil // not ready: the reservation completes first
		}
		if err := wk.holdLease(ctx, f); err != nil {
			return false, err
		}
		next, err := wk.handle(ctx, f)
		if err != nil {
			// A handler that failed before writing (a node timeout) asks to
			// wait and keeps its position; one whose write failed stops, and
			// the withdrawal is reloaded from its stream next time.
			return next == stepWait, err
		}
		switch next {
		case stepWait:
			return true, nil
		case stepStop:
			return false, nil
		}
	}
	wk.log.Error("drive did not settle", "withdrawal", f.w.ID, "state", f.w.State)
	return true, nil
}

// holdLease claims the withdrawal, or renews this worker's claim when less
// than half of it is left. The append is at the position the worker holds,
// so it is also a fence check: a worker whose stream moved on learns it
// here, before the handler makes any network call.
func (wk *Worker) holdLease(ctx context.Context, f *flight) error {
	now := wk.cfg.Clock().UTC()
	c := f.w.Claim
	mine := c.Worker == wk.cfg.ID
	if mine && c.Until().Sub(now) > wk.cfg.Lease/2 {
		return nil
	}
	if !mine && c.HeldAt(now) {
		return fmt.Errorf("%w: %s holds %s until %s", ErrFenced, c.Worker, f.w.ID, c.Until().Format(time.RFC3339Nano))
	}
	if wk.claimsWithEnvelope(f.w) {
		// The claim goes into the envelope's write-ahead (prepare): one
		// append, at the position read here, fences exactly as a claim
		// would have before the first send.
		return nil
	}
	if err := wk.write(ctx, f, aggregate.ClaimWithdrawal{Worker: wk.cfg.ID, LeaseUntil: now.Add(wk.cfg.Lease), At: now}, false); err != nil {
		return err
	}
	if !mine {
		wk.log.Debug("claimed", "withdrawal", f.w.ID, "state", f.w.State, "from", c.Worker)
		if wk.crashAt(CrashAfterClaim, f.w.ID) {
			return ErrCrashed
		}
	}
	return nil
}

// claimsWithEnvelope reports whether w's claim, route and first envelope
// are written as one event: an approved withdrawal, not routed yet, to a
// destination that is not custodied and parses (anything else takes the
// step-by-step path: claim, route, then settle or reject).
func (wk *Worker) claimsWithEnvelope(w aggregate.Withdrawal) bool {
	if w.State != aggregate.StateApproved || !w.Route.IsZero() {
		return false
	}
	if _, custodied := wk.cfg.Custody(w.ToAddress); custodied {
		return false
	}
	_, err := tron.ParseAddress(w.ToAddress)
	return err == nil
}

// write decides cmd against the state the worker holds and appends it at
// the position it holds. A refusal because the stream moved (or a live
// lease of someone else) is ErrFenced; any other failure leaves the
// worker unsure of the position, and the caller drops the withdrawal
// either way — it never goes on to a network call.
func (wk *Worker) write(ctx context.Context, f *flight, cmd aggregate.Command, counts bool) error {
	w, pos, events, err := wk.cfg.Repo.AppendWithdrawalAt(ctx, f.w, f.pos, cmd)
	if err != nil {
		if errors.Is(err, eventstore.ErrConflict) || aggregate.CodeOf(err) == aggregate.CodeClaimHeld {
			return fmt.Errorf("%w: %s %T: %w", ErrFenced, f.w.ID, cmd, err)
		}
		return fmt.Errorf("withdrawal %s: %T: %w", f.w.ID, cmd, err)
	}
	f.w, f.pos = w, pos
	if counts && len(events) > 0 {
		f.moved++
	}
	return nil
}

// crashAt consults the crash hook; once it fires the worker is dead.
func (wk *Worker) crashAt(p CrashPoint, id string) bool {
	if wk.cfg.Crash == nil || !wk.cfg.Crash(p, id) {
		return false
	}
	wk.dead.Store(true)
	wk.log.Info("crashed", "point", string(p), "withdrawal", id)
	return true
}

// now is the time commands are stamped with (wall clock, UTC).
func (wk *Worker) now() time.Time { return wk.cfg.Clock().UTC() }

// nodeCtx bounds one node call and tags it with the worker id.
func (wk *Worker) nodeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(tron.WithWorker(ctx, wk.cfg.ID), wk.cfg.NodeTimeout)
}

// policy returns the approval policy in force now, read through the stream
// leader: the re-checks that use it append nothing to the policy stream,
// so a replica's stale answer would never be caught.
func (wk *Worker) policy(ctx context.Context) (aggregate.Policy, error) {
	return wk.cfg.Repo.PolicyInForceLatest(ctx)
}

// revoked lists the approvers of w who no longer hold the approver role.
func (wk *Worker) revoked(w aggregate.Withdrawal) []string {
	if wk.cfg.Approver == nil {
		return nil
	}
	var out []string
	for _, a := range w.Approvals {
		if !wk.cfg.Approver(a.By) {
			out = append(out, a.By)
		}
	}
	return out
}
