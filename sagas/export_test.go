package sagas

import (
	"context"

	"github.com/weir-payouts/weir/eventstore"
)

// LagReads makes r's ordinary reads of aggregates of type typ answer as a
// replica that has not yet seen the last `behind` events of each (what a
// direct get served by a lagging R3 follower returns); its reads through
// the stream leader stay exact. Tests only.
func LagReads(r *Repo, typ string, behind int) {
	exact := r.read
	r.read = func(ctx context.Context, k eventstore.Key) ([]eventstore.Record, eventstore.Position, error) {
		recs, pos, err := exact(ctx, k)
		if err != nil || k.Type != typ {
			return recs, pos, err
		}
		n := max(0, len(recs)-behind)
		if n == 0 {
			return nil, eventstore.Position{}, nil
		}
		return recs[:n], eventstore.Position{Sequence: recs[n-1].Sequence, Version: uint64(n)}, nil
	}
}
