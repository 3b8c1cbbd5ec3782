package audit_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
)

// TestAuditNamesAQuarantinedEventByItsSequence: with the event key, events
// a full-access identity published without it — a credit of 5,000,000 to a
// new account, a confirmation of a withdrawal never sent — are violations
// named by their stream sequence (so `weir audit` exits 1), never replayed
// into a balance or a state; the rest of the log is audited as usual.
func TestAuditNamesAQuarantinedEventByItsSequence(t *testing.T) {
	h := newHistory(t)
	id := h.request("10")
	clean := h.request("11")
	h.approve(clean, "bob")
	js, err := jetstream.New(h.nc)
	if err != nil {
		t.Fatal(err)
	}
	forge := func(k eventstore.Key, typ string, payload any) uint64 {
		t.Helper()
		_, pos, err := h.store.Load(t.Context(), k)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(payload)
		m := eventstoretest.WithTag(eventstoretest.Forged(h.store.Subject(k), pos, typ, aggregate.EventSchemaVersion, data), strings.Repeat("11", 32))
		ack, err := js.PublishMsg(t.Context(), m)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	credit := forge(eventstore.Key{Type: eventlog.TypeAccount, ID: "mallory"}, aggregate.EventAccountCredited,
		aggregate.AccountCredited{Account: "mallory", CreditID: "forged", Amount: aggregate.MustParseAmount(aggregate.USDT, "5000000"), At: h.at()})
	confirmed := forge(eventstore.Key{Type: eventlog.TypeWithdrawal, ID: id}, aggregate.EventConfirmed,
		aggregate.Confirmed{TxID: strings.Repeat("ab", 32), BlockNumber: 100, Receipt: "SUCCESS", At: h.at()})

	all := h.all(false)
	wantFinding(t, all, "integrity", credit, "quarantined")
	wantFinding(t, all, "integrity", confirmed, "quarantined")
	if len(all.Violations) != 2 {
		t.Fatalf("want exactly the two forgeries; violations:\n%s", findingsText(all.Violations))
	}
	one := h.one(id, false)
	wantFinding(t, one, "integrity", confirmed, "does not verify")
	if one.Withdrawal.State == aggregate.StateConfirmed {
		t.Fatal("the forged confirmation was replayed")
	}
	h.one(clean, true)
}
