package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/projections"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/tron"
	"github.com/weir-payouts/weir/tron/tronhttp"
)

// chainFixture is a simulated TRON node, served over its java-tron HTTP
// API like `weir serve` does, plus the hot wallet's key.
type chainFixture struct {
	sim    *tron.SimNode
	url    string
	signer *tron.KeySigner
	stamp  int64 // makes each envelope's bytes unique
}

func newChain(t *testing.T) *chainFixture {
	t.Helper()
	sim := tron.NewSimNode(tron.SimConfig{Start: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)})
	sim.Advance(30) // a solid block to refer to
	srv := httptest.NewServer(tronhttp.NewHandler(sim))
	t.Cleanup(srv.Close)
	key := sha256.Sum256([]byte("weir audit test hot wallet"))
	signer, err := tron.NewKeySigner(key[:])
	if err != nil {
		t.Fatal(err)
	}
	return &chainFixture{sim: sim, url: srv.URL, signer: signer}
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
	t     *testing.T
	s     *stack
	chain *chainFixture
	now   time.Time // of the last command
}

func newHistory(t *testing.T) *history {
	t.Helper()
	s := newStack(t, false)
	h := &history{t: t, s: s, chain: newChain(t)}
	h.credit("acme", "seed", "1000000")
	return h
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
	if _, _, err := h.s.intake.Credit(h.t.Context(), sagas.CreditInput{Account: account, CreditID: creditID, Amount: json.RawMessage(`"` + amount + `"`)}); err != nil {
		h.t.Fatal(err)
	}
}

// request creates a withdrawal by alice and reserves it (intake + ledger).
func (h *history) request(amount string) string {
	h.t.Helper()
	id := uuid.NewString()
	w, _, err := h.s.intake.Request(h.t.Context(), sagas.RequestInput{
		OperationID: id, Account: "acme", ToAddress: cliTestAddr, Amount: json.RawMessage(`"` + amount + `"`), By: "alice",
	})
	if err != nil || !w.Reserved {
		h.t.Fatalf("request: %v %+v", err, w)
	}
	return id
}

