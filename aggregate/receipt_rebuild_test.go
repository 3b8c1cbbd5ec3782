package aggregate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// failedReceipt is the failing receipt of the current envelope, included
// in a solid block before its expiration.
func failedReceipt(result string) *FailureReceipt {
	return &FailureReceipt{BlockNumber: refBlock + 40, BlockTime: exp1 - 20_000, Result: result,
		Fee: &ChainFee{Sun: 27_359_850, EnergyUsed: 130_285}}
}

// Issue 14.3: a failing receipt on a solid block proves the transfer did
// not happen, so it lets the withdrawal be rebuilt — recorded as the
// rebuild's proof — and never a SUCCESS one.
func TestFailedReceiptAllowsARebuildAndSuccessNever(t *testing.T) {
	env, next := envelope("one", exp1), envelope("two", exp1+3_600_000)
	for _, result := range []string{"OUT_OF_ENERGY", "REVERT"} {
		t.Run(result, func(t *testing.T) {
			w := reach(t, StateBroadcast, pathOpts{})
			rb := Rebuild{RetiredTxID: env.TxID, Receipt: failedReceipt(result), Envelope: next, At: at(30)}
			w = step(t, w, rb)
			if w.State != StateSigning || w.Attempt != 2 || w.TxID() != next.TxID || len(w.Retired) != 1 ||
				w.Retired[0].Receipt == nil || w.Retired[0].Receipt.Result != result || !w.Retired[0].Evidence.IsZero() {
				t.Fatalf("after the rebuild: %+v", w)
			}
			decideNothing(t, w, rb)
			// The same retirement with another receipt is not a replay.
			other := failedReceipt(result)
			other.Fee.Sun++
			decideErr(t, w, Rebuild{RetiredTxID: env.TxID, Receipt: other, Envelope: next, At: at(31)}, ErrInvalidTransition)
			// The receipt (and its fee) is on the view.
			v := w.View()
			if len(v.Receipts) != 1 || v.Receipts[0].TxID != env.TxID || v.Receipts[0].Attempt != 1 || v.Receipts[0].Result != result ||
				*v.Receipts[0].FeeSun != 27_359_850 || *v.Receipts[0].FeeTRX != "27.35985" || *v.Receipts[0].EnergyUsed != 130_285 ||
				v.FeeBurnedTRX == nil || *v.FeeBurnedTRX != "27.35985" {
				t.Fatalf("view receipts %+v, fee %v", v.Receipts, v.FeeBurnedTRX)
			}
		})
	}
	refused := map[string]func(*Rebuild){
		"a SUCCESS receipt":        func(c *Rebuild) { c.Receipt.Result = ReceiptSuccess },
		"a DEFAULT receipt":        func(c *Rebuild) { c.Receipt.Result = "DEFAULT" },
		"an empty result":          func(c *Rebuild) { c.Receipt.Result = "" },
		"no block":                 func(c *Rebuild) { c.Receipt.BlockNumber = 0 },
		"no block time":            func(c *Rebuild) { c.Receipt.BlockTime = 0 },
		"a negative fee":           func(c *Rebuild) { c.Receipt.Fee.Sun = -1 },
		"both proofs":              func(c *Rebuild) { c.Evidence = proof(exp1) },
		"no proof at all":          func(c *Rebuild) { c.Receipt = nil },
		"a new envelope expired":   func(c *Rebuild) { c.Envelope = envelope("stale", c.Receipt.BlockTime) },
		"another envelope's txid":  func(c *Rebuild) { c.RetiredTxID = next.TxID },
		"the retired txid as next": func(c *Rebuild) { c.Envelope = env },
	}
	for name, mutate := range refused {
		t.Run("refuses "+name, func(t *testing.T) {
			w := reach(t, StateBroadcast, pathOpts{})
			c := Rebuild{RetiredTxID: env.TxID, Receipt: failedReceipt("REVERT"), Envelope: next, At: at(30)}
			mutate(&c)
			evs, err := Decide(w, c)
			var de *Error
			if err == nil || len(evs) != 0 || !errors.As(err, &de) {
				t.Fatalf("Decide: %v, %v", evs, err)
			}
		})
	}
	// An envelope never signed has no receipt: the table refuses a rebuild
	// from signing.
	w := reach(t, StateSigning, pathOpts{})
	decideErr(t, w, Rebuild{RetiredTxID: env.TxID, Receipt: failedReceipt("REVERT"), Envelope: next, At: at(30)}, ErrInvalidTransition)
}

