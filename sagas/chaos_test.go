package sagas_test

// The chaos test: many withdrawals, many workers on separate NATS
// connections, seeded faults on every node channel, crash points armed,
// duplicate requests and approvals racing the workers, a policy tightened
// mid-run, cancellations, and a restart of the embedded server (file
// storage) while workers are mid-step. Then the books must balance: every
// withdrawal ended, money moved at most once per withdrawal and exactly
// once for each confirmed external one, the chain total equals the sum of
// confirmed external amounts, accounts are conserved, every stream is one
// operation id, every event is legal and every rebuild carries its proof.
// Some workers reach the chain through a load balancer that now and then
// answers from a backend lagging the chain, and workers' clocks are skewed
// by minutes: every rebuild's and every failure's proof is then checked
// against the chain itself (sagas.VerifyExpiryProof, VerifyFailure).
//
// WEIR_CHAOS_SEED picks the seed (printed); the test must pass for any.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/big"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/tron"
	"github.com/weir-payouts/weir/tron/nodetest"
)

const (
	chaosDefaultSeed   = 20250601
	chaosWithdrawals   = 72
	chaosWorkers       = 6
	chaosPayers        = 4
	chaosCrashRate     = 0.03 // per crash point passed
	chaosCrashBudget   = 30
	chaosPolicyRound   = 9
	chaosMaxRounds     = 1500
	chaosIntakeRepos   = 3
	chaosCancelPercent = 6
	// chaosLease is 30 rounds of the test clock (1 s a round), longer than
	// an envelope lives (20 blocks, one a round): a withdrawal whose worker
	// died is often resumed only after its envelope expired, so the run
	// exercises the proof of death and rebuilds, not only resends.
	chaosLease = 30 * time.Second
	// chaosMaxSkew bounds how far a worker's clock is off, either way.
	chaosMaxSkew = 2 * time.Minute
)

// chaosRestartRounds are the rounds during which the embedded server is
// shut down under the workers' feet and started again on the same files.
var chaosRestartRounds = []int{14, 45}

var chaosApprovers = []string{"bob", "carol", "dave", "erin", "frank"}

// chaosFeed is a WorkSource folded from the event log by a subscription: a
// minimal ready/in-flight projection that survives a server restart by
// resubscribing after the last sequence it applied. It lags the log a
// little, as a real projection does; workers reload before they act.
type chaosFeed struct {
	mu   sync.Mutex
	ws   map[string]aggregate.Withdrawal
	last uint64
	err  error
}

func (f *chaosFeed) follow(ctx context.Context, store *eventstore.Store) {
	f.mu.Lock()
	from := f.last + 1
	f.mu.Unlock()
	err := store.Subscribe(ctx, from, eventlog.TypeWithdrawal, func(rec eventstore.Record) error {
		e, err := aggregate.DecodeWithdrawalEvent(rec.Type, rec.Payload)
		if err != nil {
			return err
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if rec.Sequence <= f.last {
			return nil
		}
		f.ws[rec.Key.ID] = aggregate.EvolveRecorded(f.ws[rec.Key.ID], e, rec.Time)
		f.last = rec.Sequence
		return nil
	})
	var decodeErr *aggregate.Error
	if errors.As(err, &decodeErr) {
		f.mu.Lock()
		f.err = err
		f.mu.Unlock()
	}
}

func (f *chaosFeed) all() []aggregate.Withdrawal {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]aggregate.Withdrawal, 0, len(f.ws))
	for _, w := range f.ws {
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b aggregate.Withdrawal) int {
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	return out
}

func (f *chaosFeed) Ready(now time.Time) []aggregate.Withdrawal {
	var out []aggregate.Withdrawal
	for _, w := range f.all() {
		if w.ReadyToSend() && !w.Claim.HeldAt(now) {
			out = append(out, w)
		}
	}
	return out
}

func (f *chaosFeed) InFlightWithdrawals(time.Time) []aggregate.Withdrawal {
	var out []aggregate.Withdrawal
	for _, w := range f.all() {
		if w.State.IsInFlight() {
			out = append(out, w)
		}
	}
	return out
}

// chaosPlan is one withdrawal the test will request.
type chaosPlan struct {
	id, payer, to, amount string
	round                 int // when it is first requested
	copies                int // identical requests sent at once
	cancelAt              int // round of a cancellation attempt (0: none)
	requested             atomic.Bool
}

