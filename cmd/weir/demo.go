package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/tron"
)

func init() {
	register(command{
		name:    "demo",
		summary: "narrated end-to-end run on a temporary store; exit 0 when every payment happened exactly once",
		run:     runDemo,
	})
}

const demoAbout = `weir demo runs the whole engine in this process — embedded NATS, the event store,
the NATS command service, projections, the ledger saga and the simulated TRON node —
on a temporary store, and plays seven scenes in which something goes wrong on purpose:

  1. a duplicated request              4. a worker killed mid-broadcast
  2. an internal transfer              5. a node that accepts, then times out
  3. a large (four-eyes) withdrawal    6. a tx that expires while every worker is down
  7. a hot wallet that runs dry: sending pauses, funding resumes it

Each scene prints its evidence: the events on the withdrawal's stream, txids, the
node's send log, what is on the simulated chain, and ledger totals. Workers are
driven step by step and the chain only moves when the demo says so, so every run
tells the same story. It ends with a check: every withdrawal paid exactly once
(one successful transfer on chain for an external one, none for an internal
one) and every account balanced. Exit 0 when all of it holds, 1 naming what
did not.
`

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", "demo [--keep DIR] [--storage file|memory] [--log]", stderr)
	keep := fs.String("keep", "", "put the store in `DIR` (absent or empty) and keep it afterwards; default: a temporary directory, removed at the end")
	storage := fs.String("storage", "file", "file: JetStream file storage, fsync every write (as weir serve); memory: memory storage")
	showLog := fs.Bool("log", false, "also write weir's own log (info and up) to stderr")
	printDefaults := fs.Usage
	fs.Usage = func() {
		fmt.Fprint(stderr, demoAbout+"\n")
		printDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "demo: unexpected argument %q\n", fs.Arg(0))
		return errUsage
	}
	if *storage != "file" && *storage != "memory" {
		fmt.Fprintf(stderr, "demo: --storage must be file or memory, not %q\n", *storage)
		return errUsage
	}
	if *keep != "" && *storage == "memory" {
		fmt.Fprintln(stderr, "demo: --keep needs --storage file (a memory store has nothing to keep)")
		return errUsage
	}
	dir := *keep
	if dir == "" {
		tmp, err := os.MkdirTemp("", "weir-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := demoEmptyDir(dir); err != nil {
		return err
	}

	logOut := io.Discard
	if *showLog {
		logOut = stderr
	}
	d, err := startDemo(ctx, dir, *storage == "memory", stdout, slog.New(slog.NewTextHandler(logOut, nil)))
	if err != nil {
		return err
	}
	defer d.close()

	where := dir + ", removed at the end"
	if *keep != "" {
		where = dir + ", kept"
	}
	if *storage == "memory" {
		where = "memory storage"
	}
	d.say(0, "weir demo — the whole engine in this process, on a temporary store (%s):", where)
	d.say(1, "embedded NATS (%s), the NATS command service, projections, the ledger saga,", d.storageNote)
	d.say(1, "and the simulated TRON node, whose chain moves only when the demo advances it;")
	d.say(1, "broadcast workers are driven step by step.")
	d.say(1, "principals: alice (requester, approver), bob and carol (approvers); policy %q;", aggregate.DefaultPolicy().Name)
	d.say(1, "account %q holds %s USDT; the hot wallet is %s.", devFundingAccount, devFundingAmount, d.signer.Address())

	scenes := []struct {
		title string
		play  func() error
	}{
		{"A duplicated request: one stream, one creation event", d.sceneDuplicate},
		{"An internal transfer: settled on the ledger, the node never called", d.sceneInternal},
		{"A large withdrawal: four-eyes, the requester's own approval refused", d.sceneFourEyes},
		{"A worker killed mid-broadcast: another worker finishes with the same txid", d.sceneKilled},
		{"A node that accepts, then times out: reconciled by txid", d.sceneTimeout},
		{"A transaction that expires while every worker is down: rebuilt only on chain-time proof", d.sceneExpiry},
		{"A hot wallet that runs dry: sending pauses, funding resumes it", d.sceneWalletDry},
	}
	for i, s := range scenes {
		d.say(0, "")
		d.say(0, "Scene %d — %s", i+1, s.title)
		if err := s.play(); err != nil {
			d.fail("scene %d: %v", i+1, err)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	d.say(0, "")
	d.say(0, "Check — every withdrawal paid exactly once, every account balanced")
	if err := d.finalCheck(); err != nil {
		d.fail("final check: %v", err)
	}
	d.say(0, "")
	if len(d.problems) > 0 {
		d.say(0, "FAILED — %d problem(s):", len(d.problems))
		for _, p := range d.problems {
			d.say(1, "✗ %s", p)
		}
		return exitError{code: 1}
	}
	d.say(0, "All checks hold: %s", d.summary)
	return nil
}

// demoEmptyDir accepts a directory that does not exist yet or is empty, so
// --keep never mixes the demo's store with another one.
func demoEmptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return os.MkdirAll(dir, 0o755)
	case err != nil:
		return fmt.Errorf("--keep: %w", err)
	case len(entries) > 0:
		return fmt.Errorf("--keep: %s is not empty (the demo writes a fresh store)", dir)
	}
	return nil
}

