package sagas_test

// The broadcast saga's test rig: a real embedded NATS server (memory
// storage), the real event store and repo, the real ledger saga, and a
// SimNode whose chain clock only moves when a test says so. Nothing here
// fakes NATS; the only stand-ins are a wall clock the test controls (for
// leases) and a work source that reads withdrawals from the store.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/tron"
)

// Chain-time parameters shared by the tests (the simulated chain makes a
// block every 3 s of chain time and a block solid 19 blocks later).
const (
	bcWindow   = 60 * time.Second
	bcMargin   = 6 * time.Second
	bcLease    = 30 * time.Second
	bcAccount  = "acct-payer"
	bcFunds    = "1000000"
	bcStartBlk = 40 // blocks produced before a test starts, so the solid head is a real block
)

// bcClock is a wall clock the test moves by hand. Only leases read it.
type bcClock struct {
	mu sync.Mutex
	t  time.Time
}

func newBCClock() *bcClock {
	return &bcClock{t: time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)}
}

func (c *bcClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *bcClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// bcLogs is an slog handler for tests: it keeps every record at Warn and
// above (printed with t.Log when WEIR_TEST_LOG is set, or on failure), and
// counts Error records, which the saga only emits for bugs.
type bcLogs struct {
	mu     sync.Mutex
	lines  []string
	errors []string
	counts map[string]int // records by message, whatever their level
	attrs  []slog.Attr
	parent *bcLogs
	level  slog.Level
}

func newBCLogs() *bcLogs {
	l := &bcLogs{level: slog.LevelWarn, counts: map[string]int{}}
	if os.Getenv("WEIR_TEST_LOG") != "" {
		l.level = slog.LevelDebug
	}
	return l
}

func (l *bcLogs) root() *bcLogs {
	if l.parent != nil {
		return l.parent.root()
	}
	return l
}

func (l *bcLogs) Enabled(context.Context, slog.Level) bool { return true }

func (l *bcLogs) Handle(_ context.Context, r slog.Record) error {
	root := l.root()
	root.mu.Lock()
	root.counts[r.Message]++
	level := root.level
	root.mu.Unlock()
	if r.Level < level {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	for _, a := range l.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	root.mu.Lock()
	defer root.mu.Unlock()
	root.lines = append(root.lines, b.String())
	if r.Level >= slog.LevelError {
		root.errors = append(root.errors, b.String())
	}
	return nil
}

func (l *bcLogs) WithAttrs(as []slog.Attr) slog.Handler {
	return &bcLogs{parent: l.root(), attrs: append(slices.Clone(l.attrs), as...)}
}

func (l *bcLogs) WithGroup(string) slog.Handler { return l }

func (l *bcLogs) Errors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.errors)
}

// Count returns how many records had this message.
func (l *bcLogs) Count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[msg]
}

func (l *bcLogs) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

// bcScan is a WorkSource that loads a known list of withdrawals from the
// store on every call: always current, no projection lag, fine for a
// handful of withdrawals.
type bcScan struct {
	repo *sagas.Repo
	mu   sync.Mutex
	ids  []string
}

func (s *bcScan) add(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.ids, id) {
		s.ids = append(s.ids, id)
	}
}

func (s *bcScan) load() []aggregate.Withdrawal {
	s.mu.Lock()
	ids := slices.Clone(s.ids)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := make([]aggregate.Withdrawal, 0, len(ids))
	for _, id := range ids {
		w, _, err := s.repo.Withdrawal(ctx, id)
		if err == nil && w.Exists() {
			out = append(out, w)
		}
	}
	return out
}

func (s *bcScan) Ready(now time.Time) []aggregate.Withdrawal {
	var out []aggregate.Withdrawal
	for _, w := range s.load() {
		if w.ReadyToSend() && !w.Claim.HeldAt(now) {
			out = append(out, w)
		}
	}
	return out
}

func (s *bcScan) InFlightWithdrawals(time.Time) []aggregate.Withdrawal {
	var out []aggregate.Withdrawal
	for _, w := range s.load() {
		if w.State.IsInFlight() {
			out = append(out, w)
		}
	}
	return out
}

// bcRig is one test's world.
type bcRig struct {
	t       *testing.T
	ctx     context.Context
	emb     *eventstoretest.Server
	repo    *sagas.Repo
	ledger  *sagas.Ledger
	sim     *tron.SimNode
	node    *tron.Observed
	signer  *tron.HMACSigner
	clock   *bcClock
	logs    *bcLogs
	work    *bcScan
	custody map[string]string
	seq     int
	// allowErrors lets a test that provokes refused commands on purpose
	// keep its Error log lines.
	allowErrors bool
}