type chaosWorker struct {
	name    string
	gen     int
	w       *sagas.Worker
	crashed atomic.Bool
	// frozenUntil: the worker skips its steps until this round, like a
	// process stopped by a long GC pause or a partition. It wakes up with
	// the positions it held in memory; by then its leases have lapsed and
	// others have moved its withdrawals on, so its appends are refused.
	frozenUntil int
}

type chaosWorld struct {
	t    *testing.T
	ctx  context.Context
	seed uint64
	dir  string
	emb  *eventstoretest.Server
	// serverOpts are added to the server's options on every start.
	serverOpts []eventstoretest.Option
	sim        *tron.SimNode
	signer     *tron.HMACSigner
	clock      *bcClock
	logs       *bcLogs
	feed       *chaosFeed
	custody    map[string]string

	intake []*sagas.Repo
	ledger *sagas.Ledger

	feedStop context.CancelFunc
	feedDone chan struct{}

	workers         []*chaosWorker
	crashRng        *rand.Rand
	crashMu         sync.Mutex
	crashes         atomic.Int32
	restarts        int
	midStepRestarts int
	freezes         int
	// restartArmed: the next crash point passed shuts the server down.
	restartArmed atomic.Bool
	// gateFor is the send gate of the worker called name (nil: none).
	gateFor func(name string) sagas.SendGate
	// receiptRebuilds counts, after verify, the rebuilds after a failed
	// receipt.
	receiptRebuilds int
	// maxAttempts is the workers' MaxAttempts (0: 3).
	maxAttempts int
}

func chaosSeed(t *testing.T) uint64 {
	seed := uint64(chaosDefaultSeed)
	if s := os.Getenv("WEIR_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("WEIR_CHAOS_SEED=%q: %v", s, err)
		}
		seed = v
	}
	return seed
}

func TestChaosEveryWithdrawalEndsAndMoneyMovesAtMostOnce(t *testing.T) {
	chaosRun(t)
}

// The same run on file storage with fsync always and group commit, as weir
// serve runs by default: appends that wait behind one another go out as
// atomic batches (from two waiting, where serve waits for 16, so that this
// run's few make batches), through the same crashes, faults and races.
func TestChaosWithGroupCommitEveryWithdrawalEndsAndMoneyMovesAtMostOnce(t *testing.T) {
	chaosRun(t, eventstoretest.GroupCommit(2))
}

