package eventstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Group commit (Config.GroupCommit). On a one-node server that fsyncs
// every write, the stream stores one message per fsync: appends from many
// withdrawals in flight queue behind one another on the disk, however
// many are sent at once. An atomic batch is synced once for all its
// messages, so appends that arrive while the stream is busy are gathered
// and sent as one batch, each keeping its own expectation
// (Nats-Expected-Last-Subject-Sequence on its first message, which the
// server checks message by message inside a batch).
//
// What an append sees does not change: its messages land together or not
// at all, after the position it expected or not at all. A batch is all or
// nothing, so one member the server refuses (a conflict, a duplicate id)
// refuses the whole batch; every member is then sent again alone and gets
// its own answer, exactly what it would have had without the batch. A
// batch whose outcome is unknown (no ack) leaves each member's outcome
// unknown, and each append settles its own by reading its subject back,
// as for a single send (see Append).
//
// One send is on the wire at a time per store: the first append of a quiet
// store goes at once, alone; appends arriving meanwhile wait for it and go
// next, all together: alone and side by side when they are few (an atomic
// batch costs the server a few milliseconds of its own on file storage),
// as one batch from gcMinBatch messages on.
type groupCommit struct {
	direct func(ctx context.Context, msgs []*nats.Msg) (pubAck, error) // one append's own send
	batch  func(ctx context.Context, msgs []*nats.Msg) (batchAck, error)
	// minBatch is how many waiting messages make one batch (gcMinBatch).
	minBatch int

	mu      sync.Mutex
	busy    bool // a send is on the wire
	waiting []*gcMember

	onWait func() // tests: called once an append waits (under mu)
}

// gcMember is one append waiting for its turn.
type gcMember struct {
	ctx  context.Context
	msgs []*nats.Msg
	done chan gcResult // buffered: the sender never blocks on it
}

type gcResult struct {
	ack pubAck
	err error
}

const (
	// gcMinBatch is how many waiting messages make one atomic batch by
	// default; fewer go alone, side by side. Measured on a 2-core VM with
	// fsync always: 2,149 single publishes/s from 16 publishers, 2,495
	// messages/s in batches of 16, 8,340 in batches of 64.
	gcMinBatch = 16
	// gcMaxBatch bounds one batch (nats-server's default limit is 1,000).
	gcMaxBatch = 256
	// gcBatchTimeout bounds the wait for a batch's ack, gcSendTimeout a
	// send alone's, whatever its caller's deadline: the store's other
	// appends wait for them.
	gcBatchTimeout = 5 * time.Second
	gcSendTimeout  = 5 * time.Second
)

// send sends one prepared append, directly when the store is quiet,
// otherwise with the appends waiting beside it.
func (g *groupCommit) send(ctx context.Context, msgs []*nats.Msg) (pubAck, error) {
	g.mu.Lock()
	if !g.busy {
		g.busy = true
		g.mu.Unlock()
		ack, err := g.sendCapped(ctx, msgs)
		g.next()
		return ack, err
	}
	m := &gcMember{ctx: ctx, msgs: msgs, done: make(chan gcResult, 1)}
	g.waiting = append(g.waiting, m)
	if g.onWait != nil {
		g.onWait()
	}
	g.mu.Unlock()
	select {
	case r := <-m.done:
		return r.ack, r.err
	case <-ctx.Done():
	}
	// Given up while waiting: if not taken yet, it leaves the queue and
	// nothing was sent. Once taken, its messages may be on the wire, and
	// only the answer (bounded by gcSendTimeout) says what became of them.
	g.mu.Lock()
	for i, w := range g.waiting {
		if w == m {
			g.waiting = append(g.waiting[:i], g.waiting[i+1:]...)
			g.mu.Unlock()
			return pubAck{}, &notSentError{err: context.Cause(ctx)}
		}
	}
	g.mu.Unlock()
	r := <-m.done
	return r.ack, r.err
}

