package audit_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/sagas/audit"
	"github.com/weir-payouts/weir/tron"
)

// The mutation suite: well-formed but illegal events, appended through the
// store's own append path (correct headers, so JetStream stores each; only
// a wrong back-pointer or version needs a writer bypassing the store), and
// the audit must name each one where it is.
//
// Authority comes from the configuration in force in the log (issue 17
// item 1; the histories publish one first): an approval by someone who is
// no principal, a credit, cancel or decline by someone without the role,
// an envelope whose owner is not the hot wallet, a signature by another
// key and a reservation recording a daily limit other than the one in
// force are named here; a policy set by a non-operator in
// TestAuditNamesPolicyMutations.

// mutated is where the audit must name a mutation: a violation of check
// on the withdrawal or account given, at the event version or stream
// sequence given (0: anywhere), whose text contains what.
type mutated struct {
	check      string
	withdrawal string
	account    string
	version    uint64
	seq        uint64
	what       string
	// raw: written bypassing the store, so with the event key the tag
	// check quarantines it first: an integrity violation at its sequence.
	raw bool
}

// sealed is where the audit names the mutation in a log written with the
// event key.
func (m mutated) sealed() mutated {
	if !m.raw {
		return m
	}
	return mutated{check: "integrity", withdrawal: m.withdrawal, account: m.account, seq: m.seq, what: "quarantined"}
}

func (m mutated) matches(f audit.Finding) bool {
	return f.Check == m.check && f.Withdrawal == m.withdrawal && (m.account == "" || f.Account == m.account) &&
		(m.version == 0 || f.Version == m.version) && (m.seq == 0 || f.Sequence == m.seq) && strings.Contains(f.What, m.what)
}

func randomTxID() string {
	b := sha256.Sum256([]byte(uuid.NewString()))
	return hex.EncodeToString(b[:])
}

