package sagas

import (
	"sync"

	"github.com/weir-payouts/weir/eventstore"
)

// DefaultSnapshots is how many aggregates a Repo keeps a snapshot of.
const DefaultSnapshots = 4096

// snapshots keeps, per account and for the policy, the state folded from
// the log and the position it covers, so that loading a busy account costs
// its new events instead of its whole history. A snapshot is derived from
// the log and never the source of truth: every load still reads the
// subject's last event, folds only what lies after the snapshot, and
// checks the log passes through the snapshot's position
// (eventstore.LoadSince) — a snapshot it does not is dropped and the
// aggregate folded from its first event. The OCC expectation of an append
// is the position read from the log, never one held here.
//
// These snapshots live in this process's memory (nothing outside the
// process can plant one); accounts also go to the KV bucket every so many
// events (DurableSnapshots), tagged and verified. They are bounded: past max entries an arbitrary
// one is evicted, which costs its aggregate one full load. States are
// shared read-only: folds copy before they change anything
// (aggregate.FoldAccountFrom).
type snapshots struct {
	mu  sync.Mutex
	max int
	m   map[string]snapshot
}

type snapshot struct {
	state any
	pos   eventstore.Position
	// durable is the version of the last snapshot of this aggregate
	// queued for (or read from) the KV bucket.
	durable uint64
}

func snapshotKey(typ, id string) string { return typ + "." + id }

func (c *snapshots) get(typ, id string) (snapshot, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.m[snapshotKey(typ, id)]
	return s, ok
}

// put records state at pos unless a snapshot at least as far along is
// already held (a lagging replica must not move a snapshot back); durable
// is the version of a snapshot of it known to be in the bucket (0: none).
// It returns the version last made durable and whether state was kept.
func (c *snapshots) put(typ, id string, state any, pos eventstore.Position, durable uint64) (uint64, bool) {
	if c.max <= 0 {
		return 0, false
	}
	key := snapshotKey(typ, id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[key]; ok {
		if old.pos.Sequence >= pos.Sequence {
			return old.durable, false
		}
		durable = max(durable, old.durable)
	} else if len(c.m) >= c.max {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	if c.m == nil {
		c.m = map[string]snapshot{}
	}
	c.m[key] = snapshot{state: state, pos: pos, durable: durable}
	return durable, true
}

// markDurable records that the snapshot at version went to the bucket.
func (c *snapshots) markDurable(typ, id string, version uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := snapshotKey(typ, id)
	if s, ok := c.m[key]; ok && s.durable < version {
		s.durable = version
		c.m[key] = s
	}
}

func (c *snapshots) drop(typ, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, snapshotKey(typ, id))
}