type bcOption func(*tron.SimConfig)

func newBCRig(t *testing.T, opts ...bcOption) *bcRig {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	emb := eventstoretest.Start(t)
	signer := tron.NewHMACSigner([]byte("weir broadcast saga tests"))
	cfg := tron.SimConfig{Verifiers: []tron.SignatureVerifier{signer}}
	for _, o := range opts {
		o(&cfg)
	}
	sim := tron.NewSimNode(cfg)
	sim.Advance(bcStartBlk)
	r := &bcRig{
		t: t, ctx: ctx, emb: emb, sim: sim, signer: signer,
		node:    tron.NewObserved(sim),
		clock:   newBCClock(),
		logs:    newBCLogs(),
		custody: map[string]string{},
	}
	r.repo = r.newRepo()
	r.work = &bcScan{repo: r.newRepo()}
	r.ledger = sagas.NewLedger(r.repo, aggregate.Amount{}, r.clock.Now, slog.New(r.logs))
	if _, _, err := r.repo.UpdateAccount(ctx, bcAccount, aggregate.Credit{
		Account: bcAccount, CreditID: "seed", Amount: bcUSDT(bcFunds), At: r.clock.Now(),
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("WEIR_TEST_LOG") != "" {
			for _, l := range r.logs.Lines() {
				t.Log(l)
			}
		}
		if errs := r.logs.Errors(); len(errs) > 0 && !r.allowErrors {
			t.Errorf("the saga logged %d errors, first: %s", len(errs), errs[0])
		}
	})
	return r
}

// newRepo opens a repo on a connection of its own, as a separate process
// would.
func (r *bcRig) newRepo() *sagas.Repo {
	r.t.Helper()
	return sagas.NewRepo(bcOpenStore(r.ctx, r.emb))
}

// bcOpenStore opens the store on a connection of its own.
func bcOpenStore(ctx context.Context, emb *eventstoretest.Server) *eventstore.Store {
	return emb.Store(ctx, eventlog.NewRegistry())
}

func bcUSDT(s string) aggregate.Amount { return aggregate.MustParseAmount(aggregate.USDT, s) }

// bcAddress is a valid TRON address derived from a label.
func bcAddress(label string) string {
	sum := sha256.Sum256([]byte("weir test address " + label))
	var a tron.Address
	a[0] = tron.AddressPrefix
	copy(a[1:], sum[:20])
	return a.String()
}

func bcOpID(n int) string { return fmt.Sprintf("b0a1c2d3-0000-4000-8000-%012d", n) }

