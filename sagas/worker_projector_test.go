package sagas_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/projections"
	"github.com/weir-payouts/weir/sagas"
)

// The projector's ready and in-flight views are a WorkSource.
var _ sagas.WorkSource = (*projections.Projector)(nil)

// Workers fed by the real projector (a lagging read model, caught up once
// per round) pay every withdrawal once: the view only suggests candidates;
// the stream decides.
func TestWorkersTakeWorkFromTheProjector(t *testing.T) {
	r := newBCRig(t)
	proj := projections.New(bcOpenStore(r.ctx, r.emb), projections.Options{})
	if err := proj.Start(r.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proj.Stop(context.Background()) })
	ids := []string{r.ready(bcAddress("proj a"), "10"), r.ready(bcAddress("proj b"), "20"), r.ready(bcAddress("proj c"), "30")}
	feed := func(c *sagas.WorkerConfig) { c.Work = proj }
	a, b := r.worker("pa", feed), r.worker("pb", feed)
	done := func() bool {
		for _, id := range ids {
			if !r.load(id).Terminal() {
				return false
			}
		}
		return true
	}
	for i := 0; i < 60 && !done(); i++ {
		if err := proj.CatchUp(r.ctx); err != nil {
			t.Fatal(err)
		}
		r.round(a, b)
	}
	for _, id := range ids {
		r.paidOnce(id)
	}
	if err := proj.CatchUp(r.ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(proj.InFlightWithdrawals(r.clock.Now())) + len(proj.Ready(r.clock.Now())); n != 0 {
		t.Fatalf("the projector still lists %d withdrawals as work", n)
	}
	if w, ok := proj.Withdrawal(ids[0]); ok && w.State != aggregate.StateConfirmed {
		t.Fatalf("projector says %s", w.State)
	}
}

// The projector's id lists (what a worker's look uses, copying no
// withdrawal) name exactly what its views do: Ready's ids in Ready's
// order, and the in-flight withdrawals a worker may visit — its own, and
// others' only once their lease lapsed.
var _ sagas.IDLister = (*projections.Projector)(nil)

func TestProjectorIDListsMatchItsViews(t *testing.T) {
	r := newBCRig(t)
	proj := projections.New(bcOpenStore(r.ctx, r.emb), projections.Options{})
	if err := proj.Start(r.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proj.Stop(context.Background()) })
	ids := r.readyMany("id-lists", 5)
	if err := proj.CatchUp(r.ctx); err != nil {
		t.Fatal(err)
	}
	now := r.clock.Now()
	var want []string
	for _, w := range proj.Ready(now) {
		want = append(want, w.ID)
	}
	if got := proj.ReadyIDs(now, nil); len(want) != len(ids) || !slices.Equal(got, want) {
		t.Fatalf("ReadyIDs %v, Ready %v (%d ready)", got, want, len(ids))
	}
	// One worker takes them all as far as they go (in flight, leased).
	w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Work = proj })
	if _, err := w1.Step(r.ctx); err != nil {
		t.Fatal(err)
	}
	if err := proj.CatchUp(r.ctx); err != nil {
		t.Fatal(err)
	}
	now = r.clock.Now()
	mine := proj.InFlightIDs(now, "w1", []string{"kept"})
	if len(mine) != 1+len(ids) || mine[0] != "kept" || !slices.IsSorted(mine[1:]) {
		t.Fatalf("w1 may visit %v (after the kept prefix), want its %d in id order", mine, len(ids))
	}
	if other := proj.InFlightIDs(now, "w2", nil); len(other) != 0 {
		t.Fatalf("w2 may visit %v while w1's lease is live", other)
	}
	if later := proj.InFlightIDs(now.Add(2*bcLease), "w2", nil); !slices.Equal(later, mine[1:]) {
		t.Fatalf("after the lease w2 may visit %v, want %v", later, mine[1:])
	}
	var inflight []string
	for _, w := range proj.InFlightWithdrawals(now) {
		inflight = append(inflight, w.ID)
	}
	slices.Sort(inflight)
	if !slices.Equal(inflight, mine[1:]) {
		t.Fatalf("InFlightIDs %v, InFlightWithdrawals %v", mine[1:], inflight)
	}
	if got := proj.ReadyIDs(now, nil); len(got) != 0 {
		t.Fatalf("%v still ready", got)
	}
}

// The projector offers its fold of an open withdrawal (sagas.Folder) and
// it is the same state, at the same position, a load from the log gives.
var _ sagas.Folder = (*projections.Projector)(nil)

