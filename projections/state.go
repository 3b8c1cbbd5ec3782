package projections

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
)

// ErrOutOfOrder means a record does not follow the last one this projection
// folded for its aggregate: an earlier event is missing, or the record
// belongs to a withdrawal that already ended. Folding it would make a view
// silently and permanently wrong, so the projector stops instead.
var ErrOutOfOrder = errors.New("projections: record out of order for its aggregate")

// ApplyError is a record the projection could not fold (undecodable payload,
// out of order). It stops the projector: the views are left as they were
// before the record, and Err reports it.
type ApplyError struct {
	Sequence uint64
	Key      eventstore.Key
	Type     string
	Err      error
}

func (e *ApplyError) Error() string {
	return fmt.Sprintf("projections: cannot fold seq %d (%s %s/%s): %v", e.Sequence, e.Type, e.Key.Type, e.Key.ID, e.Err)
}

func (e *ApplyError) Unwrap() error { return e.Err }

// state is everything the views read, and the position in the log it
// reflects. The Projector owns it and guards it with its mutex; apply is the
// only writer.
type state struct {
	applied     uint64 // stream sequence of the last record folded (or skipped as not ours)
	lastEventID string // that record's event id: ties a checkpoint to one log

	withdrawals map[string]openWithdrawal // non-terminal withdrawals by id
	// byState indexes withdrawals by state so that a queue costs its own
	// length, not the number of open withdrawals.
	byState  map[aggregate.State]map[string]struct{}
	accounts map[string]accountEntry
	// ended counts withdrawals that reached each terminal state. Terminal
	// withdrawals leave the queues (and memory); nothing can follow their
	// last event, so the projection needs nothing else of them.
	ended map[aggregate.State]uint64
	// quarantined aggregates are left out of every view (see Quarantined).
	quarantined map[eventstore.Key]Quarantined
	// onQuarantine is told of each aggregate newly quarantined.
	onQuarantine func(Quarantined)

	compactAfter int // see Options.CompactAccountsAfter
	log          *slog.Logger
}

type openWithdrawal struct {
	w          aggregate.Withdrawal
	stateSince time.Time // event time of the event that moved it into w.State
	envelopeAt time.Time // event time of the current envelope's write-ahead
	seq        uint64    // stream sequence of its last event
}

type accountEntry struct {
	a aggregate.Account
	// closed counts reservations released or settled since the account was
	// last compacted (see compactAccount).
	closed int
}

func newState(compactAfter int, log *slog.Logger) *state {
	return &state{
		withdrawals:  map[string]openWithdrawal{},
		byState:      map[aggregate.State]map[string]struct{}{},
		accounts:     map[string]accountEntry{},
		ended:        map[aggregate.State]uint64{},
		quarantined:  map[eventstore.Key]Quarantined{},
		compactAfter: compactAfter,
		log:          log,
	}
}

// apply folds one record. It reports whether the record moved the state
// forward; a record at or below the applied sequence (a redelivery) is
// skipped and changes nothing. Records of aggregate types the views do not
// use (policy) only advance the position.
func (s *state) apply(rec eventstore.Record) (bool, error) {
	if rec.Sequence <= s.applied {
		return false, nil
	}
	if _, q := s.quarantined[rec.Key]; q {
		// Nothing after a bad event of an aggregate can be folded onto it.
		s.applied, s.lastEventID = rec.Sequence, rec.EventID
		return true, nil
	}
	var err error
	switch rec.Key.Type {
	case eventlog.TypeWithdrawal:
		err = s.applyWithdrawal(rec)
	case eventlog.TypeAccount:
		err = s.applyAccount(rec)
	}
	var undecodable errUndecodable
	if errors.As(err, &undecodable) {
		s.quarantine(Quarantined{Type: rec.Key.Type, ID: rec.Key.ID, Sequence: rec.Sequence,
			EventID: rec.EventID, Event: rec.Type, Reason: undecodable.Error()})
		return true, nil
	}
	if err != nil {
		return false, &ApplyError{Sequence: rec.Sequence, Key: rec.Key, Type: rec.Type, Err: err}
	}
	s.applied, s.lastEventID = rec.Sequence, rec.EventID
	return true, nil
}

// nextVersion checks a record's aggregate version against the version
// folded so far. The stream sequence already filters redelivery; this is the
// second fence, per aggregate, so that a record delivered out of order or
// twice under another sequence is never folded twice or over a gap.
func nextVersion(have uint64, rec eventstore.Record) (duplicate bool, err error) {
	switch v := rec.AggregateVersion; {
	case v <= have:
		return true, nil
	case v != have+1:
		return false, fmt.Errorf("%w: %s/%s has version %d folded, record carries version %d", ErrOutOfOrder, rec.Key.Type, rec.Key.ID, have, v)
	}
	return false, nil
}

