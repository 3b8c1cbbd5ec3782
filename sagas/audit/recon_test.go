package audit_test

import (
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas/audit"
	"github.com/weir-payouts/weir/tron"
)

// The chain side of the audit: every USDT transfer out of a hot wallet on
// chain matched to a confirmed withdrawal in the log, and the reverse; and
// the chain the node serves checked before anything is asked of it.

// outsidePayment pays amount USDT units from the hot wallet to payee
// directly on the simulated chain — with the hot wallet's key, but not
// through weir — and returns the txid and its block once solid.
func (h *history) outsidePayment(units int64) (string, int64) {
	h.t.Helper()
	head, ref := h.chain.sim.CurrentHead(), h.chain.sim.CurrentSolidHead()
	h.chain.stamp++
	env, err := tron.BuildTransfer(tron.TransferParams{
		Owner: h.chain.signer.Address(), To: tron.MustParseAddress(payee), Amount: big.NewInt(units),
		RefBlock: ref, Timestamp: head.Timestamp + h.chain.stamp, Expiration: head.Timestamp + 60_000,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	tx, err := tron.SignEnvelope(h.t.Context(), h.chain.signer, env)
	if err != nil {
		h.t.Fatal(err)
	}
	if res, err := h.chain.sim.Broadcast(h.t.Context(), tx); err != nil || !res.IsAccepted() {
		h.t.Fatalf("broadcast: %v %v", res, err)
	}
	h.chain.sim.Advance(25)
	st := h.chain.sim.Status(tx.TxID(), true)
	if st.State != tron.TxIncluded {
		h.t.Fatalf("outside payment not included: %v", st)
	}
	return env.TxIDHex(), st.BlockNumber
}

func (h *history) audit(opts audit.Options) *audit.Report {
	h.t.Helper()
	if opts.Node == nil {
		opts.Node, opts.NodeURL = h.chain.sim, "sim"
	}
	rep, err := audit.All(h.t.Context(), h.store, opts)
	if err != nil {
		h.t.Fatal(err)
	}
	return rep
}

// TestChainSideMatchesEveryHotWalletTransfer: a clean history (payments,
// one rebuilt after a proven expiry, an internal transfer) reconciles both
// ways over the default range: from the first block the log names to the
// solid head, every block read, every transfer matched.
func TestChainSideMatchesEveryHotWalletTransfer(t *testing.T) {
	h := newHistory(t)
	first := h.pay("12.5", "bob")
	h.pay("2500", "bob", "carol")
	h.rebuiltAndPaid("40", "bob")
	moved := h.request("7")
	h.approve(moved, "carol")
	h.route(moved, internal(t, "treasury"))
	h.finish(h.do(moved, func(aggregate.Withdrawal) aggregate.Command {
		return aggregate.SettleInternally{Policy: h.policy(), At: h.at()}
	}))

	c := h.all(true).Chain
	if !c.TwoSided || c.Transfers != 3 || c.Matched != 3 || len(c.UnmatchedTransfers) != 0 || len(c.UnmatchedWithdrawals) != 0 {
		t.Fatalf("chain side %+v", c)
	}
	w := h.withdrawal(first)
	if c.FromBlock != w.Envelope.RefBlockNum || c.ToBlock != h.chain.sim.CurrentSolidHead().Number || c.CheckedBlocks != int(c.ToBlock-c.FromBlock+1) {
		t.Fatalf("range %d..%d (%d read), want %d..%d", c.FromBlock, c.ToBlock, c.CheckedBlocks, w.Envelope.RefBlockNum, h.chain.sim.CurrentSolidHead().Number)
	}
	if len(c.HotWallets) != 1 || c.HotWallets[0] != h.chain.signer.Address().String() || c.Identity != "log blocks" || c.Genesis == "" {
		t.Fatalf("hot wallets %v identity %q genesis %q", c.HotWallets, c.Identity, c.Genesis)
	}

	// A transaction of the hot wallet that failed on chain moved nothing:
	// not a transfer to match.
	h.chain.sim.SetBalance(h.chain.signer.Address(), big.NewInt(1))
	txid, _ := h.outsidePayment(5_000_000)
	id, _ := tron.ParseTxID(txid)
	if st := h.chain.sim.Status(id, true); st.Receipt == tron.ReceiptSuccess {
		t.Fatalf("the transfer beyond the balance succeeded: %v", st)
	}
	c = h.all(true).Chain
	if !c.TwoSided || c.Transfers != 3 || c.FailedTransfers != 1 {
		t.Fatalf("after a failed transfer: %+v", c)
	}
}

// TestChainSideFindsAPaymentMadeOutsideWeir: the hot wallet's key pays on
// chain without weir; the checks by txid cannot see it, the chain side
// names it (txid, block, amount) and the audit fails.
func TestChainSideFindsAPaymentMadeOutsideWeir(t *testing.T) {
	h := newHistory(t)
	h.pay("10", "bob")
	txid, block := h.outsidePayment(3_500_000)
	h.pay("11", "bob") // the default range covers the outside payment

	rep := h.all(false)
	if len(rep.Violations) != 1 {
		t.Fatalf("want exactly the chain-side violation:\n%s", findingsText(rep.Violations))
	}
	v := rep.Violations[0]
	for _, want := range []string{"paid outside weir or log lost events", txid, "block " + itoa64(block), "3.5 USDT"} {
		if v.Check != "chain_side" || !strings.Contains(v.What, want) {
			t.Fatalf("violation %q does not say %q", v.What, want)
		}
	}
	c := rep.Chain
	if len(c.UnmatchedTransfers) != 1 || c.UnmatchedTransfers[0].TxID != txid || c.UnmatchedTransfers[0].Block != block ||
		c.UnmatchedTransfers[0].AmountUnits != "3500000" || c.Transfers != 3 || c.Matched != 2 || !c.TwoSided {
		t.Fatalf("chain side %+v", c)
	}

	// A range that ends before it does not see it; one that starts at it does.
	rep = h.audit(audit.Options{FromBlock: c.FromBlock, ToBlock: block - 1})
	if !rep.OK || rep.Chain.ToBlock != block-1 || rep.Chain.Matched != 1 {
		t.Fatalf("range before the payment: ok %v chain %+v\n%s", rep.OK, rep.Chain, findingsText(rep.Violations))
	}
	rep = h.audit(audit.Options{FromBlock: block, ToBlock: block})
	if rep.OK || rep.Chain.CheckedBlocks != 1 || len(rep.Chain.UnmatchedTransfers) != 1 || rep.Chain.OutsideRange != 2 {
		t.Fatalf("range of the payment's block: ok %v chain %+v", rep.OK, rep.Chain)
	}
	// Past the solid head: scanned to it, with a note.
	rep = h.audit(audit.Options{FromBlock: block, ToBlock: 1 << 40})
	if rep.Chain.ToBlock != h.chain.sim.CurrentSolidHead().Number || !strings.Contains(findingsText(rep.Notes), "past the node's solid head") {
		t.Fatalf("to-block past the head: chain %+v notes:\n%s", rep.Chain, findingsText(rep.Notes))
	}
}

// TestChainSideFindsAConfirmedWithdrawalTheLogLost: two logs, one chain,
// one hot wallet. A withdrawal weir paid and confirmed in one log is, to
// the other, a payment its events do not account for — what a log that
// lost the events of a confirmed withdrawal looks like.
func TestChainSideFindsAConfirmedWithdrawalTheLogLost(t *testing.T) {
	kept := newHistory(t)
	lost := newHistory(t)
	lost.chain = kept.chain
	kept.pay("10", "bob")
	gone := lost.pay("20", "bob")
	lost.all(true) // its range starts at its first payment: all its own
	kept.pay("30", "bob")
	lost.all(false) // now the other log's payment is in its range too
	rep := kept.all(false)
	txid := lost.withdrawal(gone).Confirmation.TxID
	block := lost.withdrawal(gone).Confirmation.BlockNumber
	wantFinding(t, rep, "chain_side", 0, "paid outside weir or log lost events: txid "+txid+" in block "+itoa64(block)+" moved 20 USDT")
	if rep.Chain.Matched != 2 || len(rep.Chain.UnmatchedTransfers) != 1 {
		t.Fatalf("chain side %+v", rep.Chain)
	}
}

// TestChainSideFindsAConfirmationWithoutItsTransfer: a confirmation
// recording a block that does not hold the txid is a violation of the
// chain side too (the reverse direction), named with its withdrawal.
func TestChainSideFindsAConfirmationWithoutItsTransfer(t *testing.T) {
	h := newHistory(t)
	h.pay("10", "bob")
	ghost := h.ready("13")
	_, env := h.build(ghost, h.policy())
	h.send(ghost, h.sign(ghost, env), false) // never reaches the chain
	h.chain.sim.Advance(5)
	block := h.chain.sim.CurrentSolidHead().Number - 2
	h.confirm(ghost, env.TxIDHex(), block)

	rep := h.all(false)
	wantViolation(t, rep, ghost, h.withdrawal(ghost).Version, "confirmed txid "+env.TxIDHex()+" (block "+itoa64(block)+") is not among the successful USDT transfers")
	if m := rep.Chain.UnmatchedWithdrawals; len(m) != 1 || m[0].Withdrawal != ghost || m[0].Block != block {
		t.Fatalf("unmatched withdrawals %+v", m)
	}
}

// TestChainSideNotesAPaymentInFlight: a transfer on chain whose
// withdrawal the log has not confirmed yet is in flight, not a violation.
func TestChainSideNotesAPaymentInFlight(t *testing.T) {
	h := newHistory(t)
	id := h.ready("10")
	_, env := h.build(id, h.policy())
	h.send(id, h.sign(id, env), true)
	h.chain.sim.Advance(25)
	rep := h.all(true)
	if rep.Chain.InFlight != 1 || rep.Chain.Transfers != 1 || rep.Chain.Matched != 0 || !strings.Contains(findingsText(rep.Notes), "in flight") {
		t.Fatalf("chain %+v notes:\n%s", rep.Chain, findingsText(rep.Notes))
	}
}

// TestChainSideWantsAnIntentForEveryTxIDOnChain: weir records a send
// intent before every send, so a transfer on chain whose withdrawal holds
// no intent of either form (signed alone, or never signed) was sent around
// the write-ahead: a violation. One whose intent rides on its signature
// is in flight.
func TestChainSideWantsAnIntentForEveryTxIDOnChain(t *testing.T) {
	h := newHistory(t)
	sent := h.ready("10")
	_, env := h.build(sent, h.policy())
	h.signAndSend(sent, env, true) // the signature carries the intent
	h.chain.sim.Advance(25)
	rep := h.all(true)
	if rep.Chain.InFlight != 1 || rep.Chain.Transfers != 1 || !strings.Contains(findingsText(rep.Notes), "in flight") {
		t.Fatalf("chain %+v notes:\n%s", rep.Chain, findingsText(rep.Notes))
	}

	leaked := h.ready("11")
	_, env = h.build(leaked, h.policy())
	tx := h.sign(leaked, env) // signed alone: no intent
	if res, err := h.chain.sim.Broadcast(t.Context(), tx); err != nil || !res.IsAccepted() {
		t.Fatalf("broadcast: %v %v", res, err)
	}
	h.chain.sim.Advance(25)
	rep = h.all(false)
	wantViolation(t, rep, leaked, h.withdrawal(leaked).Version, "txid "+env.TxIDHex()+" moved 11 USDT")
	wantViolation(t, rep, leaked, h.withdrawal(leaked).Version, "the log holds no intent to send it (signed")
	if rep.Chain.InFlight != 1 {
		t.Fatalf("in flight %d: only the one with its intent is", rep.Chain.InFlight)
	}
	for _, f := range rep.Violations {
		if f.Withdrawal == sent {
			t.Fatalf("the withdrawal with its intent blamed: %s", f.What)
		}
	}
}

// TestAuditRefusesAnotherChain: a node whose genesis is not the expected
// one, or whose blocks are not those the log's envelopes were built on,
// is a violation, and nothing else is asked of it.
func TestAuditRefusesAnotherChain(t *testing.T) {
	h := newHistory(t)
	h.pay("10", "bob")
	g, err := h.chain.sim.Genesis(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	rep := h.audit(audit.Options{ExpectGenesis: g.IDHex()})
	if !rep.OK || rep.Chain.Identity != "genesis+log blocks" || !rep.Chain.TwoSided {
		t.Fatalf("the right chain: ok %v chain %+v\n%s", rep.OK, rep.Chain, findingsText(rep.Violations))
	}

	rep = h.audit(audit.Options{ExpectGenesis: tron.MainnetGenesisID})
	if rep.OK || len(rep.Violations) != 1 || rep.Violations[0].Check != "chain_identity" ||
		!strings.Contains(rep.Violations[0].What, "not the expected "+tron.MainnetGenesisID) || !strings.Contains(rep.Violations[0].What, g.IDHex()) {
		t.Fatalf("wrong genesis:\n%s", findingsText(rep.Violations))
	}
	if c := rep.Chain; c.Checked || c.TxIDs != 0 || c.CheckedBlocks != 0 || c.Identity != "mismatch" {
		t.Fatalf("the wrong chain was asked: %+v", c)
	}

	// Another chain of the same age, no genesis expected: its blocks at
	// the heights the log's envelopes name have other ids.
	other := tron.NewSimNode(tron.SimConfig{Start: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), Seed: 7}) // newChain's start
	other.Advance(int(h.chain.sim.CurrentHead().Number))
	rep = h.audit(audit.Options{Node: other, NodeURL: "other"})
	if rep.OK || len(rep.Violations) != 1 || !strings.Contains(rep.Violations[0].What, "serves another chain than the one weir paid on") {
		t.Fatalf("another chain:\n%s", findingsText(rep.Violations))
	}

	if _, err := audit.ParseGenesis("00ff"); err == nil {
		t.Fatal("a short genesis id was taken")
	}
	if id, err := audit.ParseGenesis(" MAINNET "); err != nil || id != tron.MainnetGenesisID {
		t.Fatalf("mainnet: %q %v", id, err)
	}
}

func itoa64(n int64) string { return big.NewInt(n).String() }

// payDuring is a Progress that pays one withdrawal (log and chain) when
// the audit starts replaying withdrawals: after it read the log, before it
// asks the chain — what a running weir does while it is audited.
type payDuring struct {
	h    *history
	paid string
}

func (p *payDuring) Start(label string, _ int) {
	if label == "withdrawals" && p.paid == "" {
		p.paid = p.h.pay("9", "bob")
	}
}
func (*payDuring) Set(int) {}
func (*payDuring) Add(int) {}
func (*payDuring) Done()   {}

// TestChainSideKnowsAPaymentWrittenAfterTheLogWasRead: the chain is read
// after the log; a payment written ahead in between is in flight, never
// "paid outside weir".
func TestChainSideKnowsAPaymentWrittenAfterTheLogWasRead(t *testing.T) {
	h := newHistory(t)
	h.pay("10", "bob")
	during := &payDuring{h: h}
	rep := h.audit(audit.Options{Progress: during})
	if during.paid == "" {
		t.Fatal("the audit never started replaying withdrawals")
	}
	if !rep.OK || rep.Withdrawals != 1 || rep.Chain.Transfers != 2 || rep.Chain.Matched != 1 || rep.Chain.InFlight != 1 ||
		!strings.Contains(findingsText(rep.Notes), "was written ahead after the audit read the log") {
		t.Fatalf("ok %v withdrawals %d chain %+v\n%s\nnotes:\n%s", rep.OK, rep.Withdrawals, rep.Chain, findingsText(rep.Violations), findingsText(rep.Notes))
	}
	if rep = h.all(true); rep.Chain.Matched != 2 || rep.Chain.InFlight != 0 {
		t.Fatalf("the next audit: %+v", rep.Chain)
	}
}

// sendDuring is a Progress that signs and sends (one event: the signature
// carries the intent) a withdrawal built before the audit read the log,
// and lets the chain include it, once the audit starts replaying.
type sendDuring struct {
	h    *history
	id   string
	env  tron.Envelope
	sent bool
}

func (p *sendDuring) Start(label string, _ int) {
	if label == "withdrawals" && !p.sent {
		p.sent = true
		p.h.signAndSend(p.id, p.env, true)
		p.h.chain.sim.Advance(25)
	}
}
func (*sendDuring) Set(int) {}
func (*sendDuring) Add(int) {}
func (*sendDuring) Done()   {}

// TestChainSideKnowsAnIntentWrittenAfterTheLogWasRead: a withdrawal only
// built when the log was read, signed and sent (its intent on the
// signature) before the chain was: in flight, not sent around weir.
func TestChainSideKnowsAnIntentWrittenAfterTheLogWasRead(t *testing.T) {
	h := newHistory(t)
	h.pay("10", "bob")
	id := h.ready("12")
	_, env := h.build(id, h.policy())
	during := &sendDuring{h: h, id: id, env: env}
	rep := h.audit(audit.Options{Progress: during})
	if !during.sent {
		t.Fatal("the audit never started replaying withdrawals")
	}
	if !rep.OK || rep.Chain.Transfers != 2 || rep.Chain.Matched != 1 || rep.Chain.InFlight != 1 ||
		!strings.Contains(findingsText(rep.Notes), "its send intent was appended after the audit read the log") {
		t.Fatalf("ok %v chain %+v\n%s\nnotes:\n%s", rep.OK, rep.Chain, findingsText(rep.Violations), findingsText(rep.Notes))
	}
}
