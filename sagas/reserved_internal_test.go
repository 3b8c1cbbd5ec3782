package sagas

import (
	"testing"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
)

// The set covers only events before the remembered funds_reserved, on the
// account reserved on; when full it forgets the oldest.
func TestReservedSetBounds(t *testing.T) {
	s := newReservedSet(2)
	s.add("a", "acct", 10)
	for _, c := range []struct {
		id, account string
		seq         uint64
		want        bool
	}{
		{"a", "acct", 9, true}, {"a", "", 9, true}, {"a", "acct", 10, false}, {"a", "acct", 11, false},
		{"a", "other", 9, false}, {"b", "acct", 9, false},
	} {
		if got := s.covers(c.id, c.account, c.seq); got != c.want {
			t.Errorf("covers(%s, %q, %d) = %v, want %v", c.id, c.account, c.seq, got, c.want)
		}
	}
	s.passed("a", 9) // before funds_reserved: still remembered
	if !s.covers("a", "acct", 9) {
		t.Fatal("forgotten before the consumer reached its funds_reserved")
	}
	s.passed("a", 10)
	if s.covers("a", "acct", 9) || s.len() != 0 {
		t.Fatal("remembered after the consumer passed its funds_reserved")
	}
	s.add("b", "acct", 20)
	s.add("c", "acct", 30)
	s.add("d", "acct", 40) // full: b, the oldest, goes
	if s.covers("b", "acct", 1) || !s.covers("c", "acct", 1) || !s.covers("d", "acct", 1) || s.len() != 2 {
		t.Fatalf("after overflow: b=%v c=%v d=%v len=%d", s.covers("b", "acct", 1), s.covers("c", "acct", 1), s.covers("d", "acct", 1), s.len())
	}
}

// Only the events before the remembered funds_reserved, on the account
// reserved on, are skipped: the same account.reserved at a later stream
// position, or naming another account, is handled with a load as before.
func TestLedgerSkipsOnlyWhatTheSetCovers(t *testing.T) {
	ctx, repo, l := newUnitLedger(t)
	id := "d00dfeed-0000-4000-8000-000000000010"
	unitRequest(t, ctx, repo, id, "40")
	if w, err := l.Reserve(ctx, id); err != nil || !w.Reserved {
		t.Fatalf("reserved=%v err=%v", w.Reserved, err)
	}
	if l.reserved.len() != 1 {
		t.Fatal("the reservation recorded here is not remembered")
	}
	loads := CountLoadsOf(repo, eventlog.TypeWithdrawal, id)
	reserved := record(t, ctx, repo, eventstore.Key{Type: eventlog.TypeAccount, ID: internalAccount}, aggregate.EventAccountReserved)
	requested := record(t, ctx, repo, eventstore.Key{Type: eventlog.TypeWithdrawal, ID: id}, aggregate.EventRequested)
	funds := record(t, ctx, repo, eventstore.Key{Type: eventlog.TypeWithdrawal, ID: id}, aggregate.EventFundsReserved)
	for _, r := range []eventstore.Record{requested, reserved} {
		if err := l.handle(r); err != nil {
			t.Fatal(err)
		}
	}
	if n := loads.Load(); n != 0 {
		t.Fatalf("%d loads for events before the remembered funds_reserved, want 0", n)
	}
	later := reserved
	later.Sequence = funds.Sequence + 1
	elsewhere := reserved
	elsewhere.Key.ID = "acct-other"
	for i, r := range []eventstore.Record{later, elsewhere} {
		if err := l.handle(r); err != nil {
			t.Fatal(err)
		}
		if n := loads.Load(); n != int64(i+1) {
			t.Fatalf("case %d: %d loads, want %d: an event the set does not cover was skipped", i, n, i+1)
		}
	}
	if w, _, err := repo.Withdrawal(ctx, id); err != nil || !w.Reserved || w.Terminal() {
		t.Fatalf("%s reserved=%v err=%v", w.State, w.Reserved, err)
	}
}
