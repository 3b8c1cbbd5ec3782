package sagas_test

import (
	"context"
	"slices"
	"testing"

	"github.com/weir-payouts/weir/aggregate"
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