// demoWorld is the running engine plus what the demo drives by hand: a NATS
// client (as a producer would be), workers, the chain and a wall clock for
// leases.
type demoWorld struct {
	ctx         context.Context
	out         io.Writer
	log         *slog.Logger
	eng         *engine
	sim         *tron.SimNode
	node        *tron.Observed
	signer      tron.Signer
	clock       *demoClock
	ledger      *sagas.Ledger
	client      *api.Client
	tokens      map[string]string
	conns       []*nats.Conn
	storageNote string

	w1 *sagas.Worker // the everyday worker, used across scenes

	seq      int
	problems []string
	summary  string
}

func startDemo(ctx context.Context, dir string, memory bool, out io.Writer, log *slog.Logger) (*demoWorld, error) {
	cfg := serveConfig{
		Data: dir, HTTP: "127.0.0.1:0", Replicas: 1, Sync: "always", Workers: 0,
		// The chain is driven by the demo: the block interval only has
		// to be longer than the demo.
		SimBlockInterval: 24 * time.Hour, SimSolidityLag: tron.DefaultSolidityLag,
		LogLevel: "info", memory: memory, WalletLowUSDT: demoWalletLow,
	}
	eng, err := startEngine(ctx, cfg, log, io.Discard)
	if err != nil {
		return nil, err
	}
	d := &demoWorld{ctx: ctx, out: out, log: log, eng: eng, sim: eng.sim, clock: &demoClock{}, tokens: map[string]string{}}
	d.storageNote = "file storage, fsync every write"
	if memory {
		d.storageNote = "memory storage"
	}
	d.node = tron.NewObserved(eng.sim)
	if d.signer, err = tron.NewKeySigner(devSigningKey[:]); err != nil {
		d.close()
		return nil, err
	}
	d.ledger = sagas.NewLedger(eng.repo, aggregate.Amount{}, time.Now, log.With("saga", "demo-ledger"))
	for _, p := range api.DevPrincipals().All() {
		d.tokens[p.Name] = p.Token
	}
	nc, err := eng.emb.Connect(nats.Name("weir-demo-client"))
	if err != nil {
		d.close()
		return nil, err
	}
	d.conns = append(d.conns, nc)
	d.client = api.NewClient(nc, "")
	if d.w1, err = d.worker("worker-1", nil); err != nil {
		d.close()
		return nil, err
	}
	// A few blocks first, so the solid head is a real block behind the head.
	d.sim.Advance(tron.DefaultSolidityLag + 1)
	return d, nil
}

func (d *demoWorld) close() {
	for _, nc := range d.conns {
		nc.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_ = d.eng.Close(ctx)
}

// ---- narration ---------------------------------------------------------

func (d *demoWorld) say(indent int, format string, args ...any) {
	fmt.Fprintf(d.out, "%s%s\n", strings.Repeat("   ", indent), fmt.Sprintf(format, args...))
}

// expect records a scene's claim: ✓ when it holds, ✗ (and a problem for
// the exit status) when it does not.
func (d *demoWorld) expect(ok bool, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if ok {
		d.say(1, "✓ %s", msg)
		return
	}
	d.say(1, "✗ %s", msg)
	d.problems = append(d.problems, msg)
}

func (d *demoWorld) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	d.say(1, "✗ %s", msg)
	d.problems = append(d.problems, msg)
}

// ---- the outside world: a producer over NATS ---------------------------

// demoReply is the weir service's answer to one command: the withdrawal,
// or the refusal the scene shows.
type demoReply struct {
	api.Reply[aggregate.WithdrawalView]
	refused *api.Refusal
}

// answer makes a call's outcome a demoReply: a refusal is a value, any
// other failure an error.
func answer(r api.Reply[aggregate.WithdrawalView], err error) (demoReply, error) {
	var refused *api.Refusal
	if errors.As(err, &refused) {
		return demoReply{refused: refused}, nil
	}
	return demoReply{Reply: r}, err
}

func (r demoReply) code() string {
	if r.refused == nil {
		return ""
	}
	return r.refused.Code
}

func (r demoReply) String() string {
	if r.refused != nil {
		return fmt.Sprintf("%d %s", r.refused.Status, r.refused.Code)
	}
	return "ok"
}

func (r demoReply) approvers() string {
	var by []string
	for _, a := range r.Value.Approvals {
		by = append(by, a.By)
	}
	if len(by) == 0 {
		return "none"
	}
	return strings.Join(by, ", ")
}

// as is the client acting as principal who.
func (d *demoWorld) as(who string) *api.Client { return d.client.As(d.tokens[who]) }

// demoAddress is a valid TRON address derived from a label (nobody holds
// its key; the simulated chain does not care).
func demoAddress(label string) string {
	sum := sha256.Sum256([]byte("weir demo destination " + label))
	var a tron.Address
	a[0] = tron.AddressPrefix
	copy(a[1:], sum[:20])
	return a.String()
}

