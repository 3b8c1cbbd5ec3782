package sagas

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
)

// MaxDecideAttempts bounds the load → decide → append loop of a command
// that lost an optimistic-concurrency race: each lost race means the stream
// moved, so the command is decided again against the new state.
const MaxDecideAttempts = 16

// ErrTooMuchContention is returned when a command lost MaxDecideAttempts
// races in a row. Nothing was appended by this command.
var ErrTooMuchContention = errors.New("sagas: too much contention on the stream; retry")

// Repo loads aggregates from the event store, decides commands against them
// and appends the result with optimistic concurrency. It is the one path by
// which anything in weir changes state. A failure of the store or the
// cluster comes out of it as an UnavailableError (errors.Is(err,
// ErrUnavailable)), so callers need not know NATS to tell "retry later"
// from "refused".
//
// Two ways to append:
//   - Update* (intake, reservation, operators): on a conflict, reload and
//     decide again, bounded. Within this process, commands on one stream are
//     serialised by a keyed mutex so they do not burn retries on each other;
//     across processes the store's expectation is the only fence.
//   - AppendWithdrawalAt (the broadcast saga): decide against the state the
//     worker holds and append at the position it last saw; a conflict is
//     returned as is, so a stale worker stops before any network call.
//
// Reads go to any replica (direct get), which may lag the stream leader.
// A decision that appends is fenced by the append's expectation, so a
// stale read there costs a conflict and a retry. A decision that appends
// nothing — a refusal ("no reservation", "insufficient funds") or a replay
// — has no such fence, so Update* confirm it on the leader's view before
// returning it (see update).
type Repo struct {
	store *eventstore.Store
	locks keyedMutex
	// read and readLatest load an aggregate's records after a position
	// (the zero Position: all of them; see eventstore.LoadSince); tests
	// replace read to play a lagging replica.
	read, readLatest readFunc
	// snaps holds the folded state of accounts and of the policy at the
	// position it covers, so a load folds only the newer events.
	snaps snapshots
	// durable, when set, keeps account snapshots in the KV bucket for
	// other processes and restarts (UseDurableSnapshots).
	durable *DurableSnapshots
}

// UseDurableSnapshots makes the Repo read account snapshots from d when it
// holds none in memory, and hand d one every d.Every() events of an
// account. Call it before the Repo is used; d.Run writes them.
func (r *Repo) UseDurableSnapshots(d *DurableSnapshots) { r.durable = d }

// remember keeps state at pos as the in-memory snapshot and, every so many
// events, queues it for the bucket. durable is the version of the bucket's
// snapshot state was folded from (0: none), which is in the bucket already.
func (r *Repo) remember(typ, id string, state any, pos eventstore.Position, durable uint64) {
	durableAt, kept := r.snaps.put(typ, id, state, pos, durable)
	if !kept || r.durable == nil || !durableKind(typ) || !r.durable.due(durableAt, pos.Version) {
		return
	}
	if a, ok := state.(aggregate.Account); ok && r.durable.enqueue(typ, id, a, pos) {
		r.snaps.markDurable(typ, id, pos.Version)
	}
}

type readFunc func(context.Context, eventstore.Key, eventstore.Position) ([]eventstore.Record, eventstore.Position, error)

// NewRepo returns a Repo over store (opened with eventlog.NewRegistry()).
func NewRepo(store *eventstore.Store) *Repo {
	return &Repo{
		store: store,
		read: func(ctx context.Context, k eventstore.Key, since eventstore.Position) ([]eventstore.Record, eventstore.Position, error) {
			return store.LoadSince(ctx, k, since, false)
		},
		readLatest: func(ctx context.Context, k eventstore.Key, since eventstore.Position) ([]eventstore.Record, eventstore.Position, error) {
			return store.LoadSince(ctx, k, since, true)
		},
		snaps: snapshots{max: DefaultSnapshots},
	}
}

// Store returns the underlying event store.
func (r *Repo) Store() *eventstore.Store { return r.store }

// kind describes one aggregate type to the generic load/update code.
type kind[S any, E interface{ EventType() string }] struct {
	typ    string
	decode func([]eventstore.Record) ([]E, error)
	evolve func(S, E) S
	// setVersion stamps the store's aggregate version on the folded state
	// (nil when the state has no such field).
	setVersion func(S, uint64) S
	// evolveRecorded, when set, folds an event with the server's record
	// time of its stored message (a withdrawal's claim is bounded by it).
	evolveRecorded func(S, E, time.Time) S
	// foldFrom, when set, folds events onto a state held in a snapshot
	// (copying it once, not once per event); a kind without it is not
	// snapshotted and is read from its first event every time.
	foldFrom func(S, []E) S
}

