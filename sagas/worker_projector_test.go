package sagas_test

import (
	"context"
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
