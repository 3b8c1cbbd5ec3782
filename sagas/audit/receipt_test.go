package audit_test

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/tron"
)

// receiptOf is the receipt the simulated chain gave tx, once solid, as the
// saga records it.
func (h *history) receiptOf(tx tron.SignedTx) aggregate.FailureReceipt {
	h.t.Helper()
	h.chain.sim.Advance(25) // include and solidify
	in, ok := h.chain.sim.TxInfo(tx.TxID())
	if !ok {
		h.t.Fatal("not on chain")
	}
	return aggregate.FailureReceipt{BlockNumber: in.BlockNumber, BlockTime: in.BlockTime, Result: string(in.Receipt),
		Fee: &aggregate.ChainFee{Sun: in.FeeSun, EnergyUsed: in.EnergyUsed}}
}

// rebuildOn retires the current envelope on rc and signs, sends and
// confirms the next one.
func (h *history) rebuildOn(id string, retired tron.Envelope, rc aggregate.FailureReceipt, decided bool) {
	h.t.Helper()
	newEnv, env2 := h.chain.envelope(h.t, h.withdrawal(id))
	rb := aggregate.Rebuild{RetiredTxID: retired.TxIDHex(), Receipt: &rc, Envelope: newEnv, At: h.at()}
	if decided {
		h.do(id, func(aggregate.Withdrawal) aggregate.Command { return rb })
	} else {
		h.forge(id, aggregate.Rebuilt{Attempt: 2, RetiredTxID: rb.RetiredTxID, Receipt: rb.Receipt, Envelope: newEnv, At: rb.At})
	}
	h.send(id, h.sign(id, env2), true)
	h.confirm(id, env2.TxIDHex(), 0)
}

// Issue 14.3. A rebuild after an OUT_OF_ENERGY receipt holds on the chain:
// the retired txid is on chain, failed, with the recorded block, result
// and fee; the audit finds nothing wrong and shows the receipt.
func TestAuditAcceptsARebuildOnAFailedReceipt(t *testing.T) {
	h := newHistory(t)
	id := h.ready("250")
	_, env1 := h.build(id, h.policy())
	tx := h.sign(id, env1)
	h.chain.sim.Script(tron.ChannelBroadcast, tron.FaultOutOfEnergy)
	h.send(id, tx, true)
	rc := h.receiptOf(tx)
	if rc.Result != string(tron.ReceiptOutOfEnergy) || rc.Fee.Sun <= 0 {
		t.Fatalf("receipt %+v", rc)
	}
	h.rebuildOn(id, env1, rc, true)
	rep := h.one(id, true)
	var shown bool
	for _, e := range rep.Withdrawal.Timeline {
		if e.Type == aggregate.EventRebuilt {
			shown = strings.Contains(e.Details.String(), "OUT_OF_ENERGY in block") && strings.Contains(e.Details.String(), "TRX for")
		}
	}
	if !shown {
		t.Fatalf("the rebuild's receipt is not in the timeline: %+v", rep.Withdrawal.Timeline)
	}
}

// A rebuild after a SUCCESS receipt — the first transfer paid, and a
// forged rebuild says it ran out of energy — is a violation twice over:
// the receipt's block says SUCCESS, and the retired txid paid.
func TestAuditFlagsARebuildAfterASuccessReceipt(t *testing.T) {
	h := newHistory(t)
	id := h.ready("250")
	_, env1 := h.build(id, h.policy())
	tx := h.sign(id, env1)
	h.send(id, tx, true) // v6..v8, and it pays
	rc := h.receiptOf(tx)
	if rc.Result != string(tron.ReceiptSuccess) {
		t.Fatalf("receipt %+v", rc)
	}
	rc.Result = string(tron.ReceiptOutOfEnergy)
	h.rebuildOn(id, env1, rc, false) // v9
	rep := h.one(id, false)
	wantFinding(t, rep, "evidence", 0, "has "+env1.TxIDHex()+" with SUCCESS")
	wantFinding(t, rep, "chain", 0, "paid on chain")
}

// A failed receipt recorded with a fee the chain did not burn is refuted.
func TestAuditRefutesAReceiptWithAnotherFee(t *testing.T) {
	h := newHistory(t)
	id := h.ready("250")
	_, env1 := h.build(id, h.policy())
	tx := h.sign(id, env1)
	h.chain.sim.Script(tron.ChannelBroadcast, tron.FaultRevert)
	h.send(id, tx, true)
	rc := h.receiptOf(tx)
	rc.Fee.Sun /= 2
	h.rebuildOn(id, env1, rc, false)
	wantFinding(t, h.one(id, false), "evidence", 0, "burning")
}

// The re-check right before signing holds for a rebuilt envelope as for a
// first one: a signature recorded (forged) after the policy tightened,
// with approvals short of it, is a violation at the signed event.
func TestAuditFlagsASignatureBelowThePolicyInForce(t *testing.T) {
	h := newHistory(t)
	id := h.ready("250")
	_, env1 := h.build(id, h.policy())
	strict, err := aggregate.NewPolicy("two for all", []aggregate.Rule{{Name: "two", Threshold: aggregate.Amount{}, Approvers: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.intake.SetPolicy(t.Context(), strict, "olivia"); err != nil {
		t.Fatal(err)
	}
	tx, err := tron.SignEnvelope(t.Context(), h.chain.signer, env1)
	if err != nil {
		t.Fatal(err)
	}
	h.forge(id, aggregate.Signed{TxID: env1.TxIDHex(), Signature: hex.EncodeToString(tx.Signature), PolicyVersion: 1, At: h.at()})
	wantFinding(t, h.one(id, false), "policy_then", 0, "the re-check right before signing refuses that")
}