var (
	withdrawalKind = kind[aggregate.Withdrawal, aggregate.Event]{
		typ:    eventlog.TypeWithdrawal,
		decode: eventlog.WithdrawalEvents,
		evolve: aggregate.Evolve,
		setVersion: func(w aggregate.Withdrawal, v uint64) aggregate.Withdrawal {
			w.Version = v
			return w
		},
		evolveRecorded: aggregate.EvolveRecorded,
	}
	accountKind = kind[aggregate.Account, aggregate.AccountEvent]{
		typ:      eventlog.TypeAccount,
		decode:   eventlog.AccountEvents,
		evolve:   aggregate.EvolveAccount,
		foldFrom: aggregate.FoldAccountFrom,
	}
	policyKind = kind[aggregate.PolicyState, aggregate.PolicyEvent]{
		typ:    eventlog.TypePolicy,
		decode: eventlog.PolicyEvents,
		evolve: aggregate.EvolvePolicy,
		foldFrom: func(s aggregate.PolicyState, events []aggregate.PolicyEvent) aggregate.PolicyState {
			for _, e := range events {
				s = aggregate.EvolvePolicy(s, e)
			}
			return s
		},
	}
)

// load reads and folds one aggregate; latest reads the last event through
// the stream leader (Store.LoadLatest) instead of any replica. A kind that
// is snapshotted starts from the snapshot this process holds and folds
// only the events after it; the subject's last event is read either way,
// so the state returned is as fresh as a full load's, and a snapshot the
// log does not pass through is dropped and the aggregate folded from its
// first event.
func load[S any, E interface{ EventType() string }](ctx context.Context, r *Repo, k kind[S, E], id string, latest bool) (S, eventstore.Position, error) {
	if k.foldFrom != nil {
		if snap, ok := r.snaps.get(k.typ, id); ok {
			s, pos, err := loadFrom(ctx, r, k, id, latest, snap.state.(S), snap.pos, 0)
			if !errors.Is(err, eventstore.ErrSnapshotMismatch) {
				return s, pos, err
			}
			r.snaps.drop(k.typ, id)
		} else if r.durable != nil && durableKind(k.typ) {
			if a, spos, ok := r.durable.read(ctx, k.typ, id); ok {
				if st, ok := any(a).(S); ok {
					// Held as this process's snapshot only once the log
					// passes through it (loadFrom keeps the fold), marked
					// as in the bucket so that the fold does not write the
					// same one back.
					s, pos, err := loadFrom(ctx, r, k, id, latest, st, spos, spos.Version)
					if !errors.Is(err, eventstore.ErrSnapshotMismatch) {
						return s, pos, err
					}
					r.durable.ignore(k.typ, id, "log", err)
				}
			}
		}
	}
	var zero S
	return loadFrom(ctx, r, k, id, latest, zero, eventstore.Position{}, 0)
}

// loadFrom folds the events after since onto s, the state at since;
// durable is the version of the bucket's snapshot s is (0: it is none).
func loadFrom[S any, E interface{ EventType() string }](ctx context.Context, r *Repo, k kind[S, E], id string, latest bool, s S, since eventstore.Position, durable uint64) (S, eventstore.Position, error) {
	var zero S
	read := r.read
	if latest {
		read = r.readLatest
	}
	recs, pos, err := read(ctx, eventstore.Key{Type: k.typ, ID: id}, since)
	if errors.Is(err, eventstore.ErrSnapshotMismatch) {
		return zero, pos, err
	}
	if errors.Is(err, eventstore.ErrIntegrity) {
		return zero, pos, integrityViolation(k.typ, id, err)
	}
	if err != nil {
		return zero, pos, unavailable(fmt.Errorf("load %s %s: %w", k.typ, id, err))
	}
	events, err := k.decode(recs)
	if err != nil {
		// Verified (or unsealed) but refused by the domain: no state can be
		// folded from it, so nothing may be decided on it either.
		return zero, pos, integrityViolation(k.typ, id, err)
	}
	if len(events) != len(recs) {
		return zero, pos, fmt.Errorf("load %s %s: %d records decoded to %d events", k.typ, id, len(recs), len(events))
	}
	switch {
	case k.foldFrom != nil:
		s = k.foldFrom(s, events)
		if pos.Sequence != 0 {
			r.remember(k.typ, id, s, pos, durable)
		}
	default:
		for i, e := range events {
			if k.evolveRecorded != nil {
				s = k.evolveRecorded(s, e, recs[i].Time)
			} else {
				s = k.evolve(s, e)
			}
		}
	}
	if k.setVersion != nil {
		s = k.setVersion(s, pos.Version)
	}
	return s, pos, nil
}

