package sagas

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
)

// LagReads makes r's ordinary reads of aggregates of type typ answer as a
// replica that has not yet seen the last `behind` events of each (what a
// direct get served by a lagging R3 follower returns); its reads through
// the stream leader stay exact. Tests only.
func LagReads(r *Repo, typ string, behind int) {
	exact := r.read
	r.read = func(ctx context.Context, k eventstore.Key, since eventstore.Position) ([]eventstore.Record, eventstore.Position, error) {
		if k.Type != typ {
			return exact(ctx, k, since)
		}
		recs, _, err := exact(ctx, k, eventstore.Position{})
		if err != nil {
			return nil, eventstore.Position{}, err
		}
		recs = recs[:max(0, len(recs)-behind)]
		return sinceOf(recs, since)
	}
}

// sinceOf is what LoadSince answers from a replica holding recs (an
// aggregate's whole chain as that replica sees it).
func sinceOf(recs []eventstore.Record, since eventstore.Position) ([]eventstore.Record, eventstore.Position, error) {
	n := uint64(len(recs))
	var pos eventstore.Position
	if n > 0 {
		pos = eventstore.Position{Sequence: recs[n-1].Sequence, Version: n}
	}
	if since.Version == 0 {
		return recs, pos, nil
	}
	if since.Version > n || recs[since.Version-1].Sequence != since.Sequence {
		return nil, eventstore.Position{}, fmt.Errorf("%w: replica at %+v, snapshot at %+v", eventstore.ErrSnapshotMismatch, pos, since)
	}
	return recs[since.Version:], pos, nil
}

// CountReads makes r count the records its ordinary and leader reads
// return. Tests only.
func CountReads(r *Repo) *atomic.Int64 {
	var n atomic.Int64
	for _, f := range []*readFunc{&r.read, &r.readLatest} {
		inner := *f
		*f = func(ctx context.Context, k eventstore.Key, since eventstore.Position) ([]eventstore.Record, eventstore.Position, error) {
			recs, pos, err := inner(ctx, k, since)
			n.Add(int64(len(recs)))
			return recs, pos, err
		}
	}
	return &n
}

// PlantSnapshot puts state at pos in r's snapshots, as if r had folded
// it. Tests only.
func PlantSnapshot(r *Repo, typ, id string, state any, pos eventstore.Position) {
	r.snaps.drop(typ, id)
	r.snaps.put(typ, id, state, pos, 0)
}

// HeldSnapshot is the snapshot r holds of typ/id in memory: its position
// and the version it knows to be in the bucket. Tests only.
func HeldSnapshot(r *Repo, typ, id string) (pos eventstore.Position, durable uint64, ok bool) {
	s, ok := r.snaps.get(typ, id)
	return s.pos, s.durable, ok
}

// FailReads makes r's ordinary reads fail with err until restore is
// called (a replica that cannot be reached). Tests only.
func FailReads(r *Repo, err error) (restore func()) {
	exact := r.read
	r.read = func(context.Context, eventstore.Key, eventstore.Position) ([]eventstore.Record, eventstore.Position, error) {
		return nil, eventstore.Position{}, err
	}
	return func() { r.read = exact }
}

// SealSnapshotForTest returns the hex tag key gives a snapshot document
// decoded into m (as a forger holding that key would make it). Tests only.
func SealSnapshotForTest(key eventstore.Sealer, m map[string]any) string {
	b, _ := json.Marshal(m)
	var doc snapshotDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		panic(err)
	}
	_, tag := key.Seal(doc.sealInput())
	return hex.EncodeToString(tag)
}

// ReadSnapshotForTest reads the stored snapshot of an account as a load
// would (verified). Tests only.
func ReadSnapshotForTest(ctx context.Context, d *DurableSnapshots, id string) (aggregate.Account, eventstore.Position, bool) {
	return d.read(ctx, eventlog.TypeAccount, id)
}

// CountLoadsOf makes r count its ordinary and leader reads of the aggregate
// typ/id (each read is one load: a direct-get walk). Tests only.
func CountLoadsOf(r *Repo, typ, id string) *atomic.Int64 {
	var n atomic.Int64
	for _, f := range []*readFunc{&r.read, &r.readLatest} {
		inner := *f
		*f = func(ctx context.Context, k eventstore.Key, since eventstore.Position) ([]eventstore.Record, eventstore.Position, error) {
			if k.Type == typ && k.ID == id {
				n.Add(1)
			}
			return inner(ctx, k, since)
		}
	}
	return &n
}

// ReservedRemembered is how many withdrawals l's reserved set holds.
// Tests only.
func ReservedRemembered(l *Ledger) int { return l.reserved.len() }

// FollowPolicyUndelivered makes in's policy cache answer as it does while
// a watcher follows the policy subject but has delivered no event yet (the
// moment between an append and its delivery). Tests only.
func FollowPolicyUndelivered(in *Intake) { in.policyCache.setLive(true) }

// PolicyWatch reports whether in's policy watcher follows the policy
// subject, and the last policy event it saw. Tests only.
func PolicyWatch(in *Intake) (live bool, seen uint64) {
	c := &in.policyCache
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live, c.seen
}
