package projections

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
)

// A credit waiting for a second operator survives a checkpoint (and the
// compaction that takes the same path): the approval that follows the
// restore is folded like on the live account, not skipped.
func TestAPendingCreditSurvivesACheckpointRestore(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)
	amount := aggregate.MustParseAmount(aggregate.USDT, "50000")
	live := aggregate.FoldAccount([]aggregate.AccountEvent{
		aggregate.AccountCredited{Account: "acme", CreditID: "c1", Amount: aggregate.MustParseAmount(aggregate.USDT, "10"), By: "olivia", At: t0},
		aggregate.AccountCreditRequested{Account: "acme", CreditID: "big", Amount: amount, By: "olivia", ReviewAbove: aggregate.MustParseAmount(aggregate.USDT, "10000"), At: t0.Add(time.Second)},
	})
	data, err := json.Marshal(accountSnapshot("acme", live))
	if err != nil {
		t.Fatal(err)
	}
	var entry AccountEntry
	if err := json.Unmarshal(data, &entry); err != nil {
		t.Fatal(err)
	}
	restored, err := restoreAccount(entry)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := restored.PendingCredit("big"); !ok || !p.Amount.Equal(amount) || p.By != "olivia" {
		t.Fatalf("pending credit after restore: %+v %v", p, ok)
	}
	approved := aggregate.AccountCredited{Account: "acme", CreditID: "big", Amount: amount, By: "olivia", ApprovedBy: "oscar", At: t0.Add(2 * time.Second)}
	if got, want := aggregate.EvolveAccount(restored, approved).Available(), aggregate.EvolveAccount(live, approved).Available(); !got.Equal(want) || got.String() != "50010" {
		t.Fatalf("after the approval: restored %s, live %s", got, want)
	}
}
