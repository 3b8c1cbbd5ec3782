package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/weir-payouts/weir/aggregate"
)

// weir show lists each receipt the chain gave the withdrawal's envelopes
// with the fee it burnt, and the total; a receipt recorded before fees
// were shows a dash.
func TestShowListsReceiptsAndTheFeeBurnt(t *testing.T) {
	fee, trx, energy := int64(27_359_850), "27.35985", int64(130_285)
	total := "27.35985"
	w := aggregate.WithdrawalView{ID: "w", State: aggregate.StateConfirmed, Attempt: 2, FeeBurnedTRX: &total,
		Receipts: []aggregate.ReceiptView{
			{TxID: "aa11", Attempt: 1, Result: "OUT_OF_ENERGY", BlockNumber: 70_000_140},
			{TxID: "bb22", Attempt: 2, Result: "SUCCESS", BlockNumber: 70_000_391, FeeSun: &fee, FeeTRX: &trx, EnergyUsed: &energy},
		}}
	var out bytes.Buffer
	printWithdrawal(&out, w)
	got := out.String()
	for _, want := range []string{
		"fee burnt     27.35985 TRX",
		"1        OUT_OF_ENERGY  70000140  -         -       aa11",
		"2        SUCCESS        70000391  27.35985  130285  bb22",
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("output lacks %q:\n%s", want, got)
		}
	}
	out.Reset()
	w.Receipts, w.FeeBurnedTRX = []aggregate.ReceiptView{}, nil
	printWithdrawal(&out, w)
	if strings.Contains(out.String(), "fee burnt") {
		t.Fatalf("a withdrawal without receipts shows a fee:\n%s", out.String())
	}
}