// The audit of a stored log judges a receipt-proven rebuild as the
// decider does: a Rebuilt whose receipt is SUCCESS could not have been
// decided.
func TestAuditRefusesARebuildAfterASuccessReceipt(t *testing.T) {
	env, next := envelope("one", exp1), envelope("two", exp1+3_600_000)
	w := reach(t, StateBroadcast, pathOpts{})
	good := Rebuilt{Attempt: 2, RetiredTxID: env.TxID, Receipt: failedReceipt("OUT_OF_ENERGY"), Envelope: next, At: at(30)}
	var evs []Event
	var v Withdrawal
	for _, c := range happyPath(t, pathOpts{}) {
		if v.State == StateBroadcast {
			break
		}
		e, err := Decide(v, c)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e...)
		v = Evolve(v, e[0])
	}
	if v.Version != w.Version {
		t.Fatalf("fixture: %d events, %d", v.Version, w.Version)
	}
	if _, err := Audit(append(evs, good)); err != nil {
		t.Fatalf("a failed receipt's rebuild: %v", err)
	}
	bad := good
	bad.Receipt = &FailureReceipt{BlockNumber: good.Receipt.BlockNumber, BlockTime: good.Receipt.BlockTime, Result: ReceiptSuccess}
	if _, err := Audit(append(evs, bad)); !errors.Is(err, ErrInvalidEvidence) {
		t.Fatalf("a rebuild after a SUCCESS receipt: %v", err)
	}
}

// With the last attempt's receipt failed too, the withdrawal fails with
// attempts_exhausted and that receipt as its proof; a SUCCESS receipt is
// never a failure's proof.
func TestAttemptsExhaustedByAFailedReceipt(t *testing.T) {
	w := reach(t, StateBroadcast, pathOpts{})
	w2 := step(t, w, Fail{Reason: ReasonAttemptsExhausted, TxID: w.TxID(), Receipt: failedReceipt("REVERT"), At: at(30)})
	if w2.State != StateFailed || len(w2.Receipts) != 1 || w2.Receipts[0].Result != "REVERT" {
		t.Fatalf("%+v", w2)
	}
	decideErr(t, w, Fail{Reason: ReasonAttemptsExhausted, TxID: w.TxID(), Receipt: &FailureReceipt{BlockNumber: 9, BlockTime: 9, Result: ReceiptSuccess}, At: at(30)}, ErrInvalidEvidence)
	decideErr(t, w, Fail{Reason: ReasonOutOfEnergy, TxID: w.TxID(), Receipt: failedReceipt("REVERT"), At: at(30)}, ErrInvalidEvidence)
}

// Old logs still fold: a rebuilt event written before receipts were
// recorded (evidence only) decodes and folds as before, and a proof of
// death's rebuild is still encoded with its evidence.
func TestRebuiltCodecKeepsOldLogs(t *testing.T) {
	env, next := envelope("one", exp1), envelope("two", exp1+3_600_000)
	old := Rebuilt{Attempt: 2, RetiredTxID: env.TxID, Evidence: proof(exp1), Envelope: next, At: at(30)}
	b, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"receipt"`) || !strings.Contains(string(b), `"evidence"`) {
		t.Fatalf("proof-of-death rebuild encodes as %s", b)
	}
	e, err := DecodeWithdrawalEvent(EventRebuilt, b)
	if err != nil {
		t.Fatal(err)
	}
	if rb := e.(Rebuilt); rb.Receipt != nil || rb.Evidence != old.Evidence {
		t.Fatalf("decoded %+v", rb)
	}
	byReceipt := Rebuilt{Attempt: 2, RetiredTxID: env.TxID, Receipt: failedReceipt("REVERT"), Envelope: next, At: at(30)}
	b, _ = json.Marshal(byReceipt)
	if strings.Contains(string(b), `"evidence"`) || !strings.Contains(string(b), `"fee":{"sun":27359850,"energy_used":130285}`) {
		t.Fatalf("receipt rebuild encodes as %s", b)
	}
	// A confirmation without a fee (older logs) shows null fee fields.
	w := reach(t, StateConfirmed, pathOpts{})
	v := w.View()
	if len(v.Receipts) != 1 || v.Receipts[0].Result != ReceiptSuccess || v.Receipts[0].FeeSun != nil || v.FeeBurnedTRX != nil {
		t.Fatalf("view %+v fee %v", v.Receipts, v.FeeBurnedTRX)
	}
	vb, _ := json.Marshal(v)
	if !strings.Contains(string(vb), `"fee_sun":null`) || !strings.Contains(string(vb), `"fee_burned_trx":null`) {
		t.Fatalf("view JSON %s", vb)
	}
}