// newRequest makes the next withdrawal request of the demo.
func (d *demoWorld) newRequest(to, amount string) api.WithdrawalRequest {
	d.seq++
	return api.WithdrawalRequest{
		OperationID: fmt.Sprintf("de300000-0000-4000-8000-%012d", d.seq),
		Account:     devFundingAccount, ToAddress: to, Amount: amount, Asset: aggregate.USDT.Code,
	}
}

// request sends req as alice and insists on a fresh creation.
func (d *demoWorld) request(req api.WithdrawalRequest) (demoReply, error) {
	r, err := answer(d.as("alice").Request(d.ctx, req))
	if err != nil {
		return r, err
	}
	if r.refused != nil || r.Replayed {
		return r, fmt.Errorf("request %s: %s (replayed %v)", req.OperationID, r, r.Replayed)
	}
	return r, nil
}

func (d *demoWorld) approve(id, who string) (demoReply, error) {
	return answer(d.as(who).Approve(d.ctx, id))
}

// requestApproved requests amount to `to` as alice and has bob approve it
// (one approval suffices up to 1000 USDT).
func (d *demoWorld) requestApproved(to, amount string) (string, error) {
	req := d.newRequest(to, amount)
	if _, err := d.request(req); err != nil {
		return "", err
	}
	r, err := d.approve(req.OperationID, "bob")
	if err != nil {
		return "", err
	}
	if r.Value.State != aggregate.StateApproved {
		return "", fmt.Errorf("approve %s: %s, state %s", req.OperationID, r, r.Value.State)
	}
	d.say(1, "alice asks for %s USDT to %s (operation id %s); bob approves → %s", amount, to, req.OperationID, r.Value.State)
	return req.OperationID, nil
}

// ---- workers and the chain -----------------------------------------------

// demoClock is the wall clock the workers read (for leases only). It runs
// with real time, plus whatever the demo skipped to let a dead worker's
// lease lapse without waiting for it.
type demoClock struct {
	mu   sync.Mutex
	skip time.Duration
}

func (c *demoClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.skip)
}

func (c *demoClock) Skip(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.skip += d
}

// worker starts a broadcast worker on a NATS connection of its own, as a
// separate process would have, with the default lease, expiration window
// (60 s of chain time) and expiry margin (30 s).
func (d *demoWorld) worker(id string, crash sagas.CrashHook) (*sagas.Worker, error) {
	return d.newWorker(id, crash, nil)
}

// newWorker is worker with a send gate (nil: none).
func (d *demoWorld) newWorker(id string, crash sagas.CrashHook, gate sagas.SendGate) (*sagas.Worker, error) {
	nc, err := d.eng.emb.Connect(nats.Name("weir-demo-" + id))
	if err != nil {
		return nil, err
	}
	d.conns = append(d.conns, nc)
	store, err := eventstore.Open(d.ctx, nc, d.eng.storeCfg, eventlog.NewRegistry())
	if err != nil {
		return nil, err
	}
	return sagas.NewWorker(sagas.WorkerConfig{
		ID: id, Repo: sagas.NewRepo(store), Node: d.node, Signer: d.signer,
		Custody: devCustody().lookup, Work: d.eng.projector, Clock: d.clock.Now, Crash: crash,
		Logger: d.log.With("worker", id), Gate: gate,
	})
}

// drive gives each worker one go at each withdrawal, then the chain makes
// a block; it repeats until every withdrawal is terminal.
func (d *demoWorld) drive(ids []string, workers ...*sagas.Worker) error {
	const maxRounds = 200
	for range maxRounds {
		done, err := d.allTerminal(ids)
		if err != nil || done {
			return err
		}
		for _, wk := range workers {
			for _, id := range ids {
				if _, err := wk.Drive(d.ctx, id); err != nil && !errors.Is(err, sagas.ErrFenced) && !errors.Is(err, sagas.ErrCrashed) {
					if d.ctx.Err() != nil {
						return d.ctx.Err()
					}
					d.log.Warn("demo: drive", "worker", wk.ID(), "withdrawal", id, "err", err)
				}
			}
		}
		d.sim.Advance(1)
	}
	return fmt.Errorf("%v not finished after %d blocks", ids, maxRounds)
}

// driveUntilCrash drives one withdrawal with a worker whose crash hook is
// armed, until the hook fires.
func (d *demoWorld) driveUntilCrash(id string, wk *sagas.Worker) error {
	for range 50 {
		_, err := wk.Drive(d.ctx, id)
		if errors.Is(err, sagas.ErrCrashed) {
			return nil
		}
		if err != nil && !errors.Is(err, sagas.ErrFenced) {
			return err
		}
		d.sim.Advance(1)
	}
	return fmt.Errorf("%s never reached its crash point", wk.ID())
}

func (d *demoWorld) allTerminal(ids []string) (bool, error) {
	for _, id := range ids {
		w, err := d.load(id)
		if err != nil {
			return false, err
		}
		if !w.Terminal() {
			return false, nil
		}
	}
	return true, nil
}