func (s *state) applyWithdrawal(rec eventstore.Record) error {
	e, err := aggregate.DecodeWithdrawalEvent(rec.Type, rec.Payload)
	if err != nil {
		return errUndecodable{err}
	}
	id := rec.Key.ID
	o, open := s.withdrawals[id]
	if !open && rec.AggregateVersion > 1 {
		// Ended withdrawals are forgotten, which is safe only because no
		// event can follow a terminal one. A later version of an unknown
		// withdrawal therefore means an earlier event never reached us.
		return fmt.Errorf("%w: withdrawal %s is not open here, record carries version %d", ErrOutOfOrder, id, rec.AggregateVersion)
	}
	dup, err := nextVersion(o.w.Version, rec)
	if err != nil {
		return err
	}
	if dup {
		s.log.Warn("projections: skipped a withdrawal event already folded",
			"id", id, "version", rec.AggregateVersion, "seq", rec.Sequence)
		return nil
	}
	prev := o.w.State
	if open {
		s.unindex(prev, id)
	}
	o.w = aggregate.EvolveRecorded(o.w, e, rec.Time) // a claim is bounded by the server's record time
	o.w.Version = rec.AggregateVersion
	o.seq = rec.Sequence
	if o.w.State != prev {
		o.stateSince = e.OccurredAt()
	}
	switch e.(type) {
	case aggregate.EnvelopeBuilt, aggregate.Rebuilt:
		o.envelopeAt = e.OccurredAt()
	}
	if o.w.Terminal() {
		delete(s.withdrawals, id)
		s.ended[o.w.State]++
		return nil
	}
	s.withdrawals[id] = o
	s.index(o.w.State, id)
	return nil
}

func (s *state) index(st aggregate.State, id string) {
	set := s.byState[st]
	if set == nil {
		set = map[string]struct{}{}
		s.byState[st] = set
	}
	set[id] = struct{}{}
}

func (s *state) unindex(st aggregate.State, id string) {
	delete(s.byState[st], id)
}

func (s *state) applyAccount(rec eventstore.Record) error {
	e, err := aggregate.DecodeAccountEvent(rec.Type, rec.Payload)
	if err != nil {
		return errUndecodable{err}
	}
	id := rec.Key.ID
	ent := s.accounts[id]
	dup, err := nextVersion(ent.a.Version, rec)
	if err != nil {
		return err
	}
	if dup {
		s.log.Warn("projections: skipped an account event already folded",
			"account", id, "version", rec.AggregateVersion, "seq", rec.Sequence)
		return nil
	}
	ent.a = aggregate.EvolveAccount(ent.a, e)
	ent.a.Version = rec.AggregateVersion
	switch e.(type) {
	case aggregate.AccountReleased, aggregate.AccountSettled:
		ent.closed++
	}
	if s.compactAfter > 0 && ent.closed >= s.compactAfter {
		ent = s.compactAccount(id, ent)
	}
	s.accounts[id] = ent
	return nil
}

// compactAccount drops closed reservations from an account. An Account keeps
// every reservation it ever had, and EvolveAccount copies them all on every
// event, so a busy account would make each of its events cost its whole
// history. Closed reservations take no further events and the balance views
// do not read them, so the account is rebuilt from its balances and held
// reservations (the same path a checkpoint restore takes).
func (s *state) compactAccount(id string, ent accountEntry) accountEntry {
	a, err := restoreAccount(accountSnapshot(id, ent.a))
	if err != nil {
		// The uncompacted account is still right, only slower; say so and
		// try again after another batch of closures.
		s.log.Warn("projections: account compaction failed; keeping the full account", "account", id, "err", err)
		ent.closed = 0
		return ent
	}
	return accountEntry{a: a}
}

// Snapshot is every view of a projection as one deterministic, serialisable
// value: withdrawals and accounts sorted by id, reservations by time then
// withdrawal id. Two projections that folded the same log up to the same
// sequence have equal Snapshots (and equal JSON encodings of them), however
// they got there: live, restarted from a checkpoint, or rebuilt from zero.
// It is also the checkpoint's payload.
type Snapshot struct {
	Applied     uint64                     `json:"applied"`
	LastEventID string                     `json:"last_event_id"`
	Withdrawals []WithdrawalEntry          `json:"withdrawals"`
	Accounts    []AccountEntry             `json:"accounts"`
	Ended       map[aggregate.State]uint64 `json:"ended"`
	Quarantined []Quarantined              `json:"quarantined,omitempty"`
}