func chaosRun(t *testing.T, opts ...eventstoretest.Option) {
	seed := chaosSeed(t)
	t.Logf("WEIR_CHAOS_SEED=%d", seed)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(seed, 0x63686173))

	cw := newChaosWorld(t, ctx, seed, "weir chaos", map[tron.Fault]float64{
		tron.FaultTimeoutBeforeAccept:   0.05,
		tron.FaultAcceptThenTimeout:     0.05,
		tron.FaultBusy:                  0.04,
		tron.FaultUnknownCode:           0.03,
		tron.FaultFalseExpired:          0.03,
		tron.FaultDupNotAccepted:        0.03,
		tron.FaultConnectionAfterAccept: 0.03,
		tron.FaultDropAfterAccept:       0.10,
		tron.FaultRevert:                0.02,
		tron.FaultOutOfEnergy:           0.01,
		tron.FaultLookupTimeout:         0.06,
		tron.FaultHeadTimeout:           0.05,
	})
	cw.serverOpts = opts
	cw.start()
	defer func() { cw.stopFeed(); cw.emb.Shutdown() }()

	// Destinations: a small pool so addresses repeat; a few are custodied
	// (internal route).
	var dests []string
	for i := range 16 {
		a := bcAddress(fmt.Sprintf("chaos dest %d", i))
		dests = append(dests, a)
		if i%5 == 0 {
			cw.custody[a] = fmt.Sprintf("house-%d", i)
		}
	}
	credited := map[string]aggregate.Amount{}
	for p := range chaosPayers {
		payer := fmt.Sprintf("payer-%d", p)
		amt := bcUSDT("1000000")
		if _, _, err := cw.intake[0].UpdateAccount(ctx, payer, aggregate.Credit{Account: payer, CreditID: "seed", Amount: amt, At: cw.clock.Now()}); err != nil {
			t.Fatal(err)
		}
		credited[payer] = amt
	}
	plans := make([]*chaosPlan, chaosWithdrawals)
	for i := range plans {
		p := &chaosPlan{
			id:     fmt.Sprintf("c4a05000-0000-4000-8000-%012d", i+1),
			payer:  fmt.Sprintf("payer-%d", rng.IntN(chaosPayers)),
			to:     dests[rng.IntN(len(dests))],
			amount: fmt.Sprintf("%d.%02d", 1+rng.IntN(1600), rng.IntN(100)),
			round:  i / 6,
			copies: 1 + rng.IntN(3),
		}
		if i%11 == 3 && i > 0 {
			// A twin: same payer, destination and amount as the one before,
			// requested in the same round.
			prev := plans[i-1]
			p.payer, p.to, p.amount, p.round = prev.payer, prev.to, prev.amount, prev.round
		}
		if rng.IntN(100) < chaosCancelPercent {
			p.cancelAt = p.round + 1 + rng.IntN(6)
		}
		plans[i] = p
	}

	rounds := 0
	for ; rounds < chaosMaxRounds; rounds++ {
		restart := slices.Contains(chaosRestartRounds, rounds)
		cw.restartArmed.Store(restart)
		var wg sync.WaitGroup
		cw.intakeRound(&wg, rounds, plans, rng)
		cw.freeze(rounds, rng)
		cw.stepWorkers(&wg, rounds)
		wg.Wait()
		if restart {
			how := "mid-step, from inside a worker"
			if cw.restartArmed.CompareAndSwap(true, false) {
				// No worker passed a crash point this round: stop between steps.
				cw.emb.Shutdown()
				how = "between steps"
			} else {
				cw.midStepRestarts++
			}
			cw.stopFeed()
			cw.restarts++
			t.Logf("round %d: embedded server shut down %s and restarted on %s", rounds, how, cw.dir)
			cw.start()
		}
		if rounds == chaosPolicyRound {
			cw.tightenPolicy()
		}
		cw.replaceCrashed()
		if cw.endRound(rounds, plans) {
			break
		}
	}
	if rounds >= chaosMaxRounds {
		cw.logStuck()
		t.Fatalf("not every withdrawal ended after %d rounds", rounds)
	}
	t.Logf("seed %d: %d rounds, %d crashes, %d freezes, %d restarts, faults %v", seed, rounds, cw.crashes.Load(), cw.freezes, cw.restarts, cw.sim.FaultCounts())
	cw.verify(plans, credited)
	cw.requireChaos()
}

// gate is the send gate of the worker called name, if any.
func (cw *chaosWorld) gate(name string) sagas.SendGate {
	if cw.gateFor == nil {
		return nil
	}
	return cw.gateFor(name)
}

// newChaosWorld is a world on a simulated chain (seeded faults at these
// rates) that accepts the signatures of an HMAC signer keyed by key; the
// log's last lines are printed when the test fails (all of them with
// WEIR_TEST_LOG set). Call start to run it.
func newChaosWorld(t *testing.T, ctx context.Context, seed uint64, key string, faults map[tron.Fault]float64) *chaosWorld {
	signer := tron.NewHMACSigner([]byte(key))
	cw := &chaosWorld{
		t: t, ctx: ctx, seed: seed, dir: t.TempDir(), signer: signer,
		clock: newBCClock(), logs: newBCLogs(),
		feed:     &chaosFeed{ws: map[string]aggregate.Withdrawal{}},
		custody:  map[string]string{},
		crashRng: rand.New(rand.NewPCG(seed, 0x6372617368)),
		sim: tron.NewSimNode(tron.SimConfig{
			Seed: int64(seed), Verifiers: []tron.SignatureVerifier{signer}, FaultRates: faults,
		}),
	}
	cw.sim.Advance(bcStartBlk)
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("WEIR_TEST_LOG") != "" {
			lines := cw.logs.Lines()
			if os.Getenv("WEIR_TEST_LOG") == "" {
				lines = lines[max(0, len(lines)-200):]
			}
			for _, l := range lines {
				t.Log(l)
			}
		}
	})
	return cw
}