func (h *history) policy() aggregate.Policy {
	h.t.Helper()
	p, err := h.s.intake.Policy(h.t.Context())
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// do decides cmd against the current state and appends it.
func (h *history) do(id string, cmd func(aggregate.Withdrawal) aggregate.Command) aggregate.Withdrawal {
	h.t.Helper()
	w, _, err := h.s.repo.UpdateWithdrawal(h.t.Context(), id, func(w aggregate.Withdrawal) (aggregate.Command, error) {
		return cmd(w), nil
	})
	if err != nil {
		h.t.Fatalf("%T: %v", cmd(w), err)
	}
	return w
}

func (h *history) approve(id string, by ...string) {
	h.t.Helper()
	for _, b := range by {
		if _, err := h.s.intake.Approve(h.t.Context(), id, b); err != nil {
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

// build writes ahead the first envelope under the policy given.
func (h *history) build(id string, policy aggregate.Policy) (aggregate.Withdrawal, tron.Envelope) {
	h.t.Helper()
	w, _, _ := h.s.repo.Withdrawal(h.t.Context(), id)
	env, tenv := h.chain.envelope(h.t, w)
	w = h.do(id, func(aggregate.Withdrawal) aggregate.Command {
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
		return aggregate.RecordSignature{TxID: env.TxIDHex(), Signature: hex.EncodeToString(tx.Signature), At: h.at()}
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
	if err := h.s.ledger.Finish(h.t.Context(), w); err != nil {
		h.t.Fatal(err)
	}
}

// pay runs an external withdrawal to confirmed on the simulated chain.
func (h *history) pay(amount string, approvers ...string) string {
	h.t.Helper()
	id := h.request(amount)
	h.approve(id, approvers...)
	h.route(id, external(h.t))
	_, env := h.build(id, h.policy())
	tx := h.sign(id, env)
	h.send(id, tx, true)
	h.confirm(id, env.TxIDHex(), 0)
	return id
}

// forge appends raw events that no decider would have produced.
func (h *history) forge(id string, events ...aggregate.Event) {
	h.t.Helper()
	_, pos, err := h.s.repo.Withdrawal(h.t.Context(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, e := range events {
		pos, err = h.s.store.Append(h.t.Context(), eventstore.Key{Type: projections.TypeWithdrawal, ID: id}, pos,
			eventstore.Event{Type: e.EventType(), Data: e})
		if err != nil {
			h.t.Fatal(err)
		}
	}
}

// audit runs `weir audit` against the stack and, unless args name
// another, the simulated node.
func (h *history) audit(args ...string) (int, string, string) {
	h.t.Helper()
	args = append([]string{"audit"}, args...)
	if !slices.Contains(args, "--tron-node") {
		args = append(args, "--tron-node", h.chain.url)
	}
	return h.s.weir(h.t, args...)
}

// auditJSON runs the audit with --json and decodes the report.
func (h *history) auditJSON(wantExit int, args ...string) auditReport {
	h.t.Helper()
	code, out, errOut := h.audit(append(args, "--json")...)
	wantCode(h.t, code, wantExit, out, errOut)
	var r auditReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		h.t.Fatalf("audit --json: %v\n%s", err, out)
	}
	return r
}

func findingsText(fs []auditFinding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(f.where() + " [" + f.Check + "]: " + f.What + "\n")
	}
	return b.String()
}

// wantViolation asserts one violation on withdrawal id at event version
// whose text contains what.
func wantViolation(t *testing.T, r auditReport, id string, version uint64, what string) {
	t.Helper()
	for _, f := range r.Violations {
		if f.Withdrawal == id && f.Version == version && strings.Contains(f.What, what) {
			return
		}
	}
	t.Fatalf("no violation on %s event %d containing %q; violations:\n%s", id, version, what, findingsText(r.Violations))
}

// TestAuditPassesACleanHistory: payouts on chain (one of them rebuilt
// after a proven expiry), an internal transfer, a cancellation and a
// request still waiting — every check holds, against the node too.
func TestAuditPassesACleanHistory(t *testing.T) {
	h := newHistory(t)
	paid := h.pay("12.5", "bob")
	h.pay("2500", "bob", "carol")

	// An envelope that was signed and never reached the chain, proven dead
	// on chain time, rebuilt, then paid.
	rebuilt := h.request("40")
	h.approve(rebuilt, "bob")
	h.route(rebuilt, external(t))
	w, env1 := h.build(rebuilt, h.policy())
	tx1 := h.sign(rebuilt, env1)
	h.send(rebuilt, tx1, false)
	for h.chain.sim.CurrentSolidHead().Timestamp < w.Envelope.Expiration+30_000 {
		h.chain.sim.Advance(10)
	}
	solid := h.chain.sim.CurrentSolidHead()
	w, _, _ = h.s.repo.Withdrawal(t.Context(), rebuilt)
	newEnv, tenv2 := h.chain.envelope(t, w)
	h.do(rebuilt, func(aggregate.Withdrawal) aggregate.Command {
		return aggregate.Rebuild{RetiredTxID: env1.TxIDHex(), Evidence: aggregate.Evidence{
			SolidBlockNumber: solid.Number, SolidBlockTime: solid.Timestamp, Expiration: w.Envelope.Expiration,
			Margin: 30_000, Lookup: aggregate.LookupNotFound,
		}, Envelope: newEnv, At: h.at()}
	})
	tx2 := h.sign(rebuilt, tenv2)
	h.send(rebuilt, tx2, true)
	h.confirm(rebuilt, tenv2.TxIDHex(), 0)

	// An internal transfer to a custodied account.
	internal := h.request("7")
	h.approve(internal, "carol")
	r, err := aggregate.InternalRoute("treasury", "destination custodied by weir")
	if err != nil {
		t.Fatal(err)
	}
	h.route(internal, r)
	w = h.do(internal, func(aggregate.Withdrawal) aggregate.Command {
		return aggregate.SettleInternally{Policy: h.policy(), At: h.at()}
	})
	if err := h.s.ledger.Finish(t.Context(), w); err != nil {
		t.Fatal(err)
	}

	cancelled := h.request("3")
	if _, err := h.s.intake.Cancel(t.Context(), cancelled, "alice", false); err != nil {
		t.Fatal(err)
	}
	h.request("5") // waiting for approval

	rep := h.auditJSON(0, "--all")
	if !rep.OK || rep.Withdrawals != 6 || rep.Accounts != 2 || !rep.Chain.Checked || rep.Chain.TxIDs != 4 {
		t.Fatalf("report: ok %v withdrawals %d accounts %d chain %+v\nviolations:\n%swarnings:\n%s",
			rep.OK, rep.Withdrawals, rep.Accounts, rep.Chain, findingsText(rep.Violations), findingsText(rep.Warnings))
	}
	if len(rep.Warnings) != 0 || rep.States["confirmed"] != 4 || rep.States["rejected"] != 1 || rep.States["requested"] != 1 {
		t.Fatalf("states %v warnings:\n%s", rep.States, findingsText(rep.Warnings))
	}

	// The human report, and one withdrawal's timeline with its evidence.
	code, out, errOut := h.audit("--all")
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "audit --all", out, "audited 6 withdrawal(s), 2 account(s)", "states: requested 1, confirmed 4, rejected 1",
		"chain: 4 txid(s) checked against "+h.chain.url, "OK: every check holds")
	if errOut != "" {
		t.Fatalf("stderr is not a terminal, yet: %q", errOut)
	}
	code, out, errOut = h.audit(rebuilt)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "audit ID", out, "withdrawal "+rebuilt+": confirmed", "VERSION", "withdrawal.rebuilt",
		"retired_txid="+env1.TxIDHex(), "lookup not_found", "withdrawal.confirmed", "receipt=SUCCESS", "OK: every check holds")
	code, out, errOut = h.audit(paid, "--json")
	wantCode(t, code, 0, out, errOut)
	var one auditReport
	if err := json.Unmarshal([]byte(out), &one); err != nil || one.Withdrawal == nil || len(one.Withdrawal.Timeline) == 0 {
		t.Fatalf("audit ID --json: %v %s", err, out)
	}
	if tl := one.Withdrawal.Timeline; tl[0].Type != aggregate.EventRequested || tl[len(tl)-1].State != aggregate.StateConfirmed {
		t.Fatalf("timeline %+v", tl)
	}
}

// TestAuditNamesForgedViolations: events appended around the deciders —
// a second approval by the requester, an envelope whose txid is not
// sha256(raw), a rebuild whose evidence proves nothing, an envelope paying
// someone else, a confirmation the chain does not know — each exit 1,
// named with its withdrawal and event version.
func TestAuditNamesForgedViolations(t *testing.T) {
	h := newHistory(t)

	// 1. The requester approves her own withdrawal (after bob).
	selfApproved := h.request("2500") // four-eyes: 2 approvals
	h.approve(selfApproved, "bob")    // v3
	pol := h.policy()
	h.forge(selfApproved, aggregate.Approved{
		Approval:          aggregate.Approval{By: "alice", At: h.at(), Rule: "four-eyes", PolicyVersion: pol.Version},
		RequiredApprovals: 2, At: h.now,
	}) // v4

	// 2. An envelope whose txid is not sha256(raw_data).
	badTxID := h.request("10")
	h.approve(badTxID, "bob")     // v3
	h.route(badTxID, external(t)) // v4
	w, _, _ := h.s.repo.Withdrawal(t.Context(), badTxID)
	env, _ := h.chain.envelope(t, w)
	wrong := sha256.Sum256([]byte("not these bytes"))
	env.TxID = hex.EncodeToString(wrong[:])
	h.forge(badTxID, aggregate.EnvelopeBuilt{Attempt: 1, Envelope: env, PolicyVersion: pol.Version, At: h.at()}) // v5

	// 3. A rebuild whose evidence does not prove the old envelope expired.
	badProof := h.request("11")
	h.approve(badProof, "bob")
	h.route(badProof, external(t))
	w, env1 := h.build(badProof, pol) // v5
	h.sign(badProof, env1)            // v6
	solid := h.chain.sim.CurrentSolidHead()
	env2, _ := h.chain.envelope(t, w)
	h.forge(badProof, aggregate.Rebuilt{Attempt: 2, RetiredTxID: env1.TxIDHex(), Evidence: aggregate.Evidence{
		SolidBlockNumber: solid.Number, SolidBlockTime: solid.Timestamp, Expiration: w.Envelope.Expiration,
		Margin: 30_000, Lookup: aggregate.LookupNotFound,
	}, Envelope: env2, At: h.at()}) // v7

	// 4. An envelope (well formed, txid right) paying another address.
	otherPayee := h.request("12")
	h.approve(otherPayee, "bob")
	h.route(otherPayee, external(t))
	w, _, _ = h.s.repo.Withdrawal(t.Context(), otherPayee)
	w.ToAddress = tron.USDTContract.String()
	env, _ = h.chain.envelope(t, w)
	h.forge(otherPayee, aggregate.EnvelopeBuilt{Attempt: 1, Envelope: env, PolicyVersion: pol.Version, At: h.at()}) // v5

	// 5. Decided by the real deciders, but confirmed with a txid the chain
	// never saw: only the chain check can tell.
	ghost := h.request("13")
	h.approve(ghost, "bob")
	h.route(ghost, external(t))
	_, genv := h.build(ghost, pol)
	gtx := h.sign(ghost, genv)
	h.send(ghost, gtx, false)
	h.confirm(ghost, genv.TxIDHex(), 4242) // v9

	// 6. A confirmation of a withdrawal nobody approved: not in the table.
	skipped := h.request("14")
	h.forge(skipped, aggregate.Confirmed{TxID: genv.TxIDHex(), BlockNumber: 7, Receipt: "SUCCESS", At: h.at()}) // v3

	rep := h.auditJSON(1, "--all")
	wantViolation(t, rep, skipped, 3, "withdrawal.confirmed in state requested: not in the transition table")
	wantViolation(t, rep, selfApproved, 4, "self-approval")
	wantViolation(t, rep, badTxID, 5, "is not sha256(raw_data)")
	wantViolation(t, rep, badProof, 7, "does not prove")
	wantViolation(t, rep, otherPayee, 5, "not the withdrawal's to_address")
	wantViolation(t, rep, ghost, 9, "is not on chain")

	// The human report names each one; exit 1.
	code, out, errOut := h.audit("--all")
	wantCode(t, code, 1, out, errOut)
	wantContains(t, "audit --all", out,
		"VIOLATION withdrawal "+selfApproved+" event 4 (withdrawal.approved) [approval]: approval by alice, who requested the withdrawal (self-approval)",
		"VIOLATION withdrawal "+badTxID+" event 5 (withdrawal.envelope_built) [envelope]: txid",
		"VIOLATION withdrawal "+ghost+" event 9 [chain]: confirmed txid "+genv.TxIDHex()+" is not on chain",
		"FAILED: ")
	wantContains(t, "stderr", errOut, "weir audit: ")

	// One withdrawal: the timeline shows the violation under its event.
	code, out, errOut = h.audit(badProof)
	wantCode(t, code, 1, out, errOut)
	wantContains(t, "audit ID", out, "withdrawal.rebuilt", "^ VIOLATION [evidence]: the evidence does not prove txid "+env1.TxIDHex()+" dead")

	// Without a node the log's own checks still fail, and the chain is a note.
	code, out, errOut = h.s.weir(t, "audit", "--all", "--tron-node", "http://127.0.0.1:1")
	wantCode(t, code, 1, out, errOut)
	wantContains(t, "audit without node", out, "chain: tron node http://127.0.0.1:1 unreachable")
	if strings.Contains(out, "is not on chain") {
		t.Fatalf("chain checks ran without a node:\n%s", out)
	}
}

// TestAuditJudgesPolicyThenAndNow: two withdrawals approved by one
// approver under the default policy, then the policy tightens to two
// approvers for every amount. The one authorised before the change is a
// warning (its approvals no longer satisfy the policy now); the one whose
// envelope was written after the change — by a worker holding the old
// policy — is a violation.
func TestAuditJudgesPolicyThenAndNow(t *testing.T) {
	h := newHistory(t)
	v0 := h.policy()
	before := h.request("500")
	h.approve(before, "bob")
	h.route(before, external(t))
	h.build(before, v0)

	after := h.request("600")
	h.approve(after, "bob")
	h.route(after, external(t))

	strict, err := aggregate.NewPolicy("two for all", []aggregate.Rule{{Name: "two", Threshold: aggregate.Amount{}, Approvers: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.s.intake.SetPolicy(t.Context(), strict, "olivia"); err != nil {
		t.Fatal(err)
	}
	h.build(after, v0) // the decider trusts the policy it is handed: a stale one passes

	waiting := h.request("700")
	h.approve(waiting, "bob", "carol") // under v1: two approvals

	rep := h.auditJSON(1, "--all")
	wantViolation(t, rep, after, 5, "after policy v1")
	if len(rep.Violations) != 1 {
		t.Fatalf("violations:\n%s", findingsText(rep.Violations))
	}
	found := false
	for _, f := range rep.Warnings {
		if f.Withdrawal == before && f.Check == "policy_now" && strings.Contains(f.What, "no longer satisfy the current policy v1") {
			found = true
		}
		if f.Withdrawal == waiting {
			t.Fatalf("a withdrawal approved under the policy in force was warned about: %+v", f)
		}
	}
	if !found {
		t.Fatalf("no policy_now warning for %s:\n%s", before, findingsText(rep.Warnings))
	}
	if rep.Policy.Version != 1 || rep.Policy.ChangedBy != "olivia" {
		t.Fatalf("policy %+v", rep.Policy)
	}

	// The one authorised before the change passes on its own, with the warning.
	code, out, errOut := h.audit(before, "--tron-node", "")
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "audit ID", out, "WARNING withdrawal "+before+" [policy_now]", "OK: every check holds (1 warning(s))")
}

// TestAuditChecksAccountsAgainstWithdrawals: a settlement for a
// withdrawal that did not pay is a violation of the account side.
func TestAuditChecksAccountsAgainstWithdrawals(t *testing.T) {
	h := newHistory(t)
	id := h.request("20")
	if _, err := h.s.intake.Cancel(t.Context(), id, "alice", false); err != nil {
		t.Fatal(err)
	}
	// Forge the account: re-reserve is impossible (already released), so
	// reserve another withdrawal id and settle it — a reservation with no
	// withdrawal behind it.
	orphan := uuid.NewString()
	if _, _, err := h.s.repo.UpdateAccount(t.Context(), "acme", aggregate.Reserve{Account: "acme", WithdrawalID: orphan, Amount: aggregate.MustParseAmount(aggregate.USDT, "1"), At: h.at()}); err != nil {
		t.Fatal(err)
	}
	// And settle the released reservation of the cancelled one: an account
	// event no decider would write.
	_, pos, err := h.s.repo.Account(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.s.store.Append(t.Context(), eventstore.Key{Type: projections.TypeAccount, ID: "acme"}, pos, eventstore.Event{
		Type: aggregate.EventAccountSettled,
		Data: aggregate.AccountSettled{Account: "acme", WithdrawalID: id, Amount: aggregate.MustParseAmount(aggregate.USDT, "20"), At: h.at()},
	}); err != nil {
		t.Fatal(err)
	}
	rep := h.auditJSON(1, "--all", "--tron-node", "")
	found, settled := false, false
	for _, f := range rep.Violations {
		if f.Account == "acme" && f.Check == "reservation" && strings.Contains(f.What, orphan) {
			found = true
		}
		if f.Account == "acme" && f.Check == "account" && strings.Contains(f.What, "event 5 (account.settled)") {
			settled = true
		}
	}
	if !found || !settled || rep.Chain.Checked {
		t.Fatalf("violations:\n%s chain %+v", findingsText(rep.Violations), rep.Chain)
	}
}

// TestAuditRefusesBadArguments: an id that is not a UUID, an unknown
// withdrawal, neither an id nor --all.
func TestAuditRefusesBadArguments(t *testing.T) {
	s := newStack(t, false)
	code, out, errOut := s.weir(t, "audit")
	wantCode(t, code, 2, out, errOut)
	code, out, errOut = s.weir(t, "audit", "x", "--all")
	wantCode(t, code, 2, out, errOut)
	code, out, errOut = s.weir(t, "audit", "not-a-uuid")
	wantCode(t, code, 1, out, errOut)
	wantContains(t, "bad id", errOut, "not a withdrawal id")
	code, out, errOut = s.weir(t, "audit", uuid.NewString())
	wantCode(t, code, 1, out, errOut)
	wantContains(t, "unknown id", errOut, "not found")
	// An empty log passes.
	code, out, errOut = s.weir(t, "audit", "--all", "--tron-node", "")
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "empty log", out, "audited 0 withdrawal(s)", "OK")
}

// TestProgressDrawsOnlyOnATerminal: a buffer (or a pipe) gets nothing; a
// terminal gets a bar that ends with a cleared line.
func TestProgressDrawsOnlyOnATerminal(t *testing.T) {
	var buf strings.Builder
	p := newProgress(&buf)
	p.start("withdrawals", 4)
	p.add(2)
	p.done()
	if buf.Len() != 0 {
		t.Fatalf("drew on a buffer: %q", buf.String())
	}
	p = &progress{w: &buf, on: true}
	p.start("withdrawals", 4)
	p.set(1) // within 100 ms of the last drawing: skipped
	p.last = time.Time{}
	p.set(2)
	p.done()
	if strings.Contains(buf.String(), "1/4") {
		t.Fatalf("redrew within 100 ms: %q", buf.String())
	}
	wantContains(t, "bar", buf.String(), "withdrawals", "[###############...............]  50% 2/4", "100% 4/4", "\r\033[K")
	var nilBar *progress
	nilBar.start("x", 1)
	nilBar.add(1)
	nilBar.done()
}