// WithdrawalEntry is one open (non-terminal) withdrawal with what the
// projection knows about it beyond its folded state.
type WithdrawalEntry struct {
	Withdrawal aggregate.Withdrawal `json:"withdrawal"`
	StateSince time.Time            `json:"state_since"`
	EnvelopeAt time.Time            `json:"envelope_at"`
	Sequence   uint64               `json:"seq"`
}

// AccountEntry is one account's balances and the reservations still held on
// it: what the balance view reads and what folding its future events needs
// (a release or settlement names a held reservation). Closed reservations are
// history and are left out.
type AccountEntry struct {
	ID        string                  `json:"id"`
	Version   uint64                  `json:"version"`
	Credited  aggregate.Amount        `json:"credited"`
	Available aggregate.Amount        `json:"available"`
	Reserved  aggregate.Amount        `json:"reserved"`
	Settled   aggregate.Amount        `json:"settled"`
	Held      []aggregate.Reservation `json:"held"`
	// Pending are the credits waiting for a second operator.
	Pending []aggregate.PendingCredit `json:"pending,omitempty"`
}

// View is the account as the API shows it.
func (e AccountEntry) View() aggregate.AccountView {
	return aggregate.AccountView{ID: e.ID, Available: e.Available.String(), Reserved: e.Reserved.String(), Settled: e.Settled.String()}
}

func (s *state) snapshot() Snapshot {
	out := Snapshot{
		Applied:     s.applied,
		LastEventID: s.lastEventID,
		Withdrawals: make([]WithdrawalEntry, 0, len(s.withdrawals)),
		Accounts:    make([]AccountEntry, 0, len(s.accounts)),
		Ended:       maps.Clone(s.ended),
	}
	for _, o := range s.withdrawals {
		out.Withdrawals = append(out.Withdrawals, WithdrawalEntry{
			Withdrawal: cloneWithdrawal(o.w), StateSince: o.stateSince, EnvelopeAt: o.envelopeAt, Sequence: o.seq,
		})
	}
	slices.SortFunc(out.Withdrawals, func(x, y WithdrawalEntry) int { return cmp.Compare(x.Withdrawal.ID, y.Withdrawal.ID) })
	for id, ent := range s.accounts {
		out.Accounts = append(out.Accounts, accountSnapshot(id, ent.a))
	}
	slices.SortFunc(out.Accounts, func(x, y AccountEntry) int { return cmp.Compare(x.ID, y.ID) })
	if len(s.quarantined) > 0 {
		out.Quarantined = s.quarantinedList()
	}
	return out
}

func accountSnapshot(id string, a aggregate.Account) AccountEntry {
	held := make([]aggregate.Reservation, 0)
	for _, r := range a.Reservations() {
		if r.Status == aggregate.ReservationHeld {
			held = append(held, r)
		}
	}
	return AccountEntry{
		ID: id, Version: a.Version,
		Credited: a.Credited(), Available: a.Available(), Reserved: a.Reserved(), Settled: a.Settled(),
		Held: held, Pending: a.PendingCredits(),
	}
}

// stateFromSnapshot rebuilds a state from a checkpoint's snapshot.
func stateFromSnapshot(snap Snapshot, compactAfter int, log *slog.Logger) (*state, error) {
	s := newState(compactAfter, log)
	s.applied, s.lastEventID = snap.Applied, snap.LastEventID
	for _, e := range snap.Withdrawals {
		w := e.Withdrawal
		switch {
		case w.ID == "":
			return nil, errors.New("a withdrawal without an id")
		case w.Terminal():
			return nil, fmt.Errorf("withdrawal %s is %s: terminal withdrawals are not kept", w.ID, w.State)
		case e.Sequence > snap.Applied:
			return nil, fmt.Errorf("withdrawal %s was last changed at seq %d, after the snapshot's %d", w.ID, e.Sequence, snap.Applied)
		}
		if _, dup := s.withdrawals[w.ID]; dup {
			return nil, fmt.Errorf("withdrawal %s appears twice", w.ID)
		}
		s.withdrawals[w.ID] = openWithdrawal{w: w, stateSince: e.StateSince, envelopeAt: e.EnvelopeAt, seq: e.Sequence}
		s.index(w.State, w.ID)
	}
	for _, e := range snap.Accounts {
		if _, dup := s.accounts[e.ID]; dup {
			return nil, fmt.Errorf("account %s appears twice", e.ID)
		}
		a, err := restoreAccount(e)
		if err != nil {
			return nil, err
		}
		s.accounts[e.ID] = accountEntry{a: a}
	}
	for _, q := range snap.Quarantined {
		k := eventstore.Key{Type: q.Type, ID: q.ID}
		if _, dup := s.quarantined[k]; dup || q.Sequence > snap.Applied {
			return nil, fmt.Errorf("quarantine of %s/%s at seq %d repeated or after the snapshot", q.Type, q.ID, q.Sequence)
		}
		if _, open := s.withdrawals[q.ID]; open && q.Type == eventlog.TypeWithdrawal {
			return nil, fmt.Errorf("withdrawal %s is both open and quarantined", q.ID)
		}
		if _, ok := s.accounts[q.ID]; ok && q.Type == eventlog.TypeAccount {
			return nil, fmt.Errorf("account %s is both shown and quarantined", q.ID)
		}
		s.quarantined[k] = q
	}
	for st, n := range snap.Ended {
		if !st.IsTerminal() {
			return nil, fmt.Errorf("ended count for non-terminal state %q", st)
		}
		s.ended[st] = n
	}
	return s, nil
}