func (d *demoWorld) load(id string) (aggregate.Withdrawal, error) {
	w, _, err := d.eng.repo.Withdrawal(d.ctx, id)
	return w, err
}

// ---- evidence --------------------------------------------------------------

// timeline prints the withdrawal's events after version `after`.
func (d *demoWorld) timeline(id string, after uint64) (uint64, error) {
	evs, err := d.eng.intake.Events(d.ctx, id)
	if err != nil {
		return after, err
	}
	for _, e := range evs {
		if e.Version <= after {
			continue
		}
		d.say(2, "v%-2d %-32s %-13s %s", e.Version, e.Type, e.State, demoNote(e.Type, e.Data))
		after = e.Version
	}
	return after, nil
}

// countEvents counts the events of one type on a withdrawal's stream.
func (d *demoWorld) countEvents(id, typ string) (int, error) {
	recs, err := d.eng.repo.WithdrawalRecords(d.ctx, id)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range recs {
		if r.Type == typ {
			n++
		}
	}
	return n, nil
}

// sends prints the node's send log for the withdrawal's txids and returns it.
func (d *demoWorld) sends(w aggregate.Withdrawal) []tron.BroadcastRecord {
	var out []tron.BroadcastRecord
	for _, s := range d.sim.BroadcastLog() {
		if w.KnowsTxID(tron.HexID(s.TxID)) {
			out = append(out, s)
			d.say(2, "send #%d by %s: txid %s at head %d → %s", s.Seq, s.Worker, demoShort(tron.HexID(s.TxID)), s.HeadNumber, demoSendOutcome(s))
		}
	}
	if len(out) == 0 {
		d.say(2, "(no send for this withdrawal)")
	}
	return out
}

func demoSendOutcome(s tron.BroadcastRecord) string {
	var out string
	switch {
	case s.TimedOut:
		out = "no answer (timed out)"
	default:
		out = string(s.Code)
	}
	if s.Fault != "" {
		out += " [scripted fault " + string(s.Fault) + "]"
	}
	if s.Accepted {
		out += "; the node took it into its pool"
	}
	return out
}

// onChain returns the included transfers of the withdrawal's txids, and
// prints them.
func (d *demoWorld) onChain(w aggregate.Withdrawal) []tron.Transfer {
	var out []tron.Transfer
	for _, t := range d.sim.Transfers() {
		if w.KnowsTxID(tron.HexID(t.TxID)) {
			out = append(out, t)
			d.say(2, "on chain: txid %s in block %d, receipt %s, %s USDT to %s", tron.HexID(t.TxID), t.BlockNumber, t.Receipt, demoUnits(t.Amount), t.To)
		}
	}
	if len(out) == 0 {
		d.say(2, "on chain: nothing")
	}
	return out
}

// paidOnce is the scene's verdict on an external withdrawal: confirmed,
// exactly one successful transfer on chain, and it is the confirmed txid.
func (d *demoWorld) paidOnce(id string) (aggregate.Withdrawal, error) {
	w, err := d.load(id)
	if err != nil {
		return w, err
	}
	txs := d.onChain(w)
	ok := w.State == aggregate.StateConfirmed && len(txs) == 1 && txs[0].Receipt == tron.ReceiptSuccess &&
		tron.HexID(txs[0].TxID) == w.Confirmation.TxID && txs[0].Amount.Cmp(w.Amount.Units()) == 0
	d.expect(ok, "%s is %s; %d transfer(s) of its txids on chain — one payment", id, w.State, len(txs))
	return w, nil
}

func (d *demoWorld) account(id string) aggregate.AccountView {
	v, err := d.eng.intake.Account(d.ctx, id)
	if err != nil {
		return aggregate.AccountView{ID: id, Available: "0", Reserved: "0", Settled: "0"}
	}
	return v
}

func demoShort(txid string) string {
	if len(txid) > 16 {
		return txid[:16] + "…"
	}
	return txid
}

func demoUnits(units *big.Int) string {
	a, err := aggregate.FromUnits(aggregate.USDT, units)
	if err != nil {
		return units.String() + " units"
	}
	return a.String()
}