// appendAt appends events decided against the state at pos and returns the
// state with them folded in.
func appendAt[S any, E interface{ EventType() string }](ctx context.Context, r *Repo, k kind[S, E], id string, s S, pos eventstore.Position, events []E) (S, eventstore.Position, error) {
	if len(events) == 0 {
		return s, pos, nil
	}
	out := make([]eventstore.Event, len(events))
	for i, e := range events {
		out[i] = eventstore.Event{ID: eventstore.NewEventID(), Type: e.EventType(), Data: e}
	}
	newPos, err := r.store.Append(ctx, eventstore.Key{Type: k.typ, ID: id}, pos, out...)
	if err != nil {
		return s, pos, unavailable(fmt.Errorf("append %s %s: %w", k.typ, id, err))
	}
	if k.foldFrom != nil {
		s = k.foldFrom(s, events)
		r.remember(k.typ, id, s, newPos, 0)
	} else {
		for _, e := range events {
			s = k.evolve(s, e)
		}
	}
	if k.setVersion != nil {
		s = k.setVersion(s, newPos.Version)
	}
	return s, newPos, nil
}

// loaded is an aggregate state the caller already holds and the position
// it was read at, so update can decide on it without reading it again.
type loaded[S any] struct {
	state S
	pos   eventstore.Position
}

// update runs load → decide → append, deciding again after each lost race.
// With from, the first decision is made on the caller's state (for
// example the empty state, for a creation) and the stream is read only
// after a lost race.
func update[S any, E interface{ EventType() string }](ctx context.Context, r *Repo, k kind[S, E], id string, from *loaded[S], decide func(S) ([]E, error)) (S, eventstore.Position, []E, error) {
	unlock := r.locks.lock(k.typ + "." + id)
	defer unlock()
	var zero S
	for attempt := range MaxDecideAttempts {
		var s S
		var pos eventstore.Position
		var err error
		if attempt == 0 && from == nil && k.foldFrom != nil {
			// Decide first on the snapshot this process holds, as a held
			// state: an append is fenced by the position, so one made
			// on a snapshot another process has overtaken conflicts and
			// is decided again on the log; a refusal is confirmed below.
			if snap, ok := r.snaps.get(k.typ, id); ok {
				from = &loaded[S]{state: snap.state.(S), pos: snap.pos}
			}
		}
		if attempt == 0 && from != nil {
			s, pos = from.state, from.pos
		} else if s, pos, err = load(ctx, r, k, id, false); err != nil {
			return zero, pos, nil, err
		}
		events, err := decide(s)
		if err != nil || len(events) == 0 {
			// Nothing will be appended, so no expectation will catch a
			// stale read: confirm the decision on the leader's view, and
			// decide again if the stream was further along there.
			latest, lpos, lerr := load(ctx, r, k, id, true)
			if lerr != nil {
				return zero, pos, nil, lerr
			}
			if lpos.Sequence != pos.Sequence {
				s, pos = latest, lpos
				events, err = decide(s)
			}
		}
		if err != nil {
			return s, pos, nil, err
		}
		s, pos, err = appendAt(ctx, r, k, id, s, pos, events)
		if errors.Is(err, eventstore.ErrConflict) {
			continue // another writer moved the stream: decide again
		}
		if err != nil {
			return zero, pos, nil, err
		}
		return s, pos, events, nil
	}
	return zero, eventstore.Position{}, nil, unavailable(fmt.Errorf("%s %s: %w", k.typ, id, ErrTooMuchContention))
}

// Withdrawal loads one withdrawal; a withdrawal never requested has
// State == aggregate.StateNone.
func (r *Repo) Withdrawal(ctx context.Context, id string) (aggregate.Withdrawal, eventstore.Position, error) {
	return load(ctx, r, withdrawalKind, id, false)
}

