package sagas

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
)

// policyCache holds the policy in force for the intake between policy
// events, so a request does not read the policy stream (a direct get, a
// tag check and a decode) every time. It answers only while WatchPolicy
// follows the policy subject: every policy event drops it, this intake's
// own policy writes replace it at once, and a read that an event or an own
// write overtook is not kept. Without a watcher every question reads the
// log, as before.
//
// What a stale answer could change is bounded as the uncached read already
// was (PolicyInForce may be answered by a replica that lags): the policy a
// request or an approval is recorded under. The re-check before signing
// reads the policy in force through the stream leader, never from here.
type policyCache struct {
	mu    sync.Mutex
	live  bool   // a watcher follows the policy subject
	gen   uint64 // bumped by every invalidation
	seen  uint64 // stream sequence of the last policy event the watcher saw
	valid bool
	p     aggregate.Policy
}

// get returns the cached policy, or the generation a fill must carry.
func (c *policyCache) get() (aggregate.Policy, bool, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.p, c.live && c.valid, c.gen
}

// fill keeps p, read at pos, if no invalidation happened since gen was read
// and the read includes every policy event the watcher has seen (a replica
// may answer behind the subscription).
func (c *policyCache) fill(p aggregate.Policy, pos eventstore.Position, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.live && c.gen == gen && pos.Sequence >= c.seen {
		c.p, c.valid = p, true
	}
}

// invalidate drops the cached policy; seq is the stream sequence of the
// policy event the watcher saw.
func (c *policyCache) invalidate(seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.invalidateLocked(seq)
}

func (c *policyCache) invalidateLocked(seq uint64) {
	c.seen = max(c.seen, seq)
	c.gen++
	c.valid = false
}

// wrote records this intake's own policy write, which left the policy
// stream at pos in state s (err: refused, or not known to be written).
// Until the watcher delivers the event, a replica behind the write could
// answer the next read with the old policy, and that answer would be kept:
// so no read behind pos is kept from now on, and the written state is
// kept at once. An event the watcher saw after pos still wins: fill's
// rules apply.
func (c *policyCache) wrote(s aggregate.PolicyState, pos eventstore.Position, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.invalidateLocked(pos.Sequence)
	if err == nil && c.live && pos.Sequence != 0 && pos.Sequence >= c.seen {
		c.p, c.valid = policyInForce(s), true
	}
}

func (c *policyCache) setLive(live bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live = live
	c.gen++
	c.valid = false
}

// WatchPolicy follows the policy subject so that the intake may answer the
// policy in force from memory between policy events (see policyCache). It
// blocks until ctx is done; while it is not following (starting, or after
// the subscription broke, until it is back) every question reads the log.
//
// Start it once per intake, before requests are served for the cache to
// help; a second watcher only invalidates more often.
func (in *Intake) WatchPolicy(ctx context.Context, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	c := &in.policyCache
	defer c.setLive(false)
	for ctx.Err() == nil {
		// Events up to last are visible to any read made from now on; the
		// subscription delivers every one after it.
		last, err := in.repo.store.LastSequence(ctx)
		if err == nil {
			c.setLive(true)
			err = in.repo.store.Subscribe(ctx, last+1, eventlog.TypePolicy, func(r eventstore.Record) error {
				c.invalidate(r.Sequence)
				return nil
			}, eventstore.OnViolation(func(v *eventstore.IntegrityError) error {
				c.invalidate(v.Sequence) // the next read finds it and refuses, as before
				return nil
			}))
			c.setLive(false)
		}
		if ctx.Err() != nil {
			break
		}
		log.Warn("intake: following the policy subject failed; reading the policy in force from the log until it is back", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return ctx.Err()
}