// Identifiers of the synthetic events restoreAccount folds. Both contain a
// space, which the account decider refuses in credit ids and withdrawal ids,
// so they can never collide with a real credit or reservation.
const (
	restoredCreditID   = "restored credits"
	restoredSettlement = "restored settlements"
)

// restoreAccount rebuilds an aggregate.Account that folds future events
// exactly as the original would, from an AccountEntry. aggregate.Account has
// no exported constructor or encoding, so it is made the only way the domain
// allows: by folding events — one credit of everything credited, one
// reservation settled at once for everything settled, then each held
// reservation as it was recorded. The result is checked against the entry;
// any difference is an error, never a guess.
func restoreAccount(e AccountEntry) (aggregate.Account, error) {
	epoch := time.Unix(0, 0).UTC()
	var evs []aggregate.AccountEvent
	if e.Credited.Sign() > 0 {
		evs = append(evs, aggregate.AccountCredited{Account: e.ID, CreditID: restoredCreditID, Amount: e.Credited, At: epoch})
	}
	if e.Settled.Sign() > 0 {
		evs = append(evs,
			aggregate.AccountReserved{Account: e.ID, WithdrawalID: restoredSettlement, Amount: e.Settled, Day: epoch.Format(time.DateOnly), At: epoch},
			aggregate.AccountSettled{Account: e.ID, WithdrawalID: restoredSettlement, Amount: e.Settled, At: epoch},
		)
	}
	for _, r := range e.Held {
		evs = append(evs, aggregate.AccountReserved{Account: e.ID, WithdrawalID: r.WithdrawalID, Amount: r.Amount, Day: r.Day, At: r.At})
	}
	for _, p := range e.Pending {
		evs = append(evs, aggregate.AccountCreditRequested{Account: e.ID, CreditID: p.CreditID, Amount: p.Amount, By: p.By, At: p.At})
	}
	a := aggregate.FoldAccount(evs)
	a.ID, a.Version = e.ID, e.Version
	if err := a.CheckInvariants(); err != nil {
		return aggregate.Account{}, fmt.Errorf("account %s: %w", e.ID, err)
	}
	got := accountSnapshot(e.ID, a)
	if !got.Credited.Equal(e.Credited) || !got.Available.Equal(e.Available) ||
		!got.Reserved.Equal(e.Reserved) || !got.Settled.Equal(e.Settled) {
		return aggregate.Account{}, fmt.Errorf("account %s: restored balances %+v differ from the snapshot's %+v", e.ID, got.View(), e.View())
	}
	if len(got.Pending) != len(e.Pending) {
		return aggregate.Account{}, fmt.Errorf("account %s: restored %d credits waiting for review, the snapshot has %d", e.ID, len(got.Pending), len(e.Pending))
	}
	if !slices.EqualFunc(got.Held, e.Held, sameReservation) {
		return aggregate.Account{}, fmt.Errorf("account %s: restored %d held reservations, the snapshot has %d (or they differ)", e.ID, len(got.Held), len(e.Held))
	}
	return a, nil
}

func sameReservation(x, y aggregate.Reservation) bool {
	return x.WithdrawalID == y.WithdrawalID && x.Amount.Equal(y.Amount) && x.Day == y.Day &&
		x.Status == y.Status && x.At.Equal(y.At) && x.ClosedAt.Equal(y.ClosedAt) && x.Reason == y.Reason
}

// cloneWithdrawal copies the slices and pointers inside a Withdrawal so a
// caller holding a view cannot reach the projection's state.
func cloneWithdrawal(w aggregate.Withdrawal) aggregate.Withdrawal {
	w.Approvals = slices.Clone(w.Approvals)
	w.Retired = slices.Clone(w.Retired)
	w.Receipts = slices.Clone(w.Receipts)
	w.AppliedRules = slices.Clone(w.AppliedRules)
	if w.WindowSum != nil {
		sum := *w.WindowSum
		w.WindowSum = &sum
	}
	if w.Invalidation != nil {
		inv := *w.Invalidation
		w.Invalidation = &inv
	}
	return w
}