// mutations are the illegal events, each on its own withdrawal or account.
var mutations = []struct {
	name  string
	apply func(t *testing.T, h *history) mutated
}{
	{"self-approval", func(t *testing.T, h *history) mutated {
		id := h.request("2500") // four-eyes: 2 approvals
		h.approve(id, "bob")    // v3
		h.forge(id, aggregate.Approved{Approval: aggregate.Approval{By: "alice", At: h.at(), Rule: "four-eyes", PolicyVersion: h.policy().Version}, RequiredApprovals: 2, At: h.now})
		return mutated{check: "approval", withdrawal: id, version: 4, what: "(self-approval)"}
	}},
	{"approval by someone who is no principal", func(t *testing.T, h *history) mutated {
		id := h.request("10") // single: one approval
		h.forge(id, aggregate.Approved{Approval: aggregate.Approval{By: "mallory", At: h.at(), Rule: "single", PolicyVersion: h.policy().Version}, RequiredApprovals: 1, At: h.now})
		return mutated{check: "authority", withdrawal: id, version: 3, what: `approval by "mallory", who is no principal`}
	}},
	{"approval by a principal without the approver role", func(t *testing.T, h *history) mutated {
		id := h.request("10")
		h.forge(id, aggregate.Approved{Approval: aggregate.Approval{By: "olivia", At: h.at(), Rule: "single", PolicyVersion: h.policy().Version}, RequiredApprovals: 1, At: h.now})
		return mutated{check: "authority", withdrawal: id, version: 3, what: "approval by olivia, whose roles"}
	}},
	{"cancel of another's withdrawal by a non-operator", func(t *testing.T, h *history) mutated {
		id := h.request("10")
		h.forge(id, aggregate.Rejected{Reason: aggregate.ReasonCancelled, By: "bob", At: h.at()})
		return mutated{check: "authority", withdrawal: id, version: 3, what: "cancel of another's withdrawal by bob"}
	}},
	{"decline by a non-approver", func(t *testing.T, h *history) mutated {
		id := h.request("10")
		h.forge(id, aggregate.Rejected{Reason: aggregate.ReasonDeclined, By: "olivia", Detail: "no", At: h.at()})
		return mutated{check: "authority", withdrawal: id, version: 3, what: "decline by olivia"}
	}},
	{"credit by a non-operator", func(t *testing.T, h *history) mutated {
		h.forgeAccount("m-credit-bob", aggregate.AccountCredited{Account: "m-credit-bob", CreditID: "c1", Amount: aggregate.MustParseAmount(aggregate.USDT, "99"), By: "bob", At: h.at()})
		return mutated{check: "authority", account: "m-credit-bob", version: 1, what: "credit c1 by bob"}
	}},
	{"envelope owned by another address, signed by it", func(t *testing.T, h *history) mutated {
		id := h.ready("10")
		hot := h.chain.signer
		h.chain.signer = otherSigner(t)
		env, tenv := h.chain.envelope(t, h.withdrawal(id))
		tx, err := tron.SignEnvelope(t.Context(), h.chain.signer, tenv)
		h.chain.signer = hot
		if err != nil {
			t.Fatal(err)
		}
		h.forge(id, aggregate.EnvelopeBuilt{Attempt: 1, Envelope: env, PolicyVersion: h.policy().Version, At: h.at()}, // v5
			aggregate.Signed{TxID: env.TxID, Signature: hex.EncodeToString(tx.Signature), At: h.at()}) // v6
		return mutated{check: "envelope", withdrawal: id, version: 5, what: "not a hot wallet in configuration v1"}
	}},
	{"signature by another key on a hot-wallet envelope", func(t *testing.T, h *history) mutated {
		id := h.ready("10")
		_, env := h.build(id, h.policy()) // v5
		sig, err := otherSigner(t).Sign(t.Context(), env.TxID)
		if err != nil {
			t.Fatal(err)
		}
		h.forge(id, aggregate.Signed{TxID: env.TxIDHex(), Signature: hex.EncodeToString(sig), At: h.at()}) // v6
		return mutated{check: "signature", withdrawal: id, version: 6, what: "signed by " + otherSigner(t).Address().String() + ", not a hot wallet"}
	}},
	{"reservation under a daily limit other than the one in force", func(t *testing.T, h *history) mutated {
		h.credit("m-limit", "seed", "100")
		at := h.at()
		h.forgeAccount("m-limit", aggregate.AccountReserved{Account: "m-limit", WithdrawalID: uuid.NewString(), Amount: aggregate.MustParseAmount(aggregate.USDT, "50"),
			Day: at.Format("2006-01-02"), DailyLimit: aggregate.Amount{}, At: at})
		return mutated{check: "account", account: "m-limit", version: 2, what: `reserved under daily_limit "0", but configuration v1`}
	}},
	{"duplicate approver", func(t *testing.T, h *history) mutated {
		id := h.request("2500")
		h.approve(id, "bob")
		h.forge(id, aggregate.Approved{Approval: aggregate.Approval{By: "bob", At: h.at(), Rule: "four-eyes", PolicyVersion: h.policy().Version}, RequiredApprovals: 2, At: h.now})
		return mutated{check: "approval", withdrawal: id, version: 4, what: "a second approval by bob"}
	}},
	{"envelope pays another address", func(t *testing.T, h *history) mutated {
		id := h.ready("12")
		w := h.withdrawal(id)
		w.ToAddress = tron.USDTContract.String()
		env, _ := h.chain.envelope(t, w)
		h.forge(id, aggregate.EnvelopeBuilt{Attempt: 1, Envelope: env, PolicyVersion: h.policy().Version, At: h.at()})
		return mutated{check: "envelope", withdrawal: id, version: 5, what: "not the withdrawal's to_address"}
	}},
	{"envelope pays another amount", func(t *testing.T, h *history) mutated {
		id := h.ready("12")
		w := h.withdrawal(id)
		w.Amount = aggregate.MustParseAmount(aggregate.USDT, "1200")
		env, _ := h.chain.envelope(t, w)
		h.forge(id, aggregate.EnvelopeBuilt{Attempt: 1, Envelope: env, PolicyVersion: h.policy().Version, At: h.at()})
		return mutated{check: "envelope", withdrawal: id, version: 5, what: "not the withdrawal's amount_units"}
	}},
	{"txid is not sha256(raw_data)", func(t *testing.T, h *history) mutated {
		id := h.ready("10")
		env, _ := h.chain.envelope(t, h.withdrawal(id))
		env.TxID = randomTxID()
		h.forge(id, aggregate.EnvelopeBuilt{Attempt: 1, Envelope: env, PolicyVersion: h.policy().Version, At: h.at()})
		return mutated{check: "envelope", withdrawal: id, version: 5, what: "is not sha256(raw_data)"}
	}},
	{"send of a txid never written ahead", func(t *testing.T, h *history) mutated {
		id := h.ready("10")
		_, env := h.build(id, h.policy()) // v5
		h.sign(id, env)                   // v6
		h.forge(id, aggregate.Broadcasting{TxID: randomTxID(), Attempt: 1, Send: 1, At: h.at()})
		return mutated{check: "envelope", withdrawal: id, version: 7, what: "sends txid"}
	}},
	{"paid on chain with no intent: signed alone, then confirmed", func(t *testing.T, h *history) mutated {
		id := h.ready("10")
		_, env := h.build(id, h.policy()) // v5
		tx := h.sign(id, env)             // v6: no send in it
		if res, err := h.chain.sim.Broadcast(t.Context(), tx); err != nil || !res.IsAccepted() {
			t.Fatalf("broadcast: %v %v", res, err)
		}
		h.chain.sim.Advance(25)
		st := h.chain.sim.Status(tx.TxID(), true)
		h.forge(id, aggregate.Confirmed{TxID: env.TxIDHex(), BlockNumber: st.BlockNumber, BlockTime: st.BlockTime, Receipt: aggregate.ReceiptSuccess, At: h.at()}) // v7
		return mutated{check: "transition", withdrawal: id, version: 7, what: "withdrawal.confirmed in state signed"}
	}},
	{"a signature claiming a send other than the first", func(t *testing.T, h *history) mutated {
		id := h.ready("10")
		_, env := h.build(id, h.policy()) // v5
		tx, err := tron.SignEnvelope(t.Context(), h.chain.signer, env)
		if err != nil {
			t.Fatal(err)
		}
		h.forge(id, aggregate.Signed{TxID: env.TxIDHex(), Signature: hex.EncodeToString(tx.Signature), PolicyVersion: h.policy().Version, Send: 2, At: h.at()}) // v6
		return mutated{check: "decider", withdrawal: id, version: 6, what: "send 2 after send 0"}
	}},
	{"a second first intent after the signature's", func(t *testing.T, h *history) mutated {
		id := h.ready("10")
		_, env := h.build(id, h.policy()) // v5
		tx, err := tron.SignEnvelope(t.Context(), h.chain.signer, env)
		if err != nil {
			t.Fatal(err)
		}
		h.do(id, func(aggregate.Withdrawal) aggregate.Command { // v6
			return aggregate.RecordSignature{TxID: env.TxIDHex(), Signature: hex.EncodeToString(tx.Signature), Policy: h.policy(), Send: 1, At: h.at()}
		})
		h.forge(id, aggregate.Broadcasting{TxID: env.TxIDHex(), Attempt: 1, Send: 1, At: h.at()}) // v7
		return mutated{check: "decider", withdrawal: id, version: 7, what: "send 1 after send 1"}
	}},
	{"confirm of a txid never written ahead", func(t *testing.T, h *history) mutated {
		id := h.ready("10")
		_, env := h.build(id, h.policy())
		tx := h.sign(id, env)
		h.send(id, tx, false) // v7, v8
		h.forge(id, aggregate.Confirmed{TxID: randomTxID(), BlockNumber: 40, BlockTime: h.chain.sim.CurrentHead().Timestamp, Receipt: aggregate.ReceiptSuccess, At: h.at()})
		return mutated{check: "envelope", withdrawal: id, version: 9, what: "confirms txid"}
	}},
	{"rebuild whose proof was made before expiry", func(t *testing.T, h *history) mutated {
		id := h.ready("11")
		w, env1 := h.build(id, h.policy())
		h.sign(id, env1)
		solid := h.chain.sim.CurrentSolidHead()
		env2, _ := h.chain.envelope(t, w)
		h.forge(id, aggregate.Rebuilt{Attempt: 2, RetiredTxID: env1.TxIDHex(), Evidence: aggregate.Evidence{
			SolidBlockNumber: solid.Number, SolidBlockTime: solid.Timestamp, Expiration: w.Envelope.Expiration,
			Margin: 30_000, Lookup: aggregate.LookupNotFound,
		}, Envelope: env2, At: h.at()})
		return mutated{check: "evidence", withdrawal: id, version: 7, what: "does not prove"}
	}},
	{"confirmed txid not on chain", func(t *testing.T, h *history) mutated {
		id := h.ready("13")
		_, env := h.build(id, h.policy())
		tx := h.sign(id, env)
		h.send(id, tx, false)
		h.confirm(id, env.TxIDHex(), 4242) // decided by the deciders, but made up
		return mutated{check: "chain", withdrawal: id, version: 9, what: "is not on chain"}
	}},
	{"overdraft", func(t *testing.T, h *history) mutated {
		h.credit("m-over", "seed", "10")
		at := h.at()
		h.forgeAccount("m-over", aggregate.AccountReserved{Account: "m-over", WithdrawalID: uuid.NewString(), Amount: aggregate.MustParseAmount(aggregate.USDT, "50"), Day: at.Format("2006-01-02"), At: at})
		return mutated{check: "account", account: "m-over", version: 2, what: "insufficient_funds"}
	}},
	{"settle without reserve", func(t *testing.T, h *history) mutated {
		h.credit("m-settle", "seed", "10")
		h.forgeAccount("m-settle", aggregate.AccountSettled{Account: "m-settle", WithdrawalID: uuid.NewString(), Amount: aggregate.MustParseAmount(aggregate.USDT, "5"), At: h.at()})
		return mutated{check: "account", account: "m-settle", version: 2, what: "no reservation"}
	}},
	{"release after settle", func(t *testing.T, h *history) mutated {
		h.credit("m-release", "seed", "10")
		wid := uuid.NewString()
		five := aggregate.MustParseAmount(aggregate.USDT, "5")
		h.account("m-release", aggregate.Reserve{Account: "m-release", WithdrawalID: wid, Amount: five, At: h.at()})
		h.account("m-release", aggregate.Settle{Account: "m-release", WithdrawalID: wid, At: h.at()})
		h.forgeAccount("m-release", aggregate.AccountReleased{Account: "m-release", WithdrawalID: wid, Amount: five, Reason: "cancelled", At: h.at()})
		return mutated{check: "account", account: "m-release", version: 4, what: "is settled"}
	}},
	{"credit id reused", func(t *testing.T, h *history) mutated {
		h.credit("m-credit", "c1", "10")
		h.forgeAccount("m-credit", aggregate.AccountCredited{Account: "m-credit", CreditID: "c1", Amount: aggregate.MustParseAmount(aggregate.USDT, "99"), At: h.at()})
		return mutated{check: "account", account: "m-credit", version: 2, what: "already recorded"}
	}},
	{"daily limit exceeded", func(t *testing.T, h *history) mutated {
		h.credit("m-daily", "seed", "100")
		at := h.at()
		h.forgeAccount("m-daily", aggregate.AccountReserved{Account: "m-daily", WithdrawalID: uuid.NewString(), Amount: aggregate.MustParseAmount(aggregate.USDT, "50"),
			Day: at.Format("2006-01-02"), DailyLimit: aggregate.MustParseAmount(aggregate.USDT, "20"), At: at})
		return mutated{check: "account", account: "m-daily", version: 2, what: "daily limit"}
	}},
	{"transition out of a terminal state", func(t *testing.T, h *history) mutated {
		id := h.request("10")
		if _, err := h.intake.Cancel(t.Context(), id, "alice", false); err != nil { // v3 rejected
			t.Fatal(err)
		}
		h.forge(id, aggregate.Approved{Approval: aggregate.Approval{By: "bob", At: h.at(), Rule: "single", PolicyVersion: h.policy().Version}, RequiredApprovals: 1, At: h.now})
		return mutated{check: "transition", withdrawal: id, version: 4, what: "in state rejected: not in the transition table"}
	}},
	{"transition skipping approval", func(t *testing.T, h *history) mutated {
		id := h.request("14")
		h.forge(id, aggregate.Confirmed{TxID: randomTxID(), BlockNumber: 7, Receipt: aggregate.ReceiptSuccess, At: h.at()})
		return mutated{check: "transition", withdrawal: id, version: 3, what: "withdrawal.confirmed in state requested"}
	}},
	{"confirm without reservation", func(t *testing.T, h *history) mutated {
		// A withdrawal on an account that never reserved it: its stream
		// claims funds_reserved, the account knows nothing.
		id := uuid.NewString()
		amount := aggregate.MustParseAmount(aggregate.USDT, "9")
		h.forge(id, aggregate.Requested{ID: id, Account: "m-noreserve", ToAddress: payee, Amount: amount, Asset: aggregate.USDT.Code,
			RequestedBy: "alice", RequiredApprovals: 1, Rule: "single", PolicyName: h.policy().Name, PolicyVersion: h.policy().Version, At: h.at()},
			aggregate.FundsReserved{Account: "m-noreserve", Amount: amount, At: h.at()})
		h.approve(id, "bob")
		h.route(id, external(t))
		_, env := h.build(id, h.policy())
		tx := h.sign(id, env)
		h.send(id, tx, true)
		h.chain.sim.Advance(25)
		st := h.chain.sim.Status(tx.TxID(), true)
		h.do(id, func(aggregate.Withdrawal) aggregate.Command {
			return aggregate.Confirm{TxID: env.TxIDHex(), BlockNumber: st.BlockNumber, BlockTime: st.BlockTime, Receipt: aggregate.ReceiptSuccess, At: h.at()}
		})
		return mutated{check: "reservation", withdrawal: id, what: "confirmed but nothing was ever reserved on account m-noreserve"}
	}},
	{"envelope on an internal route", func(t *testing.T, h *history) mutated {
		id := h.request("10")
		h.approve(id, "bob")
		h.route(id, internal(t, "treasury"))
		env, _ := h.chain.envelope(t, h.withdrawal(id))
		h.forge(id, aggregate.EnvelopeBuilt{Attempt: 1, Envelope: env, PolicyVersion: h.policy().Version, At: h.at()})
		return mutated{check: "route", withdrawal: id, version: 5, what: "an envelope for a withdrawal routed"}
	}},
	{"unknown JSON field", func(t *testing.T, h *history) mutated {
		id := h.request("10")
		_, pos, err := h.repo.Withdrawal(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		payload := json.RawMessage(`{"reason":"cancelled","by":"alice","at":"` + h.at().Format("2006-01-02T15:04:05.999999999Z") + `","mallory":"was here"}`)
		if _, err := h.store.Append(t.Context(), eventstore.Key{Type: eventlog.TypeWithdrawal, ID: id}, pos,
			eventstore.Event{Type: aggregate.EventRejected, Data: payload}); err != nil {
			t.Fatal(err)
		}
		return mutated{check: "decode", withdrawal: id, version: 3, what: "payload does not decode"}
	}},
	{"version gap", func(t *testing.T, h *history) mutated {
		id := h.request("10")
		k := eventstore.Key{Type: eventlog.TypeWithdrawal, ID: id}
		seq := h.forgeRaw(k, aggregate.Rejected{Reason: aggregate.ReasonCancelled, By: "alice", At: h.at()}, 4, h.last(k))
		return mutated{check: "stream", withdrawal: id, seq: seq, what: "carries version 4: the stream has a gap or a duplicate", raw: true}
	}},
	{"version duplicate", func(t *testing.T, h *history) mutated {
		id := h.request("10")
		k := eventstore.Key{Type: eventlog.TypeWithdrawal, ID: id}
		seq := h.forgeRaw(k, aggregate.Rejected{Reason: aggregate.ReasonCancelled, By: "alice", At: h.at()}, 2, h.last(k))
		return mutated{check: "stream", withdrawal: id, seq: seq, what: "carries version 2: the stream has a gap or a duplicate", raw: true}
	}},
	{"broken back-pointer", func(t *testing.T, h *history) mutated {
		id := h.request("10")
		k := eventstore.Key{Type: eventlog.TypeWithdrawal, ID: id}
		recs, _, err := h.store.Load(t.Context(), k)
		if err != nil {
			t.Fatal(err)
		}
		seq := h.forgeRaw(k, aggregate.Rejected{Reason: aggregate.ReasonCancelled, By: "alice", At: h.at()}, 3, recs[0].Sequence)
		return mutated{check: "stream", withdrawal: id, seq: seq, what: "back-pointer (Weir-Prev-Seq) names stream sequence", raw: true}
	}},
	{"unknown event type", func(t *testing.T, h *history) mutated {
		id := h.request("10")
		k := eventstore.Key{Type: eventlog.TypeWithdrawal, ID: id}
		seq := h.forgeMsg(k, "withdrawal.paid_to_mallory", []byte(`{"to":"mallory"}`), 3, h.last(k), nil)
		return mutated{check: "integrity", withdrawal: id, seq: seq, what: "quarantined", raw: true}
	}},
	{"no back-pointer", func(t *testing.T, h *history) mutated {
		id := h.request("10")
		k := eventstore.Key{Type: eventlog.TypeWithdrawal, ID: id}
		data, _ := json.Marshal(aggregate.Rejected{Reason: aggregate.ReasonCancelled, By: "alice", At: h.at()})
		seq := h.forgeMsg(k, aggregate.EventRejected, data, 3, h.last(k), func(m *nats.Msg) { m.Header.Del(eventstore.HeaderPrevSeq) })
		return mutated{check: "integrity", withdrawal: id, seq: seq, what: "quarantined", raw: true}
	}},
	{"payload that is not JSON", func(t *testing.T, h *history) mutated {
		id := h.request("10")
		k := eventstore.Key{Type: eventlog.TypeWithdrawal, ID: id}
		seq := h.forgeMsg(k, aggregate.EventRejected, []byte("\x00not json"), 3, h.last(k), nil)
		return mutated{check: "decode", withdrawal: id, seq: seq, what: "payload does not decode", raw: true}
	}},
	// What only the chain can refute (issue 17 item 2).
	{"rebuild proof citing a solid block the chain never had", func(t *testing.T, h *history) mutated {
		id := h.ready("15")
		w, env1 := h.build(id, h.policy())
		h.sign(id, env1)
		ref, err := h.chain.sim.SolidBlockByNum(t.Context(), w.Envelope.RefBlockNum)
		if err != nil {
			t.Fatal(err)
		}
		to := ref.Header.Number + aggregate.MaxScanBlocks - 1 // arithmetic right; no such solid block
		toID := make([]byte, 32)
		binary.BigEndian.PutUint64(toID, uint64(to))
		toTime := w.Envelope.Expiration + 30_000
		env2, _ := h.chain.envelope(t, w)
		env2.Expiration = toTime + 60_000 // not already expired at the proof's time
		h.forge(id, aggregate.Rebuilt{Attempt: 2, RetiredTxID: env1.TxIDHex(), Evidence: aggregate.Evidence{
			SolidBlockNumber: to, SolidBlockTime: toTime, Expiration: w.Envelope.Expiration, Margin: 30_000, Lookup: aggregate.LookupNotFound,
			Scan: aggregate.BlockScan{From: ref.Header.Number, FromID: ref.Header.IDHex(), FromTime: ref.Header.Timestamp,
				To: to, ToID: hex.EncodeToString(toID), ToTime: toTime, IDsSHA256: randomTxID()},
		}, Envelope: env2, At: h.at()}) // v7
		return mutated{check: "evidence", withdrawal: id, version: 7, what: "a block the chain never had"}
	}},
	{"rebuild proof whose blocks are not the chain's", func(t *testing.T, h *history) mutated {
		id := h.ready("16")
		w, env1 := h.build(id, h.policy())
		h.send(id, h.sign(id, env1), false) // v6..v8
		proof := h.proveDead(w.Envelope)
		proof.Scan.IDsSHA256 = randomTxID() // another range of blocks
		newEnv, _ := h.chain.envelope(t, h.withdrawal(id))
		h.forge(id, aggregate.Rebuilt{Attempt: 2, RetiredTxID: env1.TxIDHex(), Evidence: proof, Envelope: newEnv, At: h.at()}) // v9
		return mutated{check: "evidence", withdrawal: id, version: 9, what: "hash to"}
	}},
	{"failure proven by a receipt the chain does not have", func(t *testing.T, h *history) mutated {
		id := h.ready("17")
		_, env := h.build(id, h.policy())
		h.sign(id, env) // v6: signed, never sent
		solid := h.chain.sim.CurrentSolidHead()
		h.forge(id, aggregate.Failed{Reason: aggregate.ReasonReverted, TxID: env.TxIDHex(),
			Receipt: &aggregate.FailureReceipt{BlockNumber: solid.Number, BlockTime: solid.Timestamp, Result: "REVERT"}, At: h.at()}) // v7
		return mutated{check: "evidence", withdrawal: id, version: 7, what: "is not in block"}
	}},
	{"confirmation in a block that does not hold the txid", func(t *testing.T, h *history) mutated {
		id := h.ready("18")
		_, env := h.build(id, h.policy())
		h.send(id, h.sign(id, env), false)
		h.confirm(id, env.TxIDHex(), h.chain.sim.CurrentSolidHead().Number) // a real solid block, without it
		return mutated{check: "chain", withdrawal: id, version: 9, what: "does not hold it"}
	}},
}

// otherSigner is a key that is not the hot wallet.
func otherSigner(t *testing.T) *tron.KeySigner {
	key := sha256.Sum256([]byte("mallory's key"))
	s, err := tron.NewKeySigner(key[:])
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAuditNamesEveryMutation: every illegal event above, appended to one
// log among clean withdrawals, is named by `audit --all` where it is, and
// by `audit ID` for its withdrawal; the clean withdrawals are not blamed.
// Once in a log written with the event key (what the store appends carries
// a valid tag; a raw forgery is quarantined first, an integrity violation
// at its sequence), once without one (the audit's own checks must catch
// the raw forgeries too).
func TestAuditNamesEveryMutation(t *testing.T) {
	t.Run("with the event key", func(t *testing.T) { auditNamesEveryMutation(t, newHistory(t), mutated.sealed) })
	t.Run("without an event key", func(t *testing.T) {
		auditNamesEveryMutation(t, newHistoryWith(t, nil), func(m mutated) mutated { return m })
	})
}

func auditNamesEveryMutation(t *testing.T, h *history, expect func(mutated) mutated) {
	clean := []string{h.pay("12.5", "bob"), h.pay("2500", "bob", "carol")}
	wants := make([]mutated, len(mutations))
	for i, m := range mutations {
		wants[i] = expect(m.apply(t, h))
		clean = append(clean, h.pay("3", "carol")) // between every two
	}
	rep := h.all(false)
	for i, want := range wants {
		if !slices.ContainsFunc(rep.Violations, want.matches) {
			t.Errorf("%s: audit --all does not name it (%+v)", mutations[i].name, want)
		}
		if want.withdrawal == "" {
			continue
		}
		if one := h.one(want.withdrawal, false); !slices.ContainsFunc(one.Violations, want.matches) {
			t.Errorf("%s: audit ID does not name it (%+v); it says:\n%s", mutations[i].name, want, findingsText(one.Violations))
		}
	}
	for _, f := range rep.Violations {
		for _, id := range clean {
			if f.Withdrawal == id {
				t.Errorf("clean withdrawal blamed: %s [%s]: %s", f.Where(), f.Check, f.What)
			}
		}
	}
	if t.Failed() {
		t.Logf("violations:\n%s", findingsText(rep.Violations))
	}
}

// TestAuditNamesPolicyMutations: the policy stream, in a log of its own
// (a bad policy colours every judgement after it): a version that is not a
// valid policy, and a skipped version, each named with its stream sequence.
func TestAuditNamesPolicyMutations(t *testing.T) {
	h := newHistory(t)
	strict, err := aggregate.NewPolicy("two for all", []aggregate.Rule{{Name: "two", Threshold: aggregate.Amount{}, Approvers: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.intake.SetPolicy(t.Context(), strict, "olivia"); err != nil { // v1
		t.Fatal(err)
	}
	k := eventstore.Key{Type: eventlog.TypePolicy, ID: eventlog.PolicyStreamID}
	appendPolicy := func(e aggregate.PolicyChanged) uint64 {
		t.Helper()
		_, pos, err := h.store.Load(t.Context(), k)
		if err != nil {
			t.Fatal(err)
		}
		pos, err = h.store.Append(t.Context(), k, pos, eventstore.Event{Type: e.EventType(), Data: e})
		if err != nil {
			t.Fatal(err)
		}
		return pos.Sequence
	}
	skipped := appendPolicy(aggregate.PolicyChanged{Version: 3, Name: "skips two", Rules: strict.Rules, By: "olivia", At: h.at()})
	invalid := appendPolicy(aggregate.PolicyChanged{Version: 4, Name: "nobody approves", Rules: []aggregate.Rule{{Name: "none", Threshold: aggregate.Amount{}, Approvers: 0}}, By: "olivia", At: h.at()})
	loose := []aggregate.Rule{{Name: "one", Threshold: aggregate.Amount{}, Approvers: 1}}
	byMallory := appendPolicy(aggregate.PolicyChanged{Version: 5, Name: "looser", Rules: loose, By: "mallory", At: h.at()})
	byApprover := appendPolicy(aggregate.PolicyChanged{Version: 6, Name: "looser still", Rules: loose, By: "bob", At: h.at()})
	h.setConfig(func(c *aggregate.Config) { c.PolicyQuorum = 2 })
	alone := appendPolicy(aggregate.PolicyChanged{Version: 7, Name: "one operator alone", Rules: loose, By: "olivia", At: h.at()})
	rep, err := audit.All(t.Context(), h.store, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []mutated{
		{check: "policy", seq: skipped, what: "version 3 follows version 1"},
		{check: "policy", seq: invalid, what: "policy stream"},
		{check: "policy", seq: byMallory, what: `version 5 by "mallory", who is no principal`},
		{check: "policy", seq: byApprover, what: "version 6 by bob, whose roles [approver]"},
		{check: "policy", seq: alone, what: "version 7 came into force with 1 operator(s); policy_quorum is 2 in configuration v2"},
	} {
		if !slices.ContainsFunc(rep.Violations, want.matches) {
			t.Errorf("not named: %+v\n%s", want, findingsText(rep.Violations))
		}
	}
}