// worker starts a worker on its own connection.
func (r *bcRig) worker(id string, tune ...func(*sagas.WorkerConfig)) *sagas.Worker {
	r.t.Helper()
	cfg := sagas.WorkerConfig{
		ID: id, Repo: r.newRepo(), Node: r.node, Signer: r.signer, Work: r.work,
		Custody: func(to string) (string, bool) {
			a, ok := r.custody[to]
			return a, ok
		},
		Clock: r.clock.Now, Lease: bcLease, ExpirationWindow: bcWindow, ExpiryMargin: bcMargin,
		MaxAttempts: 3, Logger: slog.New(r.logs),
	}
	for _, f := range tune {
		f(&cfg)
	}
	w, err := sagas.NewWorker(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	return w
}

func (r *bcRig) policy() aggregate.Policy {
	r.t.Helper()
	s, _, err := r.repo.Policy(r.ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	if s.Policy.Version == 0 {
		return aggregate.DefaultPolicy()
	}
	return s.Policy
}

// request creates a withdrawal at the Repo level (what the intake does).
func (r *bcRig) request(id, to, amount string) (aggregate.Withdrawal, []aggregate.Event, error) {
	cmd := aggregate.RequestWithdrawal{
		ID: id, Account: bcAccount, ToAddress: to, Amount: bcUSDT(amount),
		RequestedBy: "alice", Policy: r.policy(), At: r.clock.Now(),
	}
	return r.repo.UpdateWithdrawal(r.ctx, id, func(aggregate.Withdrawal) (aggregate.Command, error) { return cmd, nil })
}

func (r *bcRig) approve(id, by string) aggregate.Withdrawal {
	r.t.Helper()
	w, _, err := r.repo.UpdateWithdrawal(r.ctx, id, func(aggregate.Withdrawal) (aggregate.Command, error) {
		return aggregate.Approve{By: by, Policy: r.policy(), At: r.clock.Now()}, nil
	})
	if err != nil {
		r.t.Fatalf("approve %s by %s: %v", id, by, err)
	}
	return w
}

func (r *bcRig) reserve(id string) {
	r.t.Helper()
	w, err := r.ledger.Reserve(r.ctx, id)
	if err != nil || !w.Reserved {
		r.t.Fatalf("reserve %s: reserved=%v err=%v", id, w.Reserved, err)
	}
}

// ready makes a withdrawal of amount to `to`, reserved and approved (by as
// many approvers as the policy wants), and registers it with the work
// source. It returns its id.
func (r *bcRig) ready(to, amount string) string {
	r.t.Helper()
	r.seq++
	id := bcOpID(r.seq)
	if _, _, err := r.request(id, to, amount); err != nil {
		r.t.Fatal(err)
	}
	r.reserve(id)
	for _, by := range []string{"bob", "carol", "dave"} {
		if w := r.approve(id, by); w.State == aggregate.StateApproved {
			break
		}
	}
	r.work.add(id)
	return id
}

func (r *bcRig) load(id string) aggregate.Withdrawal {
	r.t.Helper()
	w, _, err := r.repo.Withdrawal(r.ctx, id)
	if err != nil {
		r.t.Fatal(err)
	}
	return w
}

// events returns the withdrawal's events after checking the whole stream
// against the domain's rules (every event a legal transition with legal
// data; every rebuild carries a proof).
func (r *bcRig) events(id string) []aggregate.Event {
	r.t.Helper()
	recs, err := r.repo.WithdrawalRecords(r.ctx, id)
	if err != nil {
		r.t.Fatal(err)
	}
	evs, err := eventlog.WithdrawalEvents(recs)
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := aggregate.Audit(evs); err != nil {
		r.t.Fatalf("audit of %s: %v", id, err)
	}
	return evs
}

func bcCount(evs []aggregate.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.EventType() == typ {
			n++
		}
	}
	return n
}

// bcIntents lists the send intents of evs, of both forms: a broadcasting
// event, or a signature that is also the first send's intent.
func bcIntents(evs []aggregate.Event) []aggregate.Broadcasting {
	var out []aggregate.Broadcasting
	var w aggregate.Withdrawal
	for _, e := range evs {
		switch ev := e.(type) {
		case aggregate.Signed:
			if ev.Send != 0 {
				out = append(out, aggregate.Broadcasting{TxID: ev.TxID, Attempt: w.Attempt, Send: ev.Send, At: ev.At})
			}
		case aggregate.Broadcasting:
			out = append(out, ev)
		}
		w = aggregate.Evolve(w, e)
	}
	return out
}

func bcOfType[E aggregate.Event](evs []aggregate.Event) []E {
	var out []E
	for _, e := range evs {
		if v, ok := e.(E); ok {
			out = append(out, v)
		}
	}
	return out
}

// round lets every worker step once, then moves the chain one block. Step
// errors other than a crash fail the test.
func (r *bcRig) round(workers ...*sagas.Worker) {
	r.t.Helper()
	for _, w := range workers {
		if _, err := w.Step(r.ctx); err != nil && !errors.Is(err, sagas.ErrCrashed) {
			r.t.Fatalf("step %s: %v", w.ID(), err)
		}
	}
	r.sim.Advance(1)
}

// until runs rounds until cond holds, at most max rounds.
func (r *bcRig) until(max int, cond func() bool, workers ...*sagas.Worker) {
	r.t.Helper()
	for i := 0; i < max; i++ {
		if cond() {
			return
		}
		r.round(workers...)
	}
	if !cond() {
		r.t.Fatalf("condition not reached after %d rounds", max)
	}
}

func (r *bcRig) inState(id string, states ...aggregate.State) func() bool {
	return func() bool { return slices.Contains(states, r.load(id).State) }
}

func (r *bcRig) terminal(id string) func() bool {
	return func() bool { return r.load(id).Terminal() }
}

// chainTxs returns the included transfers whose txid is one of the
// withdrawal's envelopes (current or retired).
func (r *bcRig) chainTxs(w aggregate.Withdrawal) []tron.Transfer {
	var out []tron.Transfer
	for _, t := range r.sim.Transfers() {
		if w.KnowsTxID(tron.HexID(t.TxID)) {
			out = append(out, t)
		}
	}
	return out
}

// sends returns the node's send log for the withdrawal's txids.
func (r *bcRig) sends(w aggregate.Withdrawal) []tron.BroadcastRecord {
	var out []tron.BroadcastRecord
	for _, s := range r.sim.BroadcastLog() {
		if w.KnowsTxID(tron.HexID(s.TxID)) {
			out = append(out, s)
		}
	}
	return out
}

// paidOnce asserts the money moved exactly once: the withdrawal is
// confirmed, exactly one of its txids is on chain, with SUCCESS, for its
// amount to its address, and it is the confirmed one; no other transfer is
// on chain at all (each test has one payer and knows every withdrawal);
// the ledger, once the ledger saga has run, settled exactly the amount.
func (r *bcRig) paidOnce(id string) aggregate.Withdrawal {
	r.t.Helper()
	w := r.load(id)
	if w.State != aggregate.StateConfirmed {
		r.t.Fatalf("%s is %s (%s %s), want confirmed", id, w.State, w.Reason, w.Detail)
	}
	txs := r.chainTxs(w)
	if len(txs) != 1 {
		r.t.Fatalf("%d transfers of %s on chain, want exactly 1", len(txs), id)
	}
	tx := txs[0]
	if tx.Receipt != tron.ReceiptSuccess || tron.HexID(tx.TxID) != w.Confirmation.TxID || tx.BlockNumber != w.Confirmation.BlockNumber {
		r.t.Fatalf("chain has %s in block %d (%s); log confirmed %s in block %d", tron.HexID(tx.TxID), tx.BlockNumber, tx.Receipt, w.Confirmation.TxID, w.Confirmation.BlockNumber)
	}
	if tx.Amount.Cmp(w.Amount.Units()) != 0 || tx.To.String() != w.ToAddress || tx.From != r.signer.Address() {
		r.t.Fatalf("chain transfer %s→%s of %s; withdrawal pays %s to %s", tx.From, tx.To, tx.Amount, w.Amount.Units(), w.ToAddress)
	}
	for _, s := range r.sim.BroadcastLog() {
		if !r.knownTxID(tron.HexID(s.TxID)) {
			r.t.Fatalf("the node was sent %s, which no withdrawal's log holds", tron.HexID(s.TxID))
		}
	}
	r.settled(w)
	return w
}

// knownTxID reports whether any withdrawal of this test holds txid.
func (r *bcRig) knownTxID(txid string) bool {
	for _, w := range r.work.load() {
		if w.KnowsTxID(txid) {
			return true
		}
	}
	return false
}

// settled runs the ledger saga's Finish on a terminal withdrawal and checks
// the payer's account: still consistent, and this withdrawal's reservation
// settled (confirmed) or released (otherwise).
func (r *bcRig) settled(w aggregate.Withdrawal) {
	r.t.Helper()
	if err := r.ledger.Finish(r.ctx, w); err != nil {
		r.t.Fatal(err)
	}
	a, _, err := r.repo.AccountWithHistory(r.ctx, bcAccount)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := a.CheckInvariants(); err != nil {
		r.t.Fatal(err)
	}
	res, ok := a.Reservation(w.ID)
	if !ok {
		r.t.Fatalf("no reservation for %s", w.ID)
	}
	want := aggregate.ReservationReleased
	if w.State == aggregate.StateConfirmed {
		want = aggregate.ReservationSettled
	}
	if res.Status != want {
		r.t.Fatalf("reservation of %s (%s) is %s, want %s", w.ID, w.State, res.Status, want)
	}
}

// nothingOnChain asserts none of the withdrawal's txids was included.
func (r *bcRig) nothingOnChain(w aggregate.Withdrawal) {
	r.t.Helper()
	if txs := r.chainTxs(w); len(txs) != 0 {
		r.t.Fatalf("%d transfers of %s on chain, want none", len(txs), w.ID)
	}
	if total := r.sim.Ledger().Total; total.Sign() != 0 {
		r.t.Fatalf("the chain moved %s units, want nothing", total)
	}
}

// bcSolidAtLeast advances the chain until the solid head's time is at or
// past t (chain ms), returning how many blocks it produced.
func bcSolidAtLeast(sim *tron.SimNode, t int64) int {
	n := 0
	for sim.CurrentSolidHead().Timestamp < t {
		sim.Advance(1)
		n++
	}
	return n
}