// WithdrawalSince returns a withdrawal folded from known, its state at
// position at (a projector's fold, say), and the events after it: one read
// of the subject's last event when nothing came since. If the log does not
// pass through at, the withdrawal is folded from its first event instead.
func (r *Repo) WithdrawalSince(ctx context.Context, id string, known aggregate.Withdrawal, at eventstore.Position) (aggregate.Withdrawal, eventstore.Position, error) {
	w, pos, err := loadFrom(ctx, r, withdrawalKind, id, false, known, at, 0)
	if errors.Is(err, eventstore.ErrSnapshotMismatch) {
		return r.Withdrawal(ctx, id)
	}
	return w, pos, err
}

// WithdrawalRecords returns a withdrawal's raw records (for its event list
// and for audit).
func (r *Repo) WithdrawalRecords(ctx context.Context, id string) ([]eventstore.Record, error) {
	recs, _, err := r.store.Load(ctx, eventstore.Key{Type: eventlog.TypeWithdrawal, ID: id})
	if errors.Is(err, eventstore.ErrIntegrity) {
		return nil, integrityViolation(eventlog.TypeWithdrawal, id, err)
	}
	return recs, unavailable(err)
}

// UpdateWithdrawal decides the command cmd(w) returns against the current
// state and appends the result, deciding again after a lost race.
func (r *Repo) UpdateWithdrawal(ctx context.Context, id string, cmd func(aggregate.Withdrawal) (aggregate.Command, error)) (aggregate.Withdrawal, []aggregate.Event, error) {
	w, _, events, err := r.updateWithdrawal(ctx, id, nil, cmd)
	return w, events, err
}

// UpdateWithdrawalFrom is UpdateWithdrawal deciding first on a state the
// caller holds (w at pos; the zero values for a creation, which is an
// append to an empty subject), so the common case costs no read. A lost
// race falls back to reading the stream and deciding again.
func (r *Repo) UpdateWithdrawalFrom(ctx context.Context, id string, w aggregate.Withdrawal, pos eventstore.Position, cmd func(aggregate.Withdrawal) (aggregate.Command, error)) (aggregate.Withdrawal, eventstore.Position, []aggregate.Event, error) {
	return r.updateWithdrawal(ctx, id, &loaded[aggregate.Withdrawal]{state: w, pos: pos}, cmd)
}

func (r *Repo) updateWithdrawal(ctx context.Context, id string, from *loaded[aggregate.Withdrawal], cmd func(aggregate.Withdrawal) (aggregate.Command, error)) (aggregate.Withdrawal, eventstore.Position, []aggregate.Event, error) {
	return update(ctx, r, withdrawalKind, id, from, func(w aggregate.Withdrawal) ([]aggregate.Event, error) {
		c, err := cmd(w)
		if err != nil {
			return nil, err
		}
		return aggregate.Decide(w, c)
	})
}

// AppendWithdrawalAt decides cmd against w, which the caller loaded at pos,
// and appends at exactly that position. A conflict (errors.Is
// eventstore.ErrConflict) means the stream moved on without this caller: it
// must stop, not retry blindly. Returns the new state and position.
func (r *Repo) AppendWithdrawalAt(ctx context.Context, w aggregate.Withdrawal, pos eventstore.Position, cmd aggregate.Command) (aggregate.Withdrawal, eventstore.Position, []aggregate.Event, error) {
	events, err := aggregate.Decide(w, cmd)
	if err != nil {
		return w, pos, nil, err
	}
	w2, pos2, err := appendAt(ctx, r, withdrawalKind, w.ID, w, pos, events)
	return w2, pos2, events, err
}

// Account loads one account (the zero Account when it has no events).
func (r *Repo) Account(ctx context.Context, id string) (aggregate.Account, eventstore.Position, error) {
	return load(ctx, r, accountKind, id, false)
}

// UpdateAccount decides an account command against the current state and
// appends the result, deciding again after a lost race.
func (r *Repo) UpdateAccount(ctx context.Context, id string, cmd aggregate.AccountCommand) (aggregate.Account, []aggregate.AccountEvent, error) {
	a, _, events, err := update(ctx, r, accountKind, id, nil, func(a aggregate.Account) ([]aggregate.AccountEvent, error) {
		return aggregate.DecideAccount(a, cmd)
	})
	return a, events, err
}