// sendCapped is a send alone bounded by gcSendTimeout whatever the
// caller's deadline: the store's other appends wait for it. A send cut
// short there has an unknown outcome, which the append settles by reading
// back.
func (g *groupCommit) sendCapped(ctx context.Context, msgs []*nats.Msg) (pubAck, error) {
	ctx, cancel := context.WithTimeout(ctx, gcSendTimeout)
	defer cancel()
	return g.direct(ctx, msgs)
}

// next hands the wire to what waits, or marks the store quiet.
func (g *groupCommit) next() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.waiting) == 0 {
		g.busy = false
		return
	}
	go g.flush()
}

// flush sends what waits (up to gcMaxBatch messages), then hands on.
func (g *groupCommit) flush() {
	g.mu.Lock()
	var take, left []*gcMember
	n := 0
	subjects := make(map[string]struct{}, len(g.waiting))
	for _, m := range g.waiting {
		// A second append to a subject already in the batch expects what
		// the first changes: it would refuse the whole batch. It waits for
		// the next round (where it will most likely conflict, alone).
		_, twice := subjects[m.msgs[0].Subject]
		if twice || (n > 0 && n+len(m.msgs) > gcMaxBatch) {
			left = append(left, m)
			continue
		}
		subjects[m.msgs[0].Subject] = struct{}{}
		take = append(take, m)
		n += len(m.msgs)
	}
	clear(g.waiting)
	g.waiting = left
	g.mu.Unlock()

	if n >= g.minBatch && len(take) > 1 {
		g.sendBatch(take, n)
	} else {
		g.sendAlone(take, false)
	}
	g.next()
}

// sendAlone sends each member on its own, side by side, and waits for all.
// afterBatch marks the answers of members a refused batch held: a
// conflict then is read back before it is believed (see
// aloneAfterBatchError).
func (g *groupCommit) sendAlone(take []*gcMember, afterBatch bool) {
	var wg sync.WaitGroup
	for _, m := range take {
		wg.Go(func() {
			ack, err := g.sendCapped(m.ctx, m.msgs)
			if err != nil && afterBatch {
				err = &aloneAfterBatchError{err: err}
			}
			m.done <- gcResult{ack, err}
		})
	}
	wg.Wait()
}

// aloneAfterBatchError is the answer to an append sent alone after a batch
// holding it was refused. A refused batch stores nothing where the server
// syncs it whole (the group commit's one-node, fsync-always case), but a
// store committing a batch message by message can answer an error after
// storing some: so a conflict on this send is settled by reading back,
// never assumed.
type aloneAfterBatchError struct{ err error }

func (e *aloneAfterBatchError) Error() string { return e.err.Error() }
func (e *aloneAfterBatchError) Unwrap() error { return e.err }

// sendBatch sends the members as one atomic batch of n messages.
func (g *groupCommit) sendBatch(take []*gcMember, n int) {
	msgs := make([]*nats.Msg, 0, n)
	for _, m := range take {
		msgs = append(msgs, m.msgs...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), gcBatchTimeout)
	ack, err := g.batch(ctx, msgs)
	cancel()
	var refused *batchRefusedError
	var notSent *notSentError
	switch {
	case errors.As(err, &refused) || errors.As(err, &notSent):
		// Nothing was stored (refused by the server, or never committed,
		// one member's message being too large, say): each member on its
		// own gets the answer it would have had without the batch.
		g.sendAlone(take, errors.As(err, &refused))
	case err == nil && ack.Duplicate:
		err = fmt.Errorf("%w: a duplicate ack for a batch of %d", ErrUnexpectedAck, n)
		fallthrough
	case err != nil:
		for _, m := range take {
			m.done <- gcResult{err: err} // unknown: each append reads its subject back
		}
	default:
		// The batch is contiguous and in member order, ending at ack.Sequence.
		seq := ack.Sequence - uint64(n)
		for _, m := range take {
			seq += uint64(len(m.msgs))
			m.done <- gcResult{ack: pubAck{Sequence: seq}}
		}
	}
}
