package eventstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"
)

// DefaultTailSize is how many of the log's latest records a Tail holds.
const DefaultTailSize = 4096

// A Tail reads the end of the log once for every follower in this process.
//
// Each follower of the whole log (a projection, the notification
// publisher, the history index) used to read it through an ordered
// consumer of its own: the server delivered every event once per follower,
// and every follower verified its tag and decoded its headers again. With
// a Tail in use (Store.UseTail), an unfiltered Subscribe is served from the
// records the Tail has read and verified, held in a ring of the latest
// ones; a follower behind the ring catches up on a consumer of its own
// and then joins the ring. What a follower is handed is exactly what its
// own consumer would have handed it: every record from its position on, in
// order, none twice, quarantined ones to its OnViolation. Records are
// shared between followers: a handler must not change a Record's Payload.
//
// A filtered Subscribe keeps its own consumer (the server filters; a rare
// type need not wake for every event), and so does every Subscribe once
// the Tail has stopped.
type Tail struct {
	s   *Store
	log *slog.Logger

	mu sync.Mutex
	// ring holds the latest records, oldest at ring[head]; it holds every
	// record of the log with lo <= Sequence <= hi.
	ring   []tailRecord
	head   int
	n      int
	lo, hi uint64
	// running is false once Run has returned: Subscribe then reads on its
	// own.
	running bool
	// wake is closed when records are added or the Tail stops; nil while
	// nobody waits.
	wake chan struct{}
}

// tailRecord is one record as the Tail read it, or the integrity error that
// stands in for it.
type tailRecord struct {
	seq uint64
	rec Record
	err error
}

// NewTail returns a Tail holding up to size records (DefaultTailSize when
// size <= 0), positioned at the log's current end: Run reads what is
// appended from now on, and a follower that starts behind reads the rest
// itself. log (nil: none) hears of a consumer that failed.
func NewTail(ctx context.Context, s *Store, size int, log *slog.Logger) (*Tail, error) {
	if size <= 0 {
		size = DefaultTailSize
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	last, err := s.LastSequence(ctx)
	if err != nil {
		return nil, fmt.Errorf("eventstore: tail: %w", err)
	}
	return &Tail{s: s, log: log, ring: make([]tailRecord, size), lo: last + 1, hi: last, running: true}, nil
}

// UseTail makes every unfiltered Subscribe on s read through t, which may
// read through another Store on the same stream (with the same registry and
// sealer). Call it before the followers start, and run t. Reads the Tail
// cannot serve, and violations, stay with s.
func (s *Store) UseTail(t *Tail) { s.tail.Store(t) }

// tailRetry is the pause before the Tail opens a new consumer after its
// consumer failed (the server went away: every read is failing then).
const tailRetry = time.Second

// tailGiveUp is how many consumers in a row may fail without reading a
// record before the Tail stops: its followers then read on their own, and
// their reads fail, and say so, as they would without a Tail.
const tailGiveUp = 3

// Run reads the log from the Tail's position until ctx is done, opening a
// new ordered consumer where the last one stopped whenever it fails. When
// Run returns (ctx done, or tailGiveUp consumers in a row read nothing),
// followers reading through the Tail go on with a consumer of their own.
func (t *Tail) Run(ctx context.Context) error {
	defer t.stop()
	failed := 0
	for {
		t.mu.Lock()
		before := t.hi
		t.mu.Unlock()
		err := t.follow(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		t.mu.Lock()
		moved := t.hi != before
		t.mu.Unlock()
		if moved {
			failed = 0
		}
		if failed++; failed >= tailGiveUp {
			t.log.Error("eventstore: tail stopped; its followers read on their own", "err", err)
			return fmt.Errorf("eventstore: tail: %d consumers in a row failed: %w", failed, err)
		}
		t.log.Warn("eventstore: tail consumer failed; opening another", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(tailRetry):
		}
	}
}

// follow reads on one ordered consumer from the record after hi, adding
// each record, or the integrity error that stands in for it, to the ring.
func (t *Tail) follow(ctx context.Context) error {
	t.mu.Lock()
	from := t.hi + 1
	t.mu.Unlock()
	return t.s.subscribe(ctx, from, "", func(r Record) error {
		t.add(tailRecord{seq: r.Sequence, rec: r})
		return nil
	}, OnViolation(func(v *IntegrityError) error {
		t.add(tailRecord{seq: v.Sequence, err: v})
		return nil
	}))
}

// add puts r, the record after hi, in the ring, dropping the oldest when
// the ring is full.
func (t *Tail) add(r tailRecord) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r.seq <= t.hi {
		return // an ordered consumer never redelivers; be sure anyway
	}
	if t.n == len(t.ring) {
		t.lo = t.ring[t.head].seq + 1
		t.ring[t.head] = tailRecord{}
		t.head = (t.head + 1) % len(t.ring)
		t.n--
	}
	t.ring[(t.head+t.n)%len(t.ring)] = r
	t.n++
	t.hi = r.seq
	t.wakeLocked()
}

func (t *Tail) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.running = false
	t.wakeLocked()
}

