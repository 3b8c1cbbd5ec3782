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

// IDLister is what a WorkSource may also offer so that a look for work
// copies no withdrawal (the projector does): a worker looks far more often
// than the queues change, and only needs the ids.
type IDLister interface {
	// ReadyIDs appends to dst the ids Ready(now) lists, in its order.
	ReadyIDs(now time.Time, dst []string) []string
	// InFlightIDs appends to dst the ids of the in-flight withdrawals
	// (signing … broadcast) that no worker other than worker holds a live
	// lease on at now.
	InFlightIDs(now time.Time, worker string, dst []string) []string
}

// Folder is what a Work lister may also offer: an open withdrawal as it
// folded it and the position of the last event folded. A worker taking a
// withdrawal it does not hold starts from there (Repo.WithdrawalSince)
// instead of reading every event of the stream; the append that follows
// is fenced by the position the read ends at, as after any load.
type Folder interface {
	Folded(id string) (aggregate.Withdrawal, eventstore.Position, bool)
}

// Defaults of WorkerConfig.
const (
	DefaultLease            = 30 * time.Second
	DefaultExpirationWindow = tron.DefaultExpiration // 60 s of chain time
	DefaultExpiryMargin     = 30 * time.Second       // chain time beyond expiration before a rebuild
	DefaultMaxAttempts      = 3
	DefaultPollInterval     = time.Second
	DefaultNodeTimeout      = 10 * time.Second
	// DefaultInflight: at a hosted node's 100–300 ms round trip, 256
	// drives at once let one worker start ~850–2,500 sends a second,
	// more than it can sign and append on two cores (~1,200/s); 64 held
	// it at ~210–640. --node-rps and --node-concurrency bound what
	// reaches the node.
	DefaultInflight = 256
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
	// Inflight bounds the withdrawals this worker drives at once (each in
	// its own goroutine; node calls for different withdrawals overlap).
	// Default DefaultInflight; 1 drives one at a time.
	Inflight int
	// Gate, when set, is asked before an approved withdrawal is claimed
	// whether the hot wallet can pay for it (SendGate); nil: always.
	Gate SendGate
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
	c.Inflight = cmp.Or(c.Inflight, DefaultInflight)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.Lease < 0, c.ExpirationWindow < 0, c.ExpiryMargin < 0, c.PollInterval < 0, c.NodeTimeout < 0:
		return errors.New("sagas: worker config: durations must not be negative")
	case c.ExpirationWindow > tron.MaxExpiration:
		return fmt.Errorf("sagas: worker config: expiration window %v exceeds TRON's maximum %v", c.ExpirationWindow, tron.MaxExpiration)
	case c.Inflight < 1:
		return errors.New("sagas: worker config: Inflight must be at least 1")
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
// A Worker pipelines: it drives up to Inflight withdrawals at once, each
// in its own goroutine, so node calls for different withdrawals overlap.
// One withdrawal is never driven by two goroutines of the same worker, and
// each is still fenced by its own stream position: every append is at the
// position its driver last saw. Its methods may be called from any
// goroutine.
type Worker struct {
	cfg  WorkerConfig
	log  *slog.Logger
	wake chan struct{}
	dead atomic.Bool
	// solidScan and headScan say when a block scan starts and stops
	// failing (see scanHealth).
	solidScan, headScan scanHealth

	steps sync.Mutex // one Step (or Drive) at a time; Run dispatches on its own

	mu     sync.Mutex         // guards held, busy and rounds
	held   map[string]*flight // withdrawals this worker holds a claim on, at the position it last saw
	busy   map[string]bool    // withdrawals a goroutine of this worker is driving now
	rounds uint64
	spread uint64 // where in the ready queue this worker starts, so workers do not all race for the same one

	chain *chainWatch // the solid blocks this worker follows for its txids (watch.go)
	view  *chainView  // head and reference block, read once per round (watch.go)
}

// flight is a withdrawal in a worker's hands: the state it decided against
// and the position it must append at. The position is the fence: any
// append by someone else since makes the next one of ours fail. Only the
// goroutine driving it touches it.
type flight struct {
	w     aggregate.Withdrawal
	pos   eventstore.Position
	moved int // events appended in this drive, lease renewals excluded
	txs   *txMemory
	chain *chainWatch
}

// txMemory is what a worker remembers about its own dealings with a
// withdrawal's txids, between visits. It is memory only, dropped with the
// flight: a worker that lost it does what any other worker would — asks
// the chain by txid.
type txMemory struct {
	// sentAt: txid → head block number at this worker's last send of it.
	sentAt map[string]int64
	// rejected holds the hard rejects (SIGERROR, BANDWITH_ERROR, …) this
	// worker got for a txid: it sends those bytes no more, and once the
	// chain-time proof holds the withdrawal fails with node_rejected
	// instead of being rebuilt. A worker that lost it sends once more and
	// is refused again (or, past the expiration, rebuilds on the proof as
	// for any unseen envelope).
	rejected map[string]tron.BroadcastResult
	// scans holds the proofs of death in progress, by txid (proof.go).
	scans map[string]*expiryScan
	// accepted holds the node's acceptance of a send by this worker, kept
	// in hand rather than appended: the withdrawal stays broadcasting in
	// the log and is confirmed straight from there when its solid block is
	// found. A worker that lost it reconciles by txid (and records the
	// acceptance it finds), as after any crash.
	accepted map[string]string
	// seen: txids a lookup found included since this worker's send; until
	// then, unless the head block scan saw the txid in a block since the
	// send (chainWatch.included), the worker asks (was the transaction
	// dropped?) once dropCheckBlocks heads have passed since its send and
	// then at most once per head block (askedAt: the head of the last
	// ask); after it only the block scan does.
	seen    map[string]bool
	askedAt map[string]int64
}

// mem returns the flight's txid memory, making it on first use.
func (f *flight) mem() *txMemory {
	if f.txs == nil {
		f.txs = &txMemory{
			sentAt: map[string]int64{}, rejected: map[string]tron.BroadcastResult{},
			scans: map[string]*expiryScan{}, accepted: map[string]string{}, seen: map[string]bool{},
			askedAt: map[string]int64{},
		}
	}
	return f.txs
}

// forget drops what the worker remembers about its sends of txid.
func (f *flight) forget(txid string) {
	if id, err := tron.ParseTxID(txid); err == nil && f.chain != nil {
		f.chain.unwatch(id)
	}
	if f.txs == nil {
		return
	}
	delete(f.txs.sentAt, txid)
	delete(f.txs.rejected, txid)
	delete(f.txs.scans, txid)
	delete(f.txs.accepted, txid)
	delete(f.txs.seen, txid)
	delete(f.txs.askedAt, txid)
}

// NewWorker validates cfg (filling defaults) and returns a worker.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	h := fnv.New64a()
	h.Write([]byte(cfg.ID))
	return &Worker{
		cfg:    cfg,
		log:    cfg.Logger.With("worker", cfg.ID),
		wake:   make(chan struct{}, 1),
		held:   map[string]*flight{},
		busy:   map[string]bool{},
		spread: h.Sum64(),
		chain:  newChainWatch(),
		view:   &chainView{},
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

// driven is the end of one drive, as Run's dispatcher learns it.
type driven struct {
	id    string
	moved bool
	err   error
}

// Run drives withdrawals until ctx ends (returning nil) or a crash hook
// kills the worker (returning ErrCrashed, once every drive in flight has
// stopped). It keeps up to Inflight drives going. When notified (Notify:
// a withdrawal became ready, a block came) and every PollInterval (leases
// lapse and chains move without telling anyone) it lists new work at
// once — the ready queue and lapsed in-flight withdrawals — and follows
// the solid blocks (watch.go) beside the drives, never in their way; once
// the scan is done it visits the withdrawals it holds too, which wait for
// what the scan finds. Candidates listed but left over for lack of a slot
// are taken, in their order, as drives end — without listing again,
// without a node call, and without visiting again the withdrawals that
// wait for the chain.
func (wk *Worker) Run(ctx context.Context) error {
	t := time.NewTicker(wk.cfg.PollInterval)
	defer t.Stop()
	done := make(chan driven, wk.cfg.Inflight)
	running := 0
	followed := make(chan struct{}, 1)
	following, again := false, false
	follow := func() {
		if following {
			again = true
			return
		}
		following = true
		go func() {
			wk.follow(ctx)
			followed <- struct{}{}
		}()
	}
	stop := func(err error) error {
		for ; running > 0; running-- {
			<-done
		}
		if following {
			<-followed
		}
		return err
	}
	lookNew, lookAll := true, false // list new work; list it with the held withdrawals
	var ids []string                // the last listing (reused)
	var queue []string              // what is left of it for lack of a slot
	finished := func(d driven) {
		running--
		wk.report(ctx, d.id, d.err)
	}
	follow()
	for {
		if wk.dead.Load() {
			return stop(ErrCrashed)
		}
		if ctx.Err() != nil {
			return stop(nil)
		}
		if (lookNew || lookAll || len(queue) > 0) && running < wk.cfg.Inflight {
			if lookNew || lookAll {
				ids = wk.candidates(ids[:0], lookAll)
				queue = ids
				lookNew, lookAll = false, false
			}
			n := 0
			for n < len(queue) && running < wk.cfg.Inflight {
				id := queue[n]
				n++
				if !wk.take(id) {
					continue
				}
				running++
				go func() {
					moved, err := wk.driveTaken(ctx, id)
					done <- driven{id: id, moved: moved, err: err}
				}()
			}
			queue = queue[n:]
		}
		select {
		case <-ctx.Done():
		case <-wk.wake:
			lookNew = true
			wk.view.next(ctx, wk.cfg.Node, wk.nodeCtx)
			follow()
		case <-t.C:
			lookNew = true
			wk.view.next(ctx, wk.cfg.Node, wk.nodeCtx)
			follow()
		case <-followed:
			following = false
			lookAll = true
			if again {
				again = false
				follow()
			}
		case d := <-done:
			finished(d)
			for more := true; more; { // every drive that ended meanwhile
				select {
				case d := <-done:
					finished(d)
				default:
					more = false
				}
			}
		}
	}
}

// Step drives every candidate once, up to Inflight at a time: withdrawals
// this worker holds, the ready queue, and in-flight withdrawals whose
// lease lapsed. It reports whether any withdrawal moved. Errors about one
// withdrawal (a node timeout, a lost race, a store hiccup) are logged and
// do not stop the step; the error returned is ErrCrashed or the context's.
func (wk *Worker) Step(ctx context.Context) (bool, error) {
	wk.steps.Lock()
	defer wk.steps.Unlock()
	if wk.dead.Load() {
		return false, ErrCrashed
	}
	var (
		mu         sync.Mutex
		progressed bool
		crashed    bool
		wg         sync.WaitGroup
	)
	wk.view.expire()
	wk.follow(ctx)
	slots := make(chan struct{}, wk.cfg.Inflight)
	for _, id := range wk.candidates(nil, true) {
		if ctx.Err() != nil || wk.dead.Load() {
			break
		}
		slots <- struct{}{}
		if !wk.take(id) {
			<-slots
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			moved, err := wk.driveTaken(ctx, id)
			mu.Lock()
			progressed = progressed || moved
			crashed = crashed || errors.Is(err, ErrCrashed)
			mu.Unlock()
			wk.report(ctx, id, err)
		}()
	}
	wg.Wait()
	switch {
	case crashed || wk.dead.Load():
		return progressed, ErrCrashed
	case ctx.Err() != nil:
		return progressed, ctx.Err()
	}
	return progressed, nil
}

// follow advances the block scans (watch.go): the solid blocks, then the
// head blocks (on the round's head) for the txids the solid scan has not
// found yet. A failure only delays them.
func (wk *Worker) follow(ctx context.Context) {
	if err := wk.chain.follow(ctx, wk.cfg.Node, wk.nodeCtx); ctx.Err() == nil {
		wk.solidScan.report(wk.log, "block scan", err)
	}
	head := func(ctx context.Context) (tron.BlockHeader, error) {
		return wk.view.headNow(ctx, wk.cfg.Node, wk.nodeCtx)
	}
	if err := wk.chain.followHead(ctx, wk.cfg.Node, wk.nodeCtx, wk.view.known().Number, head); ctx.Err() == nil {
		wk.headScan.report(wk.log, "head block scan", err)
	}
}

// scanHealth logs a block scan's failures when they start (warn) and end
// (info), and the ones in between at debug: a node that lacks a call fails
// every poll, and one line per poll would bury everything else.
type scanHealth struct{ failing atomic.Bool }

func (h *scanHealth) report(log *slog.Logger, scan string, err error) {
	switch {
	case err == nil:
		if h.failing.Swap(false) {
			log.Info(scan + " works again")
		}
	case !h.failing.Swap(true):
		log.Warn(scan+" will retry; until it works, failures are logged at debug level", "err", err)
	default:
		log.Debug(scan+" will retry", "err", err)
	}
}

// report logs the outcome of one drive.
func (wk *Worker) report(ctx context.Context, id string, err error) {
	switch {
	case err == nil, errors.Is(err, ErrCrashed), ctx.Err() != nil:
	case errors.Is(err, ErrFenced):
		wk.log.Debug("lost withdrawal", "withdrawal", id, "err", err)
	case aggregate.CodeOf(err) != "":
		// The domain refused a command this worker decided: a bug, or a
		// configuration the domain will not accept.
		wk.log.Error("command refused", "withdrawal", id, "err", err)
	default:
		wk.log.Warn("will retry", "withdrawal", id, "err", err)
	}
}

// Drive takes one withdrawal as far as it can go now: claims it if nobody
// holds it, then runs state handlers until it is terminal or must wait for
// the chain. It reports whether the withdrawal moved. ErrFenced (wrapped)
// means another worker owns it; ErrCrashed that a crash hook fired. A
// withdrawal another goroutine of this worker is driving is left to it.
func (wk *Worker) Drive(ctx context.Context, id string) (bool, error) {
	wk.steps.Lock()
	defer wk.steps.Unlock()
	if wk.dead.Load() {
		return false, ErrCrashed
	}
	if !wk.take(id) {
		return false, nil
	}
	wk.view.expire()
	wk.follow(ctx)
	return wk.driveTaken(ctx, id)
}

// take marks id as driven by the caller; false if a goroutine of this
// worker already drives it.
func (wk *Worker) take(id string) bool {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	if wk.busy[id] {
		return false
	}
	wk.busy[id] = true
	return true
}

// candidates appends to dst the ids to visit: with held, the withdrawals
// this worker holds first (a goroutine of this worker may be driving
// some: take skips those); then the ready queue from a place of this
// worker's own, then in-flight withdrawals whose lease lapsed — never the
// held ones again.
func (wk *Worker) candidates(dst []string, withHeld bool) []string {
	now := wk.cfg.Clock()
	wk.mu.Lock()
	held := make(map[string]bool, len(wk.held))
	from := len(dst)
	for id := range wk.held {
		held[id] = true
		if withHeld {
			dst = append(dst, id)
		}
	}
	rounds := wk.rounds
	wk.rounds++
	wk.mu.Unlock()
	slices.Sort(dst[from:])
	if ids, ok := wk.cfg.Work.(IDLister); ok {
		mark := len(dst)
		dst = ids.ReadyIDs(now, dst)
		dst = rotate(dst, mark, wk.spread+rounds)
		dst = ids.InFlightIDs(now, wk.cfg.ID, dst)
		// Drop the held ones listed again (and any id listed twice).
		out := dst[:mark]
		for _, id := range dst[mark:] {
			if id != "" && !held[id] {
				held[id] = true
				out = append(out, id)
			}
		}
		return out
	}
	add := func(id string) {
		if id != "" && !held[id] {
			held[id] = true
			dst = append(dst, id)
		}
	}
	ready := wk.cfg.Work.Ready(now)
	if n := uint64(len(ready)); n > 0 {
		start := (wk.spread + rounds) % n
		ready = append(ready[start:len(ready):len(ready)], ready[:start]...)
	}
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
	return dst
}

// rotate turns s[from:] by k places to the left in place (so that workers
// do not all race for the same withdrawal first) and returns s.
func rotate(s []string, from int, k uint64) []string {
	part := s[from:]
	if n := uint64(len(part)); n > 1 {
		k %= n
		slices.Reverse(part[:k])
		slices.Reverse(part[k:])
		slices.Reverse(part)
	}
	return s
}

// maxHandlersPerDrive bounds one drive; a withdrawal's whole life is about
// a dozen transitions, so hitting it means a handler keeps "moving" without
// getting anywhere.
const maxHandlersPerDrive = 32

// driveTaken drives id, which the caller took (take), and releases it.
func (wk *Worker) driveTaken(ctx context.Context, id string) (bool, error) {
	defer func() {
		wk.mu.Lock()
		delete(wk.busy, id)
		wk.mu.Unlock()
	}()
	if wk.dead.Load() {
		return false, ErrCrashed
	}
	wk.mu.Lock()
	f, ok := wk.held[id]
	wk.mu.Unlock()
	if !ok {
		w, pos, err := wk.load(ctx, id)
		if err != nil {
			return false, fmt.Errorf("load withdrawal %s: %w", id, err)
		}
		f = &flight{w: w, pos: pos, chain: wk.chain}
	}
	f.moved = 0
	keep, err := wk.driveFlight(ctx, f)
	wk.mu.Lock()
	if keep && !f.w.Terminal() {
		wk.held[id] = f
	} else {
		// Terminal, lost, or unsure of the position: forget it (and what
		// this worker remembers of its txids). If it is still ours, the
		// next visit reloads it from the stream.
		delete(wk.held, id)
		for _, txid := range append(f.w.RetiredTxIDs(), f.w.TxID()) {
			f.forget(txid)
		}
	}
	wk.mu.Unlock()
	return f.moved > 0, err
}

// load reads a withdrawal this worker does not hold: from the Work lister's
// fold when it offers one (Folder), else from the first event.
func (wk *Worker) load(ctx context.Context, id string) (aggregate.Withdrawal, eventstore.Position, error) {
	if f, ok := wk.cfg.Work.(Folder); ok {
		if w, at, ok := f.Folded(id); ok {
			return wk.cfg.Repo.WithdrawalSince(ctx, id, w, at)
		}
	}
	return wk.cfg.Repo.Withdrawal(ctx, id)
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
		if wk.paused(ctx, f.w) {
			return false, nil // the wallet cannot pay: stays approved
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
	if wk.dead.Load() {
		// Another of this worker's drives crashed: the process is dead,
		// and nothing more reaches the log.
		return ErrCrashed
	}
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
