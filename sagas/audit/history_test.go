package audit_test

// The audit's test rig: a real embedded NATS server (memory storage), the
// real store, repo, intake and ledger, and a simulated TRON node whose chain
// only moves when a test says so. Withdrawals are built through the real
// deciders; forged events are appended around them through the store's own
// append path, as an attacker with write access to the stream would.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/sagas/audit"
	"github.com/weir-payouts/weir/tron"
)

// payee is a valid TRON address that is not the hot wallet.
const payee = "TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC"

// chainFixture is a simulated TRON node plus the hot wallet's key.
type chainFixture struct {
	sim    *tron.SimNode
	signer *tron.KeySigner
	stamp  int64 // makes each envelope's bytes unique
}

func newChain(t *testing.T) *chainFixture {
	t.Helper()
	sim := tron.NewSimNode(tron.SimConfig{Start: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)})
	sim.Advance(30) // a solid block to refer to
	key := sha256.Sum256([]byte("weir audit test hot wallet"))
	signer, err := tron.NewKeySigner(key[:])
	if err != nil {
		t.Fatal(err)
	}
	return &chainFixture{sim: sim, signer: signer}
}

// envelope builds a real TRC-20 transfer for w from the node's view of the
// chain, as the broadcast saga does.
func (c *chainFixture) envelope(t *testing.T, w aggregate.Withdrawal) (aggregate.Envelope, tron.Envelope) {
	t.Helper()
	head, ref := c.sim.CurrentHead(), c.sim.CurrentSolidHead()
	c.stamp++
	env, err := tron.BuildTransfer(tron.TransferParams{
		Owner: c.signer.Address(), To: tron.MustParseAddress(w.ToAddress), Amount: w.Amount.Units(),
		RefBlock: ref, Timestamp: head.Timestamp + c.stamp, Expiration: head.Timestamp + 60_000,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := ref.RefBlockHash()
	return aggregate.Envelope{
		TxID: env.TxIDHex(), RawDataHex: env.RawHex(), Expiration: env.Expiration, FeeLimit: env.FeeLimit,
		RefBlockNum: ref.Number, RefBlockHash: hex.EncodeToString(h[:]),
	}, env
}

// history builds withdrawals through the real deciders (sagas.Repo) and
// appends forged events around them (eventstore.Append).
type history struct {
	t      *testing.T
	srv    *eventstoretest.Server
	nc     *nats.Conn
	store  *eventstore.Store
	repo   *sagas.Repo
	ledger *sagas.Ledger
	intake *sagas.Intake
	chain  *chainFixture
	now    time.Time        // of the last command
	payer  string           // the account request draws on ("acme")
	config aggregate.Config // published first: what is in force
}

func newHistory(t *testing.T) *history {
	t.Helper()
	return newHistoryWith(t, eventstoretest.Keyring())
}

// newHistoryWith is newHistory with the stores sealing with sealer (nil:
// a weir without an event key, whose log anyone could have written).
func newHistoryWith(t *testing.T, sealer eventstore.Sealer) *history {
	t.Helper()
	srv := eventstoretest.Start(t)
	srv.Sealer = sealer
	nc := srv.Conn()
	store := srv.StoreOn(t.Context(), nc, eventlog.NewRegistry())
	repo := sagas.NewRepo(store)
	ledger := sagas.NewLedger(repo, aggregate.Amount{}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	h := &history{t: t, srv: srv, nc: nc, store: store, repo: repo, ledger: ledger, intake: sagas.NewIntake(repo, ledger, nil), chain: newChain(t), payer: "acme"}
	h.config = testConfig(h.chain.signer.Address())
	cs, _, err := repo.StartConfig(t.Context(), h.config, sagas.ConfigPublish{By: aggregate.SystemActor, Process: "audit test", At: h.at()})
	if err != nil {
		t.Fatal(err)
	}
	src := sagas.NewConfigSource(repo, cs, nil)
	ledger.UseConfig(src)
	h.intake.UseConfig(src)
	h.credit("acme", "seed", "1000000")
	return h
}

// setConfig publishes a changed configuration (a runtime change, as a
// `weir serve --publish-config` makes one).
func (h *history) setConfig(change func(*aggregate.Config)) {
	h.t.Helper()
	change(&h.config)
	if _, _, err := h.repo.StartConfig(h.t.Context(), h.config, sagas.ConfigPublish{By: aggregate.SystemActor, Process: "audit test", Replace: true, At: h.at()}); err != nil {
		h.t.Fatal(err)
	}
}

// testConfig is the configuration in force in the histories: the dev
// principals, the fixture's hot wallet, a daily limit no clean history
// reaches.
func testConfig(hot tron.Address) aggregate.Config {
	return aggregate.Config{
		Principals: []aggregate.ConfigPrincipal{
			{Name: "alice", Roles: []string{aggregate.RoleRequester, aggregate.RoleApprover}},
			{Name: "bob", Roles: []string{aggregate.RoleApprover}},
			{Name: "carol", Roles: []string{aggregate.RoleApprover}},
			{Name: "olivia", Roles: []string{aggregate.RoleOperator, aggregate.RoleRequester}},
			{Name: "oscar", Roles: []string{aggregate.RoleOperator}},
		},
		HotWallets:   []string{hot.String()},
		Custody:      []aggregate.CustodyEntry{{Address: "TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC", Account: "treasury"}},
		DailyLimit:   aggregate.MustParseAmount(aggregate.USDT, "10000000"),
		PolicyQuorum: 1,
	}
}

// at is the time of the next command (the wall clock, as the intake's;
// never repeated, so events keep their order).
func (h *history) at() time.Time {
	now := time.Now().UTC()
	if !now.After(h.now) {
		now = h.now.Add(time.Microsecond)
	}
	h.now = now
	return now
}

func (h *history) credit(account, creditID, amount string) {
	h.t.Helper()
	if _, _, err := h.intake.Credit(h.t.Context(), sagas.CreditInput{Account: account, CreditID: creditID, Amount: json.RawMessage(`"` + amount + `"`), By: "olivia"}); err != nil {
		h.t.Fatal(err)
	}
}

// request creates a withdrawal by alice on h.payer and reserves it
// (intake + ledger).
func (h *history) request(amount string) string {
	h.t.Helper()
	id := uuid.NewString()
	w, _, err := h.intake.Request(h.t.Context(), sagas.RequestInput{
		OperationID: id, Account: h.payer, ToAddress: payee, Amount: json.RawMessage(`"` + amount + `"`), By: "alice",
	})
	if err != nil || !w.Reserved {
		h.t.Fatalf("request: %v %+v", err, w)
	}
	return id
}

func (h *history) policy() aggregate.Policy {
	h.t.Helper()
	p, err := h.intake.Policy(h.t.Context())
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// do decides cmd against the current state and appends it.
func (h *history) do(id string, cmd func(aggregate.Withdrawal) aggregate.Command) aggregate.Withdrawal {
	h.t.Helper()
	w, _, err := h.repo.UpdateWithdrawal(h.t.Context(), id, func(w aggregate.Withdrawal) (aggregate.Command, error) {
		return cmd(w), nil
	})
	if err != nil {
		h.t.Fatalf("%T: %v", cmd(w), err)
	}
	return w
}

func (h *history) withdrawal(id string) aggregate.Withdrawal {
	h.t.Helper()
	w, _, err := h.repo.Withdrawal(h.t.Context(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return w
}

func (h *history) approve(id string, by ...string) {
	h.t.Helper()
	for _, b := range by {
		if _, err := h.intake.Approve(h.t.Context(), id, b); err != nil {
			h.t.Fatal(err)
		}
	}
}

func (h *history) route(id string, r aggregate.Route) {
	h.do(id, func(aggregate.Withdrawal) aggregate.Command { return aggregate.ChooseRoute{Route: r, At: h.at()} })
}

func external(t *testing.T) aggregate.Route {
	r, err := aggregate.ExternalRoute("destination not custodied by weir")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func internal(t *testing.T, account string) aggregate.Route {
	r, err := aggregate.InternalRoute(account, "destination custodied by weir")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// build writes ahead the first envelope under the policy given.
func (h *history) build(id string, policy aggregate.Policy) (aggregate.Withdrawal, tron.Envelope) {
	h.t.Helper()
	env, tenv := h.chain.envelope(h.t, h.withdrawal(id))
	w := h.do(id, func(aggregate.Withdrawal) aggregate.Command {
		return aggregate.BuildEnvelope{Envelope: env, Policy: policy, At: h.at()}
	})
	return w, tenv
}

// sign signs the current envelope and records it.
func (h *history) sign(id string, env tron.Envelope) tron.SignedTx {
	h.t.Helper()
	tx, err := tron.SignEnvelope(h.t.Context(), h.chain.signer, env)
	if err != nil {
		h.t.Fatal(err)
	}
	h.do(id, func(aggregate.Withdrawal) aggregate.Command {
		return aggregate.RecordSignature{TxID: env.TxIDHex(), Signature: hex.EncodeToString(tx.Signature), Policy: h.policy(), At: h.at()}
	})
	return tx
}

// send broadcasts on the node (when onChain) and records intent and
// acceptance.
func (h *history) send(id string, tx tron.SignedTx, onChain bool) {
	h.t.Helper()
	txid := tron.HexID(tx.TxID())
	if onChain {
		res, err := h.chain.sim.Broadcast(h.t.Context(), tx)
		if err != nil || !res.IsAccepted() {
			h.t.Fatalf("broadcast: %v %v", res, err)
		}
	}
	w := h.do(id, func(w aggregate.Withdrawal) aggregate.Command {
		return aggregate.RecordBroadcastIntent{TxID: txid, Send: w.Sends + 1, At: h.at()}
	})
	h.do(id, func(aggregate.Withdrawal) aggregate.Command {
		return aggregate.RecordAccepted{TxID: txid, Send: w.Sends, Result: "SUCCESS", At: h.at()}
	})
}

// signAndSend signs the current envelope and records the signature with
// the first send's intent in one event, as the worker does, then
// broadcasts on the node (when onChain) and records the acceptance.
func (h *history) signAndSend(id string, env tron.Envelope, onChain bool) tron.SignedTx {
	h.t.Helper()
	tx, err := tron.SignEnvelope(h.t.Context(), h.chain.signer, env)
	if err != nil {
		h.t.Fatal(err)
	}
	txid := env.TxIDHex()
	h.do(id, func(aggregate.Withdrawal) aggregate.Command {
		return aggregate.RecordSignature{TxID: txid, Signature: hex.EncodeToString(tx.Signature), Policy: h.policy(), Send: 1, At: h.at()}
	})
	if onChain {
		res, err := h.chain.sim.Broadcast(h.t.Context(), tx)
		if err != nil || !res.IsAccepted() {
			h.t.Fatalf("broadcast: %v %v", res, err)
		}
	}
	h.do(id, func(aggregate.Withdrawal) aggregate.Command {
		return aggregate.RecordAccepted{TxID: txid, Send: 1, Result: "SUCCESS", At: h.at()}
	})
	return tx
}

// confirm records the confirmation the node gives (or, with block > 0, a
// made-up one) and settles the account as the ledger saga does.
func (h *history) confirm(id string, txid string, block int64) {
	h.t.Helper()
	blockTime := h.chain.sim.CurrentHead().Timestamp
	if block == 0 {
		h.chain.sim.Advance(25) // include and solidify
		id32, _ := tron.ParseTxID(txid)
		st := h.chain.sim.Status(id32, true)
		if !st.Succeeded() {
			h.t.Fatalf("not confirmed on the sim: %v", st)
		}
		block, blockTime = st.BlockNumber, st.BlockTime
	}
	w := h.do(id, func(aggregate.Withdrawal) aggregate.Command {
		return aggregate.Confirm{TxID: txid, BlockNumber: block, BlockTime: blockTime, Receipt: aggregate.ReceiptSuccess, At: h.at()}
	})
	h.finish(w)
}

// finish settles or releases the account as the ledger saga does.
func (h *history) finish(w aggregate.Withdrawal) {
	h.t.Helper()
	if err := h.ledger.Finish(h.t.Context(), w); err != nil {
		h.t.Fatal(err)
	}
}

// pay runs an external withdrawal to confirmed on the simulated chain.
func (h *history) pay(amount string, approvers ...string) string {
	h.t.Helper()
	id := h.request(amount)
	h.approve(id, approvers...)
	h.route(id, external(h.t))
	h.payReady(id)
	return id
}

// payReady builds, signs, sends and confirms an approved, routed withdrawal.
func (h *history) payReady(id string) {
	h.t.Helper()
	_, env := h.build(id, h.policy())
	tx := h.sign(id, env)
	h.send(id, tx, true)
	h.confirm(id, env.TxIDHex(), 0)
}

// payInOne is pay with the signature carrying the first send's intent
// (one event), as the worker writes it.
func (h *history) payInOne(amount string, approvers ...string) string {
	h.t.Helper()
	id := h.request(amount)
	h.approve(id, approvers...)
	h.route(id, external(h.t))
	_, env := h.build(id, h.policy())
	h.signAndSend(id, env, true)
	h.confirm(id, env.TxIDHex(), 0)
	return id
}

// proveDead lets the chain pass the envelope's expiration + 30 s and
// scans for its proof of death, as a worker does.
func (h *history) proveDead(env aggregate.Envelope) aggregate.Evidence {
	h.t.Helper()
	for h.chain.sim.CurrentSolidHead().Timestamp < env.Expiration+30_000 {
		h.chain.sim.Advance(10)
	}
	proof, err := sagas.ProveExpired(h.t.Context(), h.chain.sim, env, 30_000)
	if err != nil {
		h.t.Fatal(err)
	}
	return proof
}

// rebuiltAndPaid: an envelope signed and sent that never reached the
// chain, proven dead on chain time, rebuilt, then paid.
func (h *history) rebuiltAndPaid(amount string, approvers ...string) (id string, retired tron.Envelope) {
	h.t.Helper()
	id = h.request(amount)
	h.approve(id, approvers...)
	h.route(id, external(h.t))
	w, env1 := h.build(id, h.policy())
	h.send(id, h.sign(id, env1), false)
	proof := h.proveDead(w.Envelope)
	w = h.withdrawal(id)
	newEnv, env2 := h.chain.envelope(h.t, w)
	h.do(id, func(aggregate.Withdrawal) aggregate.Command {
		return aggregate.Rebuild{RetiredTxID: env1.TxIDHex(), Evidence: proof, Envelope: newEnv, At: h.at()}
	})
	h.signAndSend(id, env2, true) // the new attempt's first send rides on its signature
	h.confirm(id, env2.TxIDHex(), 0)
	return id, env1
}

// forge appends raw events that no decider would have produced, through
// the store's own append path.
func (h *history) forge(id string, events ...aggregate.Event) {
	h.t.Helper()
	_, pos, err := h.repo.Withdrawal(h.t.Context(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, e := range events {
		pos, err = h.store.Append(h.t.Context(), eventstore.Key{Type: eventlog.TypeWithdrawal, ID: id}, pos,
			eventstore.Event{Type: e.EventType(), Data: e})
		if err != nil {
			h.t.Fatal(err)
		}
	}
}

// forgeAccount appends a raw account event.
func (h *history) forgeAccount(account string, e aggregate.AccountEvent) {
	h.t.Helper()
	_, pos, err := h.repo.Account(h.t.Context(), account)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.store.Append(h.t.Context(), eventstore.Key{Type: eventlog.TypeAccount, ID: account}, pos,
		eventstore.Event{Type: e.EventType(), Data: e}); err != nil {
		h.t.Fatal(err)
	}
}

// all audits the whole log against the simulated node.
func (h *history) all(wantOK bool) *audit.Report {
	h.t.Helper()
	return h.check(wantOK, func(opts audit.Options) (*audit.Report, error) { return audit.All(h.t.Context(), h.store, opts) })
}

// one audits one withdrawal against the simulated node.
func (h *history) one(id string, wantOK bool) *audit.Report {
	h.t.Helper()
	return h.check(wantOK, func(opts audit.Options) (*audit.Report, error) {
		return audit.Withdrawal(h.t.Context(), h.store, id, opts)
	})
}

func (h *history) check(wantOK bool, run func(audit.Options) (*audit.Report, error)) *audit.Report {
	h.t.Helper()
	rep, err := run(audit.Options{Node: h.chain.sim, NodeURL: "sim"})
	if err != nil {
		h.t.Fatal(err)
	}
	// The report is what `weir audit --json` prints: it must survive JSON.
	b, err := json.Marshal(rep)
	if err != nil {
		h.t.Fatal(err)
	}
	var back audit.Report
	if err := json.Unmarshal(b, &back); err != nil {
		h.t.Fatalf("report does not round-trip: %v", err)
	}
	if rep.OK != wantOK {
		h.t.Fatalf("audit ok = %v, want %v\nviolations:\n%swarnings:\n%s", rep.OK, wantOK, findingsText(rep.Violations), findingsText(rep.Warnings))
	}
	return rep
}

func findingsText(fs []audit.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(f.Where() + " [" + f.Check + "]: " + f.What + "\n")
	}
	return b.String()
}

// wantViolation asserts one violation on withdrawal id at event version
// whose text contains what.
func wantViolation(t *testing.T, r *audit.Report, id string, version uint64, what string) {
	t.Helper()
	for _, f := range r.Violations {
		if f.Withdrawal == id && f.Version == version && strings.Contains(f.What, what) {
			return
		}
	}
	t.Fatalf("no violation on %s event %d containing %q; violations:\n%s", id, version, what, findingsText(r.Violations))
}

// forgeRaw publishes an event on k's stream with the headers the store
// writes, but with the back-pointer and version given: what only a writer
// bypassing the store could produce. The server's own concurrency check
// still passes (it expects the subject's real last sequence).
func (h *history) forgeRaw(k eventstore.Key, e interface{ EventType() string }, version, prevSeq uint64) uint64 {
	h.t.Helper()
	data, err := json.Marshal(e)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.forgeMsg(k, e.EventType(), data, version, prevSeq, nil)
}

// forgeMsg publishes a raw message on k's stream with the store's headers
// for type typ, version and back-pointer, edited by edit (nil: none), and
// no tag: the server's concurrency check passes.
func (h *history) forgeMsg(k eventstore.Key, typ string, data []byte, version, prevSeq uint64, edit func(*nats.Msg)) uint64 {
	h.t.Helper()
	return h.forgeAfter(k, h.last(k), typ, data, version, prevSeq, edit)
}

// forgeAfter is forgeMsg on a stream whose last event is at stream
// sequence last (for a stream the store refuses to load).
func (h *history) forgeAfter(k eventstore.Key, last uint64, typ string, data []byte, version, prevSeq uint64, edit func(*nats.Msg)) uint64 {
	h.t.Helper()
	m := eventstoretest.Forged(h.store.Subject(k), eventstore.Position{Sequence: last, Version: version - 1}, typ, aggregate.EventSchemaVersion, data)
	m.Header.Set(eventstore.HeaderPrevSeq, strconv.FormatUint(prevSeq, 10))
	if edit != nil {
		edit(m)
	}
	js, err := jetstream.New(h.nc)
	if err != nil {
		h.t.Fatal(err)
	}
	ack, err := js.PublishMsg(h.t.Context(), m)
	if err != nil {
		h.t.Fatal(err)
	}
	return ack.Sequence
}

// wantFinding asserts a violation of check whose text contains what, at
// the stream sequence given (0: any).
func wantFinding(t *testing.T, r *audit.Report, check string, seq uint64, what string) {
	t.Helper()
	for _, f := range r.Violations {
		if f.Check == check && (seq == 0 || f.Sequence == seq) && strings.Contains(f.What, what) {
			return
		}
	}
	t.Fatalf("no %s violation at sequence %d containing %q; violations:\n%s", check, seq, what, findingsText(r.Violations))
}

// ready is a withdrawal requested by alice, approved by bob and routed to
// the chain: the next step is its envelope.
func (h *history) ready(amount string) string {
	h.t.Helper()
	id := h.request(amount)
	h.approve(id, "bob")
	h.route(id, external(h.t))
	return id
}

// account decides an account command and appends it.
func (h *history) account(id string, cmd aggregate.AccountCommand) {
	h.t.Helper()
	if _, _, err := h.repo.UpdateAccount(h.t.Context(), id, cmd); err != nil {
		h.t.Fatal(err)
	}
}

// last is the stream sequence of k's last event.
func (h *history) last(k eventstore.Key) uint64 {
	h.t.Helper()
	_, pos, err := h.store.Load(h.t.Context(), k)
	if err != nil {
		h.t.Fatal(err)
	}
	return pos.Sequence
}