// start (re)starts the embedded server on the test's directory and
// connects everything anew, as a restarted process would: intake, ledger,
// the feed, and the workers (same names, fresh memory).
func (cw *chaosWorld) start() {
	t := cw.t
	emb := eventstoretest.Start(t, append([]eventstoretest.Option{eventstoretest.File(cw.dir)}, cw.serverOpts...)...)
	cw.emb = emb
	cw.intake = cw.intake[:0]
	for range chaosIntakeRepos {
		cw.intake = append(cw.intake, sagas.NewRepo(bcOpenStore(cw.ctx, emb)))
	}
	cw.ledger = sagas.NewLedger(cw.intake[0], aggregate.Amount{}, cw.clock.Now, slog.New(cw.logs))
	feedStore := bcOpenStore(cw.ctx, emb)
	fctx, stop := context.WithCancel(cw.ctx)
	cw.feedStop, cw.feedDone = stop, make(chan struct{})
	go func() {
		defer close(cw.feedDone)
		cw.feed.follow(fctx, feedStore)
	}()
	if cw.workers == nil {
		for i := range chaosWorkers {
			cw.workers = append(cw.workers, &chaosWorker{name: fmt.Sprintf("w%d", i)})
		}
	}
	for i, w := range cw.workers {
		// A restarted process has no memory: frozen or not, it comes back
		// with the same id and nothing held.
		cw.workers[i] = cw.newWorker(w.name, w.gen)
	}
}

func (cw *chaosWorld) stopFeed() {
	if cw.feedStop != nil {
		cw.feedStop()
		<-cw.feedDone
	}
}

func (cw *chaosWorld) newWorker(name string, gen int) *chaosWorker {
	id := name
	if gen > 0 {
		id = fmt.Sprintf("%s.%d", name, gen)
	}
	node, skew := cw.view(name)
	w, err := sagas.NewWorker(sagas.WorkerConfig{
		ID: id, Repo: sagas.NewRepo(bcOpenStore(cw.ctx, cw.emb)), Node: node, Signer: cw.signer,
		Work: cw.feed,
		Custody: func(to string) (string, bool) {
			a, ok := cw.custody[to]
			return a, ok
		},
		Clock: func() time.Time { return cw.clock.Now().Add(skew) },
		Lease: chaosLease, ExpirationWindow: bcWindow, ExpiryMargin: bcMargin,
		MaxAttempts: cmp.Or(cw.maxAttempts, 3), NodeTimeout: 5 * time.Second, Logger: slog.New(cw.logs),
		Crash: cw.crashHook, Gate: cw.gate(name),
	})
	if err != nil {
		cw.t.Fatal(err)
	}
	return &chaosWorker{name: name, gen: gen, w: w}
}

// view is how the worker called name (every generation of it) sees the
// world, fixed by the seed: its clock's skew, up to chaosMaxSkew either
// way, and its node — the chain itself, or a load balancer that sends a
// seeded share of calls to a backend lagging the chain by a few dozen
// blocks, as hosted endpoints do.
func (cw *chaosWorld) view(name string) (tron.Node, time.Duration) {
	rng := rand.New(rand.NewPCG(cw.seed, fnv64(name)))
	skew := time.Duration(rng.Int64N(int64(2*chaosMaxSkew)+1)) - chaosMaxSkew
	if rng.IntN(2) == 0 {
		return cw.sim, skew
	}
	lag := &nodetest.Lagging{Sim: cw.sim, Behind: 4 + rng.Int64N(40)}
	share := 0.1 + 0.3*rng.Float64()
	route := func(seq int, _ tron.NodeMethod) int {
		if rand.New(rand.NewPCG(cw.seed, uint64(seq))).Float64() < share {
			return 1
		}
		return 0
	}
	return nodetest.NewBalanced(route, cw.sim, lag), skew
}

// patient asks the seeded-faulty chain again after a timeout, so the
// final check of every proof reads the chain rather than its faults.
type patient struct{ *tron.SimNode }

func (p patient) SolidBlockByNum(ctx context.Context, num int64) (tron.Block, error) {
	for {
		b, err := p.SimNode.SolidBlockByNum(ctx, num)
		if !errors.Is(err, tron.ErrTimeout) || ctx.Err() != nil {
			return b, err
		}
	}
}

func (p patient) SolidTxInfosByBlockNum(ctx context.Context, num int64) ([]tron.TxInfo, error) {
	for {
		in, err := p.SimNode.SolidTxInfosByBlockNum(ctx, num)
		if !errors.Is(err, tron.ErrTimeout) || ctx.Err() != nil {
			return in, err
		}
	}
}

