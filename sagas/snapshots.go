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
// Snapshots live in this process's memory only (nothing outside the
// process can plant one) and are bounded: past max entries an arbitrary
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
}

func snapshotKey(typ, id string) string { return typ + "." + id }

func (c *snapshots) get(typ, id string) (snapshot, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.m[snapshotKey(typ, id)]
	return s, ok
}

// put records state at pos unless a snapshot at least as far along is
// already held (a lagging replica must not move a snapshot back).
func (c *snapshots) put(typ, id string, state any, pos eventstore.Position) {
	if c.max <= 0 {
		return
	}
	key := snapshotKey(typ, id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[key]; ok {
		if old.pos.Sequence >= pos.Sequence {
			return
		}
	} else if len(c.m) >= c.max {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	if c.m == nil {
		c.m = map[string]snapshot{}
	}
	c.m[key] = snapshot{state: state, pos: pos}
}

func (c *snapshots) drop(typ, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, snapshotKey(typ, id))
}