// demoNote picks the evidence out of an event payload.
func demoNote(typ string, data json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return ""
	}
	get := func(path ...string) string {
		var v any = m
		for _, p := range path {
			mm, ok := v.(map[string]any)
			if !ok {
				return ""
			}
			v = mm[p]
		}
		switch v := v.(type) {
		case nil:
			return ""
		case string:
			return v
		case float64:
			return fmt.Sprint(int64(v))
		case bool:
			return fmt.Sprint(v)
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	switch strings.TrimPrefix(typ, "withdrawal.") {
	case "requested":
		add("amount", get("amount"))
		add("by", get("requested_by"))
		add("rule", get("rule"))
		add("approvals_needed", get("required_approvals"))
	case "approval_recorded", "approved":
		add("by", get("approval", "by"))
		add("rule", get("approval", "rule"))
	case "funds_reserved":
		add("account", get("account"))
		add("amount", get("amount"))
	case "claimed":
		add("worker", get("worker"))
	case "routed":
		add("rail", get("route", "rail"))
		add("account", get("route", "account"))
	case "settled_internally":
		add("account", get("account"))
	case "envelope_built":
		add("attempt", get("attempt"))
		add("txid", demoShort(get("envelope", "txid")))
		add("expiration", demoChainTime(get("envelope", "expiration")))
	case "signed":
		add("txid", demoShort(get("txid")))
		add("send", get("send")) // also the first send's intent
	case "broadcasting":
		add("txid", demoShort(get("txid")))
		add("send", get("send"))
	case "broadcast_accepted":
		add("txid", demoShort(get("txid")))
		add("send", get("send"))
		add("result", get("result"))
	case "rebuilt":
		add("retired", demoShort(get("retired_txid")))
		add("new", demoShort(get("envelope", "txid")))
		add("attempt", get("attempt"))
	case "confirmed":
		add("txid", demoShort(get("txid")))
		add("block", get("block_number"))
		add("receipt", get("receipt"))
	case "rejected", "failed":
		add("reason", get("reason"))
	}
	return strings.Join(parts, " ")
}

// demoChainTime renders a chain timestamp (ms) as a time of day.
func demoChainTime(ms string) string {
	var v int64
	if _, err := fmt.Sscan(ms, &v); err != nil || v == 0 {
		return ms
	}
	return time.UnixMilli(v).UTC().Format("15:04:05")
}

func demoMs(ms int64) string { return time.UnixMilli(ms).UTC().Format("15:04:05") }

// ---- the scenes ------------------------------------------------------------

func (d *demoWorld) sceneDuplicate() error {
	req := d.newRequest(demoAddress("scene 1"), "25")
	id := req.OperationID
	d.say(1, "alice asks for 25 USDT to %s (operation id %s) over NATS, %s", req.ToAddress, id, api.SubjectWithdrawalRequest)
	first, err := d.request(req)
	if err != nil {
		return err
	}
	d.say(2, "→ created: state %s, version %d (the ledger reserved the amount inline)", first.Value.State, first.Value.Version)
	d.say(1, "the reply is lost on the way; her client sends the identical request again")
	again, err := answer(d.as("alice").Request(d.ctx, req))
	if err != nil {
		return err
	}
	d.say(2, "→ %s, header %s: %v, same withdrawal, version %d", again, api.HeaderReplayed, again.Replayed, again.Value.Version)
	d.expect(again.refused == nil && again.Replayed && again.Value.ID == id && again.Value.Version == first.Value.Version,
		"the retry is an idempotent replay: nothing appended")
	other := req
	other.Amount = "26"
	conflict, err := answer(d.as("alice").Request(d.ctx, other))
	if err != nil {
		return err
	}
	d.say(1, "the same operation id with another amount (26 USDT) → %s", conflict)
	d.expect(conflict.code() == aggregate.CodeIdempotencyConflict, "a different request under the same id is refused, not merged")

	created, err := d.countEvents(id, aggregate.EventRequested)
	if err != nil {
		return err
	}
	streams := map[string]bool{}
	if _, err := d.eng.store.ReadAll(d.ctx, 0, eventlog.TypeWithdrawal, func(r eventstore.Record) error {
		streams[r.Key.ID] = true
		return nil
	}); err != nil {
		return err
	}
	d.say(1, "withdrawal streams in the store: %d; its stream %s:", len(streams), d.eng.store.Subject(eventstore.Key{Type: eventlog.TypeWithdrawal, ID: id}))
	after, err := d.timeline(id, 0)
	if err != nil {
		return err
	}
	d.expect(len(streams) == 1 && created == 1, "one stream, %d × %s", created, aggregate.EventRequested)

	r, err := d.approve(id, "bob")
	if err != nil {
		return err
	}
	d.say(1, "bob approves (one approval suffices up to 1000 USDT) → %s", r.Value.State)
	d.say(1, "worker-1 takes it; the chain makes a block per round:")
	if err := d.drive([]string{id}, d.w1); err != nil {
		return err
	}
	if _, err := d.timeline(id, after); err != nil {
		return err
	}
	w, _ := d.load(id)
	d.sends(w)
	_, err = d.paidOnce(id)
	return err
}

func (d *demoWorld) sceneInternal() error {
	treasuryBefore := d.account("treasury")
	d.say(1, "%s is custodied by weir (account \"treasury\"): a withdrawal to it never needs the chain", devCustodyAddress)
	id, err := d.requestApproved(devCustodyAddress, "40")
	if err != nil {
		return err
	}
	wk, err := d.worker("worker-2", nil)
	if err != nil {
		return err
	}
	d.say(1, "worker-2 takes it:")
	if err := d.drive([]string{id}, wk); err != nil {
		return err
	}
	if _, err := d.timeline(id, 0); err != nil {
		return err
	}
	w, err := d.load(id)
	if err != nil {
		return err
	}
	if err := d.ledger.Finish(d.ctx, w); err != nil {
		return err
	}
	calls := d.node.Calls("worker-2")
	d.say(1, "calls worker-2 made to the node: %d; txids: none", calls)
	sends := d.sends(w)
	d.onChain(w)
	treasury := d.account("treasury")
	d.say(1, "ledger: treasury available %s → %s USDT", treasuryBefore.Available, treasury.Available)
	d.expect(w.State == aggregate.StateConfirmed && w.Route.IsInternal() && calls == 0 && len(sends) == 0 && w.TxID() == "" &&
		treasury.Available == "40", "settled on the ledger, the node never called")
	return nil
}

func (d *demoWorld) sceneFourEyes() error {
	req := d.newRequest(demoAddress("scene 3"), "2500")
	id := req.OperationID
	r, err := d.request(req)
	if err != nil {
		return err
	}
	d.say(1, "alice asks for 2500 USDT to %s (operation id %s) → %s, %d approvals needed", req.ToAddress, id, r.Value.State, r.Value.RequiredApprovals)
	self, err := d.approve(id, "alice")
	if err != nil {
		return err
	}
	d.say(1, "alice approves her own request → %s", self)
	d.expect(self.code() == aggregate.CodeSelfApproval, "the requester's approval is refused (self_approval)")
	r, err = d.approve(id, "bob")
	if err != nil {
		return err
	}
	d.say(1, "bob approves → %s, approvals: %s (%d of %d)", r.Value.State, r.approvers(), len(r.Value.Approvals), r.Value.RequiredApprovals)
	v := r.Value.Version
	r, err = d.approve(id, "bob")
	if err != nil {
		return err
	}
	d.say(1, "bob approves again → %s, version %d → %d: the same approver counts once", r.Value.State, v, r.Value.Version)
	d.expect(r.Value.State == aggregate.StateRequested && r.Value.Version == v, "one approver is not two")
	r, err = d.approve(id, "carol")
	if err != nil {
		return err
	}
	d.say(1, "carol approves → %s, approvals: %s", r.Value.State, r.approvers())
	d.say(1, "worker-1 re-checks the approvals against the policy in force, then pays:")
	if err := d.drive([]string{id}, d.w1); err != nil {
		return err
	}
	if _, err := d.timeline(id, 0); err != nil {
		return err
	}
	w, err := d.load(id)
	if err != nil {
		return err
	}
	var by []string
	for _, a := range w.Approvals {
		by = append(by, a.By)
	}
	d.expect(slices.Equal(by, []string{"bob", "carol"}), "approved by bob and carol, never by alice")
	d.sends(w)
	_, err = d.paidOnce(id)
	return err
}

func (d *demoWorld) sceneKilled() error {
	id, err := d.requestApproved(demoAddress("scene 4"), "120")
	if err != nil {
		return err
	}
	w3, err := d.worker("worker-3", sagas.CrashOnce(sagas.CrashAfterSend, id))
	if err != nil {
		return err
	}
	d.say(1, "worker-3 claims it, writes the txid ahead, signs, logs its intent, sends — and is killed before it")
	d.say(1, "records the node's answer (crash point %s):", sagas.CrashAfterSend)
	if err := d.driveUntilCrash(id, w3); err != nil {
		return err
	}
	after, err := d.timeline(id, 0)
	if err != nil {
		return err
	}
	w, err := d.load(id)
	if err != nil {
		return err
	}
	txid := w.TxID()
	d.say(1, "the node's send log:")
	d.sends(w)
	d.say(1, "the log ends in %s: the txid %s may be out there, nobody knows", w.State, demoShort(txid))

	w4, err := d.worker("worker-4", nil)
	if err != nil {
		return err
	}
	_, err = w4.Drive(d.ctx, id)
	if errors.Is(err, sagas.ErrFenced) {
		d.say(1, "worker-4 tries at once → fenced: worker-3's lease runs until %s (wall clock)", w.Claim.LeaseUntil.Format("15:04:05"))
	} else {
		d.say(1, "worker-4 tries at once → %v", demoErr(err))
	}
	d.expect(errors.Is(err, sagas.ErrFenced), "a live lease keeps a second worker out")
	d.clock.Skip(sagas.DefaultLease + time.Second)
	d.say(1, "%s later (the demo moves the workers' wall clock instead of waiting) worker-4 claims it", sagas.DefaultLease+time.Second)
	d.say(1, "and asks the chain about the txid it finds in the log:")
	if err := d.drive([]string{id}, w4); err != nil {
		return err
	}
	if _, err := d.timeline(id, after); err != nil {
		return err
	}
	w, err = d.load(id)
	if err != nil {
		return err
	}
	d.say(1, "the node's send log now:")
	sends := d.sends(w)
	d.expect(w.TxID() == txid && w.Confirmation.TxID == txid && len(sends) == 1 && d.sim.Status(demoTxID(txid), true).Succeeded(),
		"confirmed with the same txid %s; %d send in all", demoShort(txid), len(sends))
	_, err = d.paidOnce(id)
	return err
}

func (d *demoWorld) sceneTimeout() error {
	id, err := d.requestApproved(demoAddress("scene 5"), "60")
	if err != nil {
		return err
	}
	d.sim.Script(tron.ChannelBroadcast, tron.FaultAcceptThenTimeout)
	d.say(1, "the node is scripted: it will take the next broadcast into its pool and lose the answer")
	d.say(1, "worker-1 sends; no answer. It neither resends blindly nor builds a new tx: it looks the txid up.")
	if err := d.drive([]string{id}, d.w1); err != nil {
		return err
	}
	if _, err := d.timeline(id, 0); err != nil {
		return err
	}
	w, err := d.load(id)
	if err != nil {
		return err
	}
	sends := d.sends(w)
	timedOut := len(sends) > 0 && sends[0].TimedOut && sends[0].Accepted
	d.expect(timedOut && w.Attempt == 1 && len(w.Retired) == 0, "the timed-out send was reconciled by txid (attempt %d, %d rebuilds)", w.Attempt, len(w.Retired))
	_, err = d.paidOnce(id)
	return err
}

func (d *demoWorld) sceneExpiry() error {
	id, err := d.requestApproved(demoAddress("scene 6"), "75")
	if err != nil {
		return err
	}
	w5, err := d.worker("worker-5", sagas.CrashOnce(sagas.CrashAfterIntent, id))
	if err != nil {
		return err
	}
	d.say(1, "worker-5 builds, signs and logs its intent to send, and dies before the bytes leave (crash point %s):", sagas.CrashAfterIntent)
	if err := d.driveUntilCrash(id, w5); err != nil {
		return err
	}
	after, err := d.timeline(id, 0)
	if err != nil {
		return err
	}
	w, err := d.load(id)
	if err != nil {
		return err
	}
	oldEnv := w.Envelope
	oldTxID, exp := w.TxID(), w.Envelope.Expiration
	margin := sagas.DefaultExpiryMargin.Milliseconds()
	d.say(1, "no other worker is running. The envelope %s expires at %s chain time; the chain moves on.", demoShort(oldTxID), demoMs(exp))

	// Past the expiration, but the solid chain not yet past expiration +
	// margin: a worker must wait, not rebuild.
	for d.sim.CurrentHead().Timestamp < exp {
		d.sim.Advance(1)
	}
	head, solid := d.sim.CurrentHead(), d.sim.CurrentSolidHead()
	d.clock.Skip(sagas.DefaultLease + time.Second)
	w6, err := d.worker("worker-6", nil)
	if err != nil {
		return err
	}
	if _, err := w6.Drive(d.ctx, id); err != nil {
		return err
	}
	w, err = d.load(id)
	if err != nil {
		return err
	}
	d.say(1, "worker-6 comes back at head %d (%s), solid block %d (%s): the node does not know the txid,", head.Number, demoMs(head.Timestamp), solid.Number, demoMs(solid.Timestamp))
	d.say(1, "but the solid chain is not yet past expiration + %d s margin (%s) → it waits (state %s, attempt %d)",
		margin/1000, demoMs(exp+margin), w.State, w.Attempt)
	d.expect(w.Attempt == 1 && len(w.Retired) == 0, "no rebuild without the chain-time proof")

	for d.sim.CurrentSolidHead().Timestamp < exp+margin {
		d.sim.Advance(1)
	}
	solid = d.sim.CurrentSolidHead()
	d.say(1, "the chain moves on until solid block %d (%s) reaches %s; worker-6 tries again:", solid.Number, demoMs(solid.Timestamp), demoMs(exp+margin))
	if err := d.drive([]string{id}, w6); err != nil {
		return err
	}
	if _, err := d.timeline(id, after); err != nil {
		return err
	}
	w, err = d.load(id)
	if err != nil {
		return err
	}
	if len(w.Retired) > 0 {
		ev := w.Retired[0].Evidence
		d.say(1, "the rebuild's evidence (recorded in the event): solid blocks %d..%d scanned, none holds %s; the last at %s ≥ expiration %s + margin %d s; ids sha256 %s",
			ev.Scan.From, ev.Scan.To, demoShort(w.Retired[0].TxID), demoMs(ev.Scan.ToTime), demoMs(ev.Expiration), ev.Margin/1000, demoShort(ev.Scan.IDsSHA256))
		d.expect(ev.Proves(exp) == nil && ev.SolidBlockTime >= exp+margin, "the rebuild carries a chain-time proof of death")
		d.expect(sagas.VerifyExpiryProof(d.ctx, d.sim, oldEnv, ev) == nil, "the proof holds on the chain: the same blocks, none holding the retired txid")
	} else {
		d.fail("%s was not rebuilt", id)
	}
	d.sends(w)
	old := d.sim.Status(demoTxID(oldTxID), false)
	d.say(1, "the retired txid %s on the node: %s", demoShort(oldTxID), old.State)
	d.expect(old.State == tron.TxUnknown && w.Confirmation.TxID != oldTxID, "the dead envelope never landed; the new one did")
	_, err = d.paidOnce(id)
	return err
}

func demoTxID(hexID string) [32]byte {
	id, err := tron.ParseTxID(hexID)
	if err != nil {
		return [32]byte{}
	}
	return id
}

func demoErr(err error) string {
	if err == nil {
		return "nothing to do"
	}
	if errors.Is(err, sagas.ErrFenced) {
		return "fenced (" + err.Error() + ")"
	}
	return err.Error()
}

// ---- the check ---------------------------------------------------------------

// finalCheck looks at everything in the store and on the chain, not only
// at what the scenes remember: every withdrawal's stream passes the audit;
// an external confirmed withdrawal has exactly one successful transfer on
// chain among its txids, and it is the confirmed one; an internal one has
// none; nothing on chain or in the send log belongs to no withdrawal; and
// every account is balanced, with the ledger agreeing with the chain.
func (d *demoWorld) finalCheck() error {
	var ids, accounts []string
	seen := map[string]bool{}
	if _, err := d.eng.store.ReadAll(d.ctx, 0, "", func(r eventstore.Record) error {
		if !seen[r.Key.Type+"/"+r.Key.ID] {
			seen[r.Key.Type+"/"+r.Key.ID] = true
			switch r.Key.Type {
			case eventlog.TypeWithdrawal:
				ids = append(ids, r.Key.ID)
			case eventlog.TypeAccount:
				accounts = append(accounts, r.Key.ID)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	transfers := d.sim.Transfers()
	var ws []aggregate.Withdrawal
	external, internal := new(big.Int), aggregate.USDT.Zero()
	payments, moves := 0, 0
	for _, id := range ids {
		recs, err := d.eng.repo.WithdrawalRecords(d.ctx, id)
		if err != nil {
			return err
		}
		evs, err := eventlog.WithdrawalEvents(recs)
		if err != nil {
			return err
		}
		w, auditErr := aggregate.Audit(evs)
		if auditErr != nil {
			d.fail("%s: audit: %v", id, auditErr)
		}
		ws = append(ws, w)
		if w.Terminal() {
			if err := d.ledger.Finish(d.ctx, w); err != nil {
				return err
			}
		}
		var mine []tron.Transfer
		for _, t := range transfers {
			if w.KnowsTxID(tron.HexID(t.TxID)) && t.Receipt == tron.ReceiptSuccess {
				mine = append(mine, t)
			}
		}
		switch {
		case w.State == aggregate.StateConfirmed && w.Route.IsInternal():
			d.expect(len(mine) == 0, "%s internal, %s: %s USDT to account %s on the ledger; 0 transfers on chain", id, w.State, w.Amount, w.Route.Account())
			internal = internal.Add(w.Amount)
			moves++
		case w.State == aggregate.StateConfirmed:
			ok := len(mine) == 1 && tron.HexID(mine[0].TxID) == w.Confirmation.TxID &&
				mine[0].Amount.Cmp(w.Amount.Units()) == 0 && mine[0].To.String() == w.ToAddress
			d.expect(ok, "%s external, %s: %d successful transfer on chain (txid %s, attempt %d)", id, w.State, len(mine), demoShort(w.Confirmation.TxID), w.Attempt)
			if len(mine) > 0 {
				external.Add(external, mine[0].Amount)
			}
			payments++
			moves++
		default:
			d.expect(len(mine) == 0, "%s %s (%s): nothing on chain", id, w.State, w.Reason)
		}
	}
	for _, t := range transfers {
		if !slices.ContainsFunc(ws, func(w aggregate.Withdrawal) bool { return w.KnowsTxID(tron.HexID(t.TxID)) }) {
			d.fail("transfer %s on chain belongs to no withdrawal", tron.HexID(t.TxID))
		}
	}
	for _, s := range d.sim.BroadcastLog() {
		if !slices.ContainsFunc(ws, func(w aggregate.Withdrawal) bool { return w.KnowsTxID(tron.HexID(s.TxID)) }) {
			d.fail("the node was sent %s, which no withdrawal's log holds", tron.HexID(s.TxID))
		}
	}
	chain := d.sim.Ledger()
	d.expect(chain.Total.Cmp(external) == 0 && chain.Failed == 0,
		"the chain moved %s USDT in %d transfers = the external withdrawals' sum", demoUnits(chain.Total), chain.Succeeded)

	slices.Sort(accounts)
	settled := aggregate.USDT.Zero()
	for _, id := range accounts {
		a, _, err := d.eng.repo.Account(d.ctx, id)
		if err != nil {
			return err
		}
		err = a.CheckInvariants()
		d.expect(err == nil && a.Reserved().IsZero(), "account %s: credited %s = available %s + reserved %s + settled %s%s",
			id, a.Credited(), a.Available(), a.Reserved(), a.Settled(), demoErrSuffix(err))
		settled = settled.Add(a.Settled())
	}
	extAmount, err := aggregate.FromUnits(aggregate.USDT, external)
	if err != nil {
		return err
	}
	d.expect(settled.Equal(extAmount.Add(internal)), "settled on the ledger %s = paid on chain %s + moved internally %s", settled, extAmount, internal)
	d.summary = fmt.Sprintf("%d withdrawals: %d paid on chain and %d on the ledger, each exactly once; every account balanced.",
		len(ids), payments, moves-payments)
	return nil
}

func demoErrSuffix(err error) string {
	if err != nil {
		return " — " + err.Error()
	}
	return ""
}