func fnv64(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// crashHook kills a worker at a seeded fraction of the crash points it
// passes, within a budget. In a restart round, the first worker to pass a
// crash point shuts the server down right there and carries on: it and
// every other worker mid-step find their connections gone in the middle of
// a withdrawal.
func (cw *chaosWorld) crashHook(sagas.CrashPoint, string) bool {
	if cw.restartArmed.CompareAndSwap(true, false) {
		cw.emb.Shutdown()
		return false
	}
	cw.crashMu.Lock()
	defer cw.crashMu.Unlock()
	if cw.crashRng.Float64() >= chaosCrashRate || cw.crashes.Load() >= chaosCrashBudget {
		return false
	}
	cw.crashes.Add(1)
	return true
}

// stepWorkers has every worker that is not frozen take one step, each in
// a goroutine of wg; a worker that crashed is marked for replaceCrashed.
func (cw *chaosWorld) stepWorkers(wg *sync.WaitGroup, round int) {
	for _, w := range cw.workers {
		if w.frozenUntil > round {
			continue
		}
		wg.Go(func() {
			if _, err := w.w.Step(cw.ctx); errors.Is(err, sagas.ErrCrashed) {
				w.crashed.Store(true)
			}
		})
	}
}

// endRound moves the chain a block and the clock a second, and reports
// whether the run is over: every plan requested and every withdrawal
// ended.
func (cw *chaosWorld) endRound(round int, plans []*chaosPlan) bool {
	cw.sim.Advance(1)
	cw.clock.Advance(time.Second)
	return round > plans[len(plans)-1].round+1 && cw.allTerminal(plans)
}

// logStuck names every withdrawal that has not ended.
func (cw *chaosWorld) logStuck() {
	for _, w := range cw.feed.all() {
		if !w.Terminal() {
			cw.t.Logf("stuck: %s %s claim=%s attempt=%d", w.ID, w.State, w.Claim.Worker, w.Attempt)
		}
	}
}

// freeze now and then stops one worker for longer than a lease (never
// more than one at a time, so the others keep the run moving).
func (cw *chaosWorld) freeze(round int, rng *rand.Rand) {
	for _, w := range cw.workers {
		if w.frozenUntil > round {
			return
		}
	}
	if rng.IntN(100) < 4 {
		w := cw.workers[rng.IntN(len(cw.workers))]
		w.frozenUntil = round + int(chaosLease/time.Second) + 5 + rng.IntN(10)
		cw.freezes++
	}
}

// replaceCrashed starts a new process for every dead worker: a new
// generation, a new id, a new connection. The dead one's claims lapse with
// their leases.
func (cw *chaosWorld) replaceCrashed() {
	for i, w := range cw.workers {
		if w.crashed.Load() {
			cw.workers[i] = cw.newWorker(w.name, w.gen+1)
		}
	}
}

// intakeRound sends this round's requests (each as several identical
// concurrent requests from different connections), completes
// reservations, approves what waits for approval (each approval twice at
// once), and tries the planned cancellations — all concurrently with the
// workers' steps.
func (cw *chaosWorld) intakeRound(wg *sync.WaitGroup, round int, plans []*chaosPlan, rng *rand.Rand) {
	policy := cw.policy()
	for _, p := range plans {
		if p.round > round || p.requested.Load() {
			continue
		}
		cmd := aggregate.RequestWithdrawal{ID: p.id, Account: p.payer, ToAddress: p.to, Amount: bcUSDT(p.amount),
			RequestedBy: "alice", Policy: policy, At: cw.clock.Now()}
		var ok atomic.Int32
		var inner sync.WaitGroup
		for c := range p.copies {
			repo := cw.intake[c%len(cw.intake)]
			inner.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer inner.Done()
				if _, _, err := repo.UpdateWithdrawal(cw.ctx, p.id, func(aggregate.Withdrawal) (aggregate.Command, error) { return cmd, nil }); err == nil {
					ok.Add(1)
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			inner.Wait()
			if ok.Load() > 0 {
				p.requested.Store(true)
				_, _ = cw.ledger.Reserve(cw.ctx, p.id)
			}
		}()
	}
	for _, w := range cw.feed.all() {
		if !w.Exists() || w.Terminal() {
			continue
		}
		if !w.Reserved {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = cw.ledger.Reserve(cw.ctx, w.ID)
			}()
		}
		if w.State != aggregate.StateRequested {
			continue
		}
		by := ""
		for _, a := range chaosApprovers {
			if !w.HasApproval(a) {
				by = a
				break
			}
		}
		if by == "" {
			continue
		}
		for c := range 2 {
			repo := cw.intake[(c+rng.IntN(len(cw.intake)))%len(cw.intake)]
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, _ = repo.UpdateWithdrawal(cw.ctx, w.ID, func(aggregate.Withdrawal) (aggregate.Command, error) {
					return aggregate.Approve{By: by, Policy: policy, At: cw.clock.Now()}, nil
				})
			}()
		}
	}
	for _, p := range plans {
		if p.cancelAt != round {
			continue
		}
		repo := cw.intake[rng.IntN(len(cw.intake))]
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, _ = repo.UpdateWithdrawal(cw.ctx, p.id, func(w aggregate.Withdrawal) (aggregate.Command, error) {
				if !w.Exists() {
					return nil, errors.New("not yet requested")
				}
				return aggregate.Cancel{By: "alice", At: cw.clock.Now()}, nil
			})
		}()
	}
}