func (t *Tail) wakeLocked() {
	if t.wake != nil {
		close(t.wake)
		t.wake = nil
	}
}

// tailRead is what the ring can do for a follower at next.
type tailRead int

const (
	tailServed  tailRead = iota // records from next on are in the batch
	tailWait                    // nothing after next yet: wait on the channel
	tailBehind                  // next was dropped from the ring: read it yourself
	tailStopped                 // the Tail stopped: read on your own from next
)

// tailBatch is how many records a follower takes from the ring at a time.
const tailBatch = 256

// since copies into batch the records from next on (at most tailBatch).
func (t *Tail) since(next uint64, batch []tailRecord) ([]tailRecord, tailRead, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case !t.running:
		return batch, tailStopped, nil
	case next < t.lo:
		return batch, tailBehind, nil
	case next > t.hi:
		if t.wake == nil {
			t.wake = make(chan struct{})
		}
		return batch, tailWait, t.wake
	}
	// The ring is in sequence order; skip what the follower has had.
	at := func(i int) *tailRecord { return &t.ring[(t.head+i)%len(t.ring)] }
	i := sort.Search(t.n, func(i int) bool { return at(i).seq >= next })
	for ; i < t.n && len(batch) < tailBatch; i++ {
		batch = append(batch, *at(i))
	}
	return batch, tailServed, nil
}

// subscribe is s.Subscribe(ctx, fromSeq, "", handle, opts...) served from
// the Tail.
func (t *Tail) subscribe(ctx context.Context, s *Store, fromSeq uint64, handle func(Record) error, opts ...ReadOption) error {
	o := readOpts(opts)
	next := max(fromSeq, 1)
	var batch []tailRecord
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var state tailRead
		var wake <-chan struct{}
		batch, state, wake = t.since(next, batch[:0])
		switch state {
		case tailStopped:
			return s.subscribe(ctx, next, "", handle, opts...)
		case tailBehind:
			// On a consumer of its own until it is back where the ring
			// holds the log: one consumer for the whole catch-up.
			var err error
			if next, err = t.catchUp(ctx, s, next, handle, o); err != nil {
				return err
			}
			continue
		case tailWait:
			select {
			case <-wake:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		for i := range batch {
			r := &batch[i]
			var err error
			if r.err != nil {
				err = s.quarantine(o, r.err)
			} else {
				err = handle(r.rec)
			}
			if err != nil {
				return err
			}
			next = r.seq + 1
			batch[i] = tailRecord{} // the ring keeps it; the batch need not
		}
	}
}

// errCaughtUp ends a catch-up read.
var errCaughtUp = errors.New("eventstore: tail: caught up")

// catchUp reads from next on through an ordered consumer of s until the
// ring holds the record after the last one handled (or the Tail stopped),
// and returns the sequence to go on from.
func (t *Tail) catchUp(ctx context.Context, s *Store, next uint64, handle func(Record) error, o readOptions) (uint64, error) {
	done := func(seq uint64) error {
		next = seq + 1
		if t.serves(next) {
			return errCaughtUp
		}
		return nil
	}
	err := s.subscribe(ctx, next, "", func(r Record) error {
		if err := handle(r); err != nil {
			return err
		}
		return done(r.Sequence)
	}, OnViolation(func(v *IntegrityError) error {
		// s.subscribe has noted it; the caller's choice decides.
		if o.onViolation == nil {
			return v
		}
		if err := o.onViolation(v); err != nil {
			return err
		}
		return done(v.Sequence)
	}))
	if errors.Is(err, errCaughtUp) {
		return next, nil
	}
	return next, err
}

// serves reports whether a follower at next can be served by the Tail from
// now on (the ring still holds next, or the Tail has stopped and the
// follower must go on alone anyway).
func (t *Tail) serves(next uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return next >= t.lo || !t.running
}
