package sagas

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
)

// The stored document is written as encoding/json writes it, without a
// second pass over the state.
func TestSnapshotDocIsWhatEncodingJSONWrites(t *testing.T) {
	a := aggregate.FoldAccountFrom(aggregate.Account{}, []aggregate.AccountEvent{
		aggregate.AccountCredited{Account: "acct-a", CreditID: "dep", Amount: aggregate.MustParseAmount(aggregate.USDT, "100"), At: time.Unix(1, 0).UTC()},
	})
	for i := range 20 {
		at := time.Unix(int64(10+i), 5).UTC()
		a = aggregate.FoldAccountFrom(a, []aggregate.AccountEvent{aggregate.AccountReserved{
			Account: "acct-a", WithdrawalID: fmt.Sprintf("%08x-0000-4000-8000-000000000000", i),
			Amount: aggregate.MustParseAmount(aggregate.USDT, "1.25"), Day: at.Format(time.DateOnly), At: at,
		}})
	}
	state, err := a.MarshalSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	doc := snapshotDoc{Schema: aggregate.AccountSnapshotSchema, Type: "account", ID: "acct-\"<x>", Sequence: 42, Version: 21, State: state, KeyID: "k1", Tag: "ab12"}
	got, err := doc.marshal()
	want, werr := json.Marshal(doc)
	if err != nil || werr != nil || string(got) != string(want) {
		t.Fatalf("(%v, %v)\n got %s\nwant %s", err, werr, got, want)
	}
	if _, err := (snapshotDoc{}).marshal(); err == nil {
		t.Fatal("a document without a state was written")
	}
}