// Policy loads the policy stream (the zero PolicyState when none was set).
func (r *Repo) Policy(ctx context.Context) (aggregate.PolicyState, eventstore.Position, error) {
	return load(ctx, r, policyKind, eventlog.PolicyStreamID, false)
}

// PolicyInForce is the approval policy in force now: the latest version on
// the policy stream, or aggregate.DefaultPolicy (version 0) before any was
// stored. Intake and workers both ask here, so an approval is given and
// re-checked against the same rule. It may be answered by a replica that
// lags; PolicyInForceLatest is not.
func (r *Repo) PolicyInForce(ctx context.Context) (aggregate.Policy, error) {
	return r.policyInForce(ctx, false)
}

// PolicyInForceLatest is PolicyInForce read through the stream leader: the
// re-check right before signing or settling uses it, because no append on
// the policy stream follows that would reveal a stale read.
func (r *Repo) PolicyInForceLatest(ctx context.Context) (aggregate.Policy, error) {
	return r.policyInForce(ctx, true)
}

func (r *Repo) policyInForce(ctx context.Context, latest bool) (aggregate.Policy, error) {
	s, _, err := load(ctx, r, policyKind, eventlog.PolicyStreamID, latest)
	if err != nil {
		return aggregate.Policy{}, fmt.Errorf("load policy: %w", err)
	}
	return policyInForce(s), nil
}

// policyInForce is s's policy, or aggregate.DefaultPolicy before any was
// stored.
func policyInForce(s aggregate.PolicyState) aggregate.Policy {
	if s.Policy.Version == 0 {
		return aggregate.DefaultPolicy()
	}
	return s.Policy
}

// SetPolicy proposes a policy, in force at once under a quorum of 1 (no
// event when it says the same as the one in force or the open proposal).
func (r *Repo) SetPolicy(ctx context.Context, c aggregate.SetPolicy) (aggregate.PolicyState, error) {
	s, _, err := r.updatePolicy(ctx, c)
	return s, err
}

// updatePolicy decides c (a proposal, or an operator's approval of the
// open proposal) on the policy stream and appends it. The position
// is the stream's after the write (or where the decision was made, when
// nothing was appended), so the writer can tell a read behind its own
// write (policyCache.wrote).
func (r *Repo) updatePolicy(ctx context.Context, c aggregate.PolicyCommand) (aggregate.PolicyState, eventstore.Position, error) {
	s, pos, _, err := update(ctx, r, policyKind, eventlog.PolicyStreamID, nil, func(s aggregate.PolicyState) ([]aggregate.PolicyEvent, error) {
		return aggregate.DecidePolicy(s, c)
	})
	return s, pos, err
}

// keyedMutex serialises work per key within one process. Entries are
// reference-counted so the map does not grow with every key ever seen.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	mu   sync.Mutex
	refs int
}

func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedEntry{}
	}
	e := k.m[key]
	if e == nil {
		e = &keyedEntry{}
		k.m[key] = e
	}
	e.refs++
	k.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		e.refs--
		if e.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}

// AccountRecords returns an account's raw records (for its statement).
func (r *Repo) AccountRecords(ctx context.Context, id string) ([]eventstore.Record, error) {
	recs, _, err := r.store.Load(ctx, eventstore.Key{Type: eventlog.TypeAccount, ID: id})
	if errors.Is(err, eventstore.ErrIntegrity) {
		return nil, integrityViolation(eventlog.TypeAccount, id, err)
	}
	return recs, unavailable(err)
}

// AccountWithHistory folds an account from its first event keeping every
// reservation, released and settled ones too (aggregate.FoldAccount), for
// statements, audits and tests. Decisions use Account, whose state keeps
// only the reservations still held.
func (r *Repo) AccountWithHistory(ctx context.Context, id string) (aggregate.Account, eventstore.Position, error) {
	recs, pos, err := r.store.Load(ctx, eventstore.Key{Type: eventlog.TypeAccount, ID: id})
	if errors.Is(err, eventstore.ErrIntegrity) {
		return aggregate.Account{}, pos, integrityViolation(eventlog.TypeAccount, id, err)
	}
	if err != nil {
		return aggregate.Account{}, pos, unavailable(fmt.Errorf("load %s %s: %w", eventlog.TypeAccount, id, err))
	}
	events, err := eventlog.AccountEvents(recs)
	if err != nil {
		return aggregate.Account{}, pos, integrityViolation(eventlog.TypeAccount, id, err)
	}
	return aggregate.FoldAccount(events), pos, nil
}