func TestTheProjectorsFoldIsWhatALoadGives(t *testing.T) {
	r := newBCRig(t)
	proj := projections.New(bcOpenStore(r.ctx, r.emb), projections.Options{})
	if err := proj.Start(r.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proj.Stop(context.Background()) })
	id := r.ready(bcAddress("folded"), "15")
	if err := proj.CatchUp(r.ctx); err != nil {
		t.Fatal(err)
	}
	got, at, ok := proj.Folded(id)
	if !ok {
		t.Fatal("the projector has no fold of an open withdrawal")
	}
	want, pos, err := r.repo.Withdrawal(r.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if at != pos || bcJSON(t, got) != bcJSON(t, want) {
		t.Fatalf("projector's fold at %+v:\n%s\nload at %+v:\n%s", at, bcJSON(t, got), pos, bcJSON(t, want))
	}
	if _, _, ok := proj.Folded("no-such-withdrawal"); ok {
		t.Fatal("a fold of a withdrawal the log does not hold")
	}
}

// folder offers, for each withdrawal, whatever fold a test sets: the
// worker must end up deciding on the log's state whatever it is offered,
// as long as the offered position is not on the log's path.
type folder struct {
	*bcScan
	folds map[string]func() (aggregate.Withdrawal, eventstore.Position)
}

func (f folder) Folded(id string) (aggregate.Withdrawal, eventstore.Position, bool) {
	if fold, ok := f.folds[id]; ok {
		w, pos := fold()
		return w, pos, true
	}
	return aggregate.Withdrawal{}, eventstore.Position{}, false
}

// A worker starts from the fold a Folder offers and reads only what the
// log holds after it: an exact fold, a stale one (the first event only;
// the rest is folded from the log) and one at a position the log does not
// pass through (a lie: the worker folds from the first event instead, and
// pays what the log says) all end paid once, for the amount requested.
func TestAWorkerStartsFromAFoldAndTheLogDecides(t *testing.T) {
	r := newBCRig(t)
	exact := r.ready(bcAddress("fold exact"), "11")
	stale := r.ready(bcAddress("fold stale"), "12")
	lie := r.ready(bcAddress("fold lie"), "13")
	first := func(id string) (aggregate.Withdrawal, eventstore.Position) {
		recs, err := r.repo.WithdrawalRecords(r.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		w := r.load(id)
		one := aggregate.Withdrawal{}
		e, err := aggregate.DecodeWithdrawalEvent(recs[0].Type, recs[0].Payload)
		if err != nil {
			t.Fatal(err)
		}
		one = aggregate.EvolveRecorded(one, e, recs[0].Time)
		one.Version = 1
		if one.ID != w.ID {
			t.Fatalf("first event folds to %q, want %q", one.ID, w.ID)
		}
		return one, eventstore.Position{Sequence: recs[0].Sequence, Version: 1}
	}
	f := folder{bcScan: r.work, folds: map[string]func() (aggregate.Withdrawal, eventstore.Position){
		exact: func() (aggregate.Withdrawal, eventstore.Position) {
			w, pos, err := r.repo.Withdrawal(r.ctx, exact)
			if err != nil {
				t.Fatal(err)
			}
			return w, pos
		},
		stale: func() (aggregate.Withdrawal, eventstore.Position) { return first(stale) },
		lie: func() (aggregate.Withdrawal, eventstore.Position) {
			w, pos, err := r.repo.Withdrawal(r.ctx, lie)
			if err != nil {
				t.Fatal(err)
			}
			w.Amount = bcAmount(t, "999")
			_, other, err := r.repo.Withdrawal(r.ctx, exact)
			if err != nil {
				t.Fatal(err)
			}
			pos.Sequence = other.Sequence // an event of another withdrawal
			return w, pos
		},
	}}
	w := r.worker("folded", func(c *sagas.WorkerConfig) { c.Work = f })
	for i := 0; i < 60 && !(r.load(exact).Terminal() && r.load(stale).Terminal() && r.load(lie).Terminal()); i++ {
		r.round(w)
	}
	for id, amount := range map[string]string{exact: "11", stale: "12", lie: "13"} {
		paid := r.paidOnce(id)
		if paid.Amount.String() != bcAmount(t, amount).String() {
			t.Fatalf("%s paid %s, requested %s", id, paid.Amount, amount)
		}
	}
}

func bcJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func bcAmount(t *testing.T, s string) aggregate.Amount {
	t.Helper()
	a, err := aggregate.ParseAmount(aggregate.USDT, s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