func (cw *chaosWorld) policy() aggregate.Policy {
	s, _, err := cw.intake[0].Policy(cw.ctx)
	if err != nil || s.Policy.Version == 0 {
		return aggregate.DefaultPolicy()
	}
	return s.Policy
}

// tightenPolicy puts four-eyes above 500 in force mid-run: approved
// withdrawals between 500 and 1000 with one approval that no worker has
// built yet go back to requested and need another approver.
func (cw *chaosWorld) tightenPolicy() {
	p, err := aggregate.FourEyes(bcUSDT("500"))
	if err != nil {
		cw.t.Fatal(err)
	}
	if _, err := cw.intake[0].SetPolicy(cw.ctx, aggregate.SetPolicy{Policy: p, By: "ops", At: cw.clock.Now()}); err != nil {
		cw.t.Fatal(err)
	}
}

func (cw *chaosWorld) allTerminal(plans []*chaosPlan) bool {
	for _, p := range plans {
		if !p.requested.Load() {
			return false
		}
	}
	seen := cw.feed.all()
	if len(seen) < len(plans) {
		return false
	}
	for _, w := range seen {
		if !w.Terminal() {
			return false
		}
	}
	return true
}

// verify checks the books from the log, the chain and the accounts.
func (cw *chaosWorld) verify(plans []*chaosPlan, credited map[string]aggregate.Amount) {
	t, ctx := cw.t, cw.ctx
	cw.feed.mu.Lock()
	feedErr := cw.feed.err
	cw.feed.mu.Unlock()
	if feedErr != nil {
		t.Fatalf("feed: %v", feedErr)
	}
	repo := sagas.NewRepo(bcOpenStore(ctx, cw.emb))
	store := repo.Store()

	// One stream per operation id, nothing else.
	streams := map[string]int{}
	if _, err := store.ReadAll(ctx, 1, eventlog.TypeWithdrawal, func(rec eventstore.Record) error {
		streams[rec.Key.ID]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(streams) != len(plans) {
		t.Fatalf("%d withdrawal streams for %d operation ids", len(streams), len(plans))
	}

	owner := map[string]string{} // txid → withdrawal
	ws := map[string]aggregate.Withdrawal{}
	var (
		externalConfirmed = new(big.Int)
		settledBy         = map[string]aggregate.Amount{}
		received          = map[string]aggregate.Amount{}
		states            = map[string]int{}
		rebuilds          int
		receiptRebuilds   int
		invalidated       int
		// failedRetired are txids retired after a failed receipt: on
		// chain, failed.
		failedRetired = map[string]bool{}
	)
	for _, p := range plans {
		recs, err := repo.WithdrawalRecords(ctx, p.id)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != streams[p.id] {
			t.Fatalf("%s: %d events loaded, %d in the log", p.id, len(recs), streams[p.id])
		}
		evs, err := eventlog.WithdrawalEvents(recs)
		if err != nil {
			t.Fatal(err)
		}
		times := make([]time.Time, len(recs))
		for i, rec := range recs {
			times[i] = rec.Time
		}
		w, err := aggregate.AuditRecorded(evs, times)
		if err != nil {
			t.Fatalf("%s: %v", p.id, err)
		}
		if !w.Terminal() {
			t.Fatalf("%s ended the run in %s", p.id, w.State)
		}
		if bcCount(evs, aggregate.EventRequested) != 1 {
			t.Fatalf("%s: %d creation events", p.id, bcCount(evs, aggregate.EventRequested))
		}
		if w.Account != p.payer || w.ToAddress != p.to || !w.Amount.Equal(bcUSDT(p.amount)) {
			t.Fatalf("%s: stream says %s %s→%s, the request was %s %s→%s", p.id, w.Amount, w.Account, w.ToAddress, p.amount, p.payer, p.to)
		}
		// Every rebuild's and every failure's proof, checked against the
		// chain itself.
		var (
			env    aggregate.Envelope
			signed bool
		)
		for _, e := range evs {
			switch ev := e.(type) {
			case aggregate.EnvelopeBuilt:
				env, signed = ev.Envelope, false
			case aggregate.EnvelopeReplaced:
				env, signed = ev.Envelope, false
			case aggregate.Signed:
				signed = true
			case aggregate.Rebuilt:
				rebuilds++
				landed, onChain := cw.sim.TransferByTxID(bcTxID(t, ev.RetiredTxID))
				if ev.Receipt != nil {
					// A failed receipt rebuilt (the wallet could not pay it):
					// on chain, failed, as recorded.
					receiptRebuilds++
					if err := sagas.VerifyReceipt(ctx, patient{cw.sim}, env, *ev.Receipt); err != nil {
						t.Fatalf("%s: rebuild receipt %+v: %v", p.id, ev.Receipt, err)
					}
					if !onChain || landed.Receipt == tron.ReceiptSuccess {
						t.Fatalf("%s: retired txid %s: on chain %v, %+v", p.id, ev.RetiredTxID, onChain, landed)
					}
					failedRetired[ev.RetiredTxID] = true
				} else {
					if err := sagas.VerifyExpiryProof(ctx, patient{cw.sim}, env, ev.Evidence); err != nil || ev.Evidence.Margin != bcMargin.Milliseconds() {
						t.Fatalf("%s: rebuild evidence %+v: %v", p.id, ev.Evidence, err)
					}
					if onChain {
						t.Fatalf("%s: retired txid %s is on chain", p.id, ev.RetiredTxID)
					}
				}
				env, signed = ev.Envelope, false
			case aggregate.Failed:
				if err := sagas.VerifyFailure(ctx, patient{cw.sim}, env, signed, ev); err != nil {
					t.Fatalf("%s: failed %s: %v", p.id, ev.Reason, err)
				}
			}
		}
		for _, txid := range append(w.RetiredTxIDs(), w.TxID()) {
			if txid == "" {
				continue
			}
			if o, dup := owner[txid]; dup {
				t.Fatalf("txid %s belongs to %s and %s", txid, o, p.id)
			}
			owner[txid] = p.id
		}
		invalidated += bcCount(evs, aggregate.EventApprovalsInvalidated)
		ws[p.id] = w
		states[string(w.State)+"/"+w.Reason]++
		if w.State == aggregate.StateConfirmed {
			settledBy[w.Account] = settledBy[w.Account].Add(w.Amount)
			if w.Route.IsInternal() {
				received[w.Route.Account()] = received[w.Route.Account()].Add(w.Amount)
			} else {
				externalConfirmed.Add(externalConfirmed, w.Amount.Units())
			}
		}
	}

	// The chain: every included transfer is one of ours, at most one per
	// withdrawal, and the only successful one of a confirmed external
	// withdrawal is the confirmed txid.
	included := map[string][]tron.Transfer{}
	for _, tx := range cw.sim.Transfers() {
		id, ok := owner[tron.HexID(tx.TxID)]
		if !ok {
			t.Fatalf("chain holds %s, which no withdrawal wrote ahead", tron.HexID(tx.TxID))
		}
		included[id] = append(included[id], tx)
	}
	for id, w := range ws {
		// A transaction retired after its failed receipt stays on chain
		// (failed); besides those, at most one per withdrawal.
		txs := slices.DeleteFunc(included[id], func(tx tron.Transfer) bool {
			return failedRetired[tron.HexID(tx.TxID)] && tx.Receipt != tron.ReceiptSuccess
		})
		if len(txs) > 1 {
			t.Fatalf("%s: %d transactions included", id, len(txs))
		}
		success := len(txs) == 1 && txs[0].Receipt == tron.ReceiptSuccess
		switch {
		case w.State == aggregate.StateConfirmed && w.Route.IsExternal():
			if !success || tron.HexID(txs[0].TxID) != w.Confirmation.TxID || txs[0].Amount.Cmp(w.Amount.Units()) != 0 {
				t.Fatalf("%s confirmed %s but the chain has %+v", id, w.Confirmation.TxID, txs)
			}
		case success:
			t.Fatalf("%s is %s (%s) but paid on chain by %s", id, w.State, w.Reason, tron.HexID(txs[0].TxID))
		}
		if w.Route.IsInternal() && len(txs) != 0 {
			t.Fatalf("%s: internal route with a chain transaction", id)
		}
	}
	for _, s := range cw.sim.BroadcastLog() {
		if _, ok := owner[tron.HexID(s.TxID)]; !ok {
			t.Fatalf("the node was sent %s, which no withdrawal wrote ahead", tron.HexID(s.TxID))
		}
	}
	if total := cw.sim.Ledger().Total; total.Cmp(externalConfirmed) != 0 {
		t.Fatalf("the chain moved %s units; confirmed external withdrawals add up to %s", total, externalConfirmed)
	}

	// The ledger: settle/release every terminal withdrawal (twice: it is
	// idempotent), then each account's stream must audit clean, hold
	// nothing in reserve, and have settled exactly its confirmed amounts.
	ledger := sagas.NewLedger(repo, aggregate.Amount{}, cw.clock.Now, slog.New(cw.logs))
	for range 2 {
		for _, w := range ws {
			if err := ledger.Finish(ctx, w); err != nil {
				t.Fatalf("finish %s: %v", w.ID, err)
			}
		}
	}
	accounts := map[string]bool{}
	for payer := range credited {
		accounts[payer] = true
	}
	for acct := range received {
		accounts[acct] = true
	}
	for acct := range accounts {
		recs, _, err := store.Load(ctx, eventstore.Key{Type: eventlog.TypeAccount, ID: acct})
		if err != nil {
			t.Fatal(err)
		}
		evs, err := eventlog.AccountEvents(recs)
		if err != nil {
			t.Fatal(err)
		}
		a, err := aggregate.AuditAccount(evs)
		if err != nil {
			t.Fatalf("account %s: %v", acct, err)
		}
		want := credited[acct].Add(received[acct])
		switch {
		case !a.Reserved().IsZero():
			t.Fatalf("account %s still reserves %s", acct, a.Reserved())
		case !a.Settled().Equal(settledBy[acct]):
			t.Fatalf("account %s settled %s; its confirmed withdrawals add up to %s", acct, a.Settled(), settledBy[acct])
		case !a.Credited().Equal(want):
			t.Fatalf("account %s was credited %s, want %s", acct, a.Credited(), want)
		case !a.Available().Add(a.Settled()).Equal(a.Credited()):
			t.Fatalf("account %s: available %s + settled %s != credited %s", acct, a.Available(), a.Settled(), a.Credited())
		}
	}
	if errs := cw.logs.Errors(); len(errs) > 0 {
		t.Fatalf("the saga logged %d errors, first: %s", len(errs), errs[0])
	}
	cw.receiptRebuilds = receiptRebuilds
	t.Logf("outcomes %v; %d rebuilds (%d after a failed receipt); %d approvals invalidated by the policy change; %d times a worker was fenced off a withdrawal; %d transient errors retried; chain %+v",
		states, rebuilds, receiptRebuilds, invalidated, cw.logs.Count("lost withdrawal"), cw.logs.Count("will retry"), cw.sim.Ledger())
}

// requireChaos fails a run that was too calm to prove anything: no
// restart mid-step, no crash, a node channel without faults, no worker
// ever fenced.
func (cw *chaosWorld) requireChaos() {
	t := cw.t
	if cw.midStepRestarts < 1 || cw.crashes.Load() < 1 {
		t.Fatalf("%d restarts (%d mid-step), %d crashes: the run was not chaotic enough", cw.restarts, cw.midStepRestarts, cw.crashes.Load())
	}
	faults := cw.sim.FaultCounts()
	for _, ch := range []tron.Channel{tron.ChannelBroadcast, tron.ChannelLookup, tron.ChannelHead} {
		n := 0
		for _, f := range tron.Faults(ch) {
			n += faults[f]
		}
		if n == 0 {
			t.Fatalf("no fault was injected on channel %s", ch)
		}
	}
	if cw.logs.Count("lost withdrawal") == 0 {
		t.Fatal("no worker was ever fenced: the run did not race")
	}
}
