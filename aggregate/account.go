package aggregate

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"
)

// Account event types: stable names, stored in the log.
const (
	EventAccountCredited = "account.credited"
	EventAccountReserved = "account.reserved"
	EventAccountReleased = "account.released"
	EventAccountSettled  = "account.settled"
)

// AccountAsset is what accounts hold. There is one rail today, so an account
// is single-asset and commands do not name the asset; amounts are pinned to
// its scale.
var AccountAsset = USDT

// AccountCommand is something asked of an account.
type AccountCommand interface{ isAccountCommand() }

// Credit adds money, idempotent by CreditID: the same id with the same
// amount is a replay, with another amount an idempotency_conflict.
type Credit struct {
	Account  string
	CreditID string
	Amount   Amount
	At       time.Time
	By       string // the principal who made it (recorded, not part of the idempotency key)
	// ReviewAbove, when greater than zero, is the amount above which the
	// credit waits for a second operator (see ApproveCredit).
	ReviewAbove Amount
}

// InternalCreditPrefix starts the credit id of every internal transfer's
// credit ("internal:<withdrawal id>"). Operator credit ids may not use it.
const InternalCreditPrefix = "internal:"

// CreditInternal credits the destination account of an internal transfer,
// idempotent by WithdrawalID. Its credits live apart from operator credits
// (their own key, the withdrawal id), so no operator credit id can make an
// internal transfer fail or swallow it.
type CreditInternal struct {
	Account      string
	WithdrawalID string
	Amount       Amount
	At           time.Time
}

// Reserve holds a withdrawal's amount, idempotent by WithdrawalID. Refused
// with insufficient_funds when the available balance is short, and with
// daily_limit when the amounts reserved on the UTC day of At (and not
// released) plus this one would exceed DailyLimit. A zero DailyLimit means no
// limit; it is configuration, so the caller passes it in.
type Reserve struct {
	Account      string
	WithdrawalID string
	Amount       Amount
	DailyLimit   Amount
	At           time.Time
	// RequestedAt is the withdrawal's requested_at, recorded on the
	// reservation: a compact state that forgot reservations requested up
	// to some time knows a later withdrawal's cannot be among them
	// (Account.MayHaveForgotten). Zero: unknown.
	RequestedAt time.Time
}

// Release gives a held reservation back (the withdrawal was rejected or
// failed). Idempotent; refused for a settled reservation or none at all.
type Release struct {
	Account      string
	WithdrawalID string
	Reason       string
	At           time.Time
}

// Settle turns a held reservation into money that has left (the withdrawal
// was confirmed). Idempotent; refused for a released reservation or none.
type Settle struct {
	Account      string
	WithdrawalID string
	At           time.Time
}

func (Credit) isAccountCommand()         {}
func (CreditInternal) isAccountCommand() {}
func (Reserve) isAccountCommand()        {}
func (Release) isAccountCommand()        {}
func (Settle) isAccountCommand()         {}

// AccountEvent is an event of an account stream.
type AccountEvent interface {
	EventType() string
	OccurredAt() time.Time
	isAccountEvent()
}

// AccountCredited adds Amount to the available balance. WithdrawalID is set
// on the credit of an internal transfer (CreditID is then
// InternalCreditPrefix + WithdrawalID).
type AccountCredited struct {
	Account      string    `json:"account"`
	CreditID     string    `json:"credit_id"`
	WithdrawalID string    `json:"withdrawal_id,omitempty"`
	Amount       Amount    `json:"amount"`
	At           time.Time `json:"at"`
	By           string    `json:"by,omitempty"`          // the principal who made an operator credit; empty on internal transfers and older events
	ApprovedBy   string    `json:"approved_by,omitempty"` // the second operator, for a credit that waited for review
}

// creditKey is where a credit is kept: operator credits by their id,
// internal transfers by their withdrawal id under a key no operator credit
// id can take (credit ids are tokens without spaces).
func (ev AccountCredited) creditKey() string {
	if ev.WithdrawalID != "" {
		return internalCreditKey(ev.WithdrawalID)
	}
	return ev.CreditID
}

func internalCreditKey(withdrawalID string) string { return "internal transfer " + withdrawalID }

// InternalCredit returns the amount credited by the internal transfer of
// withdrawal id, if it was recorded.
func (a Account) InternalCredit(withdrawalID string) (Amount, bool) {
	v, ok := a.credits[internalCreditKey(withdrawalID)]
	return v, ok
}

// AccountReserved moves Amount from available to reserved. Day is the UTC
// day it counts against; DailyLimit the limit that was in force (for audit).
type AccountReserved struct {
	Account      string    `json:"account"`
	WithdrawalID string    `json:"withdrawal_id"`
	Amount       Amount    `json:"amount"`
	Day          string    `json:"day"`
	DailyLimit   Amount    `json:"daily_limit"`
	At           time.Time `json:"at"`
	RequestedAt  time.Time `json:"requested_at,omitzero"` // the withdrawal's; absent on older events
}

// AccountReleased moves a held reservation back to available.
type AccountReleased struct {
	Account      string    `json:"account"`
	WithdrawalID string    `json:"withdrawal_id"`
	Amount       Amount    `json:"amount"`
	Reason       string    `json:"reason"`
	At           time.Time `json:"at"`
}

// AccountSettled moves a held reservation to settled (the money left).
type AccountSettled struct {
	Account      string    `json:"account"`
	WithdrawalID string    `json:"withdrawal_id"`
	Amount       Amount    `json:"amount"`
	At           time.Time `json:"at"`
}

func (AccountCredited) EventType() string { return EventAccountCredited }
func (AccountReserved) EventType() string { return EventAccountReserved }
func (AccountReleased) EventType() string { return EventAccountReleased }
func (AccountSettled) EventType() string  { return EventAccountSettled }

func (e AccountCredited) OccurredAt() time.Time { return e.At }
func (e AccountReserved) OccurredAt() time.Time { return e.At }
func (e AccountReleased) OccurredAt() time.Time { return e.At }
func (e AccountSettled) OccurredAt() time.Time  { return e.At }

func (AccountCredited) isAccountEvent() {}
func (AccountReserved) isAccountEvent() {}
func (AccountReleased) isAccountEvent() {}
func (AccountSettled) isAccountEvent()  {}

// ReservationStatus is where a reservation is.
type ReservationStatus string

const (
	ReservationHeld     ReservationStatus = "held"
	ReservationReleased ReservationStatus = "released"
	ReservationSettled  ReservationStatus = "settled"
)

// Reservation is the hold of one withdrawal's amount.
type Reservation struct {
	WithdrawalID string            `json:"withdrawal_id"`
	Amount       Amount            `json:"amount"`
	Day          string            `json:"day"`
	Status       ReservationStatus `json:"status"`
	At           time.Time         `json:"at"`
	ClosedAt     time.Time         `json:"closed_at"`
	Reason       string            `json:"reason,omitempty"`
	RequestedAt  time.Time         `json:"requested_at,omitzero"` // the withdrawal's, when the reservation recorded it
}

// Account is the state of one account: the fold of its stream. Invariant:
// Available + Reserved + Settled == Credited (the sum of all credits), none
// negative. The maps inside are private and copied by EvolveAccount before
// any change, so a state held by a caller never changes under it.
type Account struct {
	ID      string `json:"id"`
	Version uint64 `json:"version"` // events folded

	credited, available, reserved, settled Amount

	credits      map[string]Amount        // credit id → amount
	pending      map[string]PendingCredit // credit id → credit waiting for review
	approvedBy   map[string]string        // credit id → the second operator who approved it
	reservations reservationSet           // withdrawal id → reservation (only held ones when compact)
	daily        map[string]Amount        // UTC day → reserved that day, not released

	// compact drops a reservation once it is released or settled, so the
	// state does not grow with the account's history (FoldAccountFrom, the
	// live fold). Whether a withdrawal was reserved once its reservation
	// is closed is then answered by the withdrawal's own stream
	// (sagas.Repo.ReserveFor). FoldAccount, ReplayAccount and
	// AuditAccount keep every reservation (statements, audit).
	compact bool
	// forgotten is the latest requested_at of the withdrawals whose
	// reservations a compact state dropped; forgottenUnknown is set once
	// one without requested_at was dropped (see MayHaveForgotten).
	forgotten        time.Time
	forgottenUnknown bool

	recent recentLog // the reservations of the last VelocityWindow (velocity.go)
}

// Available is the money that can be reserved.
func (a Account) Available() Amount { return a.available.pin() }

// Reserved is the money held for withdrawals in progress.
func (a Account) Reserved() Amount { return a.reserved.pin() }

// Settled is the money that has left.
func (a Account) Settled() Amount { return a.settled.pin() }

// Credited is the sum of all credits.
func (a Account) Credited() Amount { return a.credited.pin() }

// pin expresses an account amount at the account asset's scale, so that a
// zero balance reads as 0 at 6 decimals like any other.
func (x Amount) pin() Amount {
	if p, err := x.In(AccountAsset); err == nil {
		return p
	}
	return x
}

// CreditAmount returns the amount of credit id, if it was recorded. For
// "internal:<withdrawal id>" it is the internal transfer's credit
// (InternalCredit) when there is one.
func (a Account) CreditAmount(id string) (Amount, bool) {
	if wid, ok := strings.CutPrefix(id, InternalCreditPrefix); ok {
		if v, ok := a.InternalCredit(wid); ok {
			return v, true
		}
	}
	v, ok := a.credits[id]
	return v, ok
}

// Compact reports whether closed reservations are dropped from a (see
// FoldAccountFrom): Reservation then answers only for held ones.
func (a Account) Compact() bool { return a.compact }

// Reservation returns the reservation of a withdrawal, if any (on a
// compact state, only a held one).
func (a Account) Reservation(withdrawalID string) (Reservation, bool) {
	return a.reservations.get(withdrawalID)
}

// Reservations lists all reservations ordered by time, then withdrawal id.
func (a Account) Reservations() []Reservation {
	out := make([]Reservation, 0, a.reservations.len())
	for _, r := range a.reservations.all() {
		out = append(out, r)
	}
	slices.SortFunc(out, func(x, y Reservation) int {
		if c := x.At.Compare(y.At); c != 0 {
			return c
		}
		return cmp.Compare(x.WithdrawalID, y.WithdrawalID)
	})
	return out
}

// ReservedOn is what counts against the daily limit on t's UTC day: amounts
// reserved that day and not released (held or settled).
func (a Account) ReservedOn(t time.Time) Amount { return a.daily[utcDay(t)].pin() }

func utcDay(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// AccountView is the API's account JSON.
type AccountView struct {
	ID        string `json:"id"`
	Available string `json:"available"`
	Reserved  string `json:"reserved"`
	Settled   string `json:"settled"`
}

// View renders the account for the API (canonical decimal strings).
func (a Account) View() AccountView {
	return AccountView{ID: a.ID, Available: a.Available().String(), Reserved: a.Reserved().String(), Settled: a.Settled().String()}
}

// DecideAccount returns the events command c causes on account a: one event,
// none for a replay, or a typed *Error. a is not modified.
func DecideAccount(a Account, c AccountCommand) ([]AccountEvent, error) {
	e, err := decideAccount(a, c)
	if err != nil || e == nil {
		return nil, err
	}
	if err := checkAccountEvent(a, e); err != nil {
		return nil, err
	}
	return []AccountEvent{e}, nil
}

func checkAccountID(a Account, id string) error {
	if err := ValidateAccountID(id); err != nil {
		return err
	}
	if a.ID != "" && a.ID != id {
		return newError(CodeInvalidAccount, "account", "command for account %s decided on account %s", id, a.ID)
	}
	return nil
}

func checkWithdrawalID(id string) error {
	if c, err := ParseOperationID(id); err != nil || c != id {
		return newError(CodeInvalidOperationID, "withdrawal_id", "must be a canonical operation id")
	}
	return nil
}

func decideAccount(a Account, c AccountCommand) (AccountEvent, error) {
	switch c := c.(type) {
	case Credit:
		if err := checkAccountID(a, c.Account); err != nil {
			return nil, err
		}
		if err := checkToken(CodeInvalidCommand, "credit_id", c.CreditID); err != nil {
			return nil, err
		}
		if strings.HasPrefix(c.CreditID, InternalCreditPrefix) {
			return nil, newError(CodeInvalidCommand, "credit_id", "the prefix %q is reserved for internal transfers", InternalCreditPrefix)
		}
		amount, err := AccountAsset.admit("amount", c.Amount)
		if err != nil {
			return nil, err
		}
		at, err := checkAt(c.At)
		if err != nil {
			return nil, err
		}
		if prev, ok := a.credits[c.CreditID]; ok {
			if prev.Equal(amount) {
				return nil, nil
			}
			return nil, newError(CodeIdempotencyConflict, "credit_id", "credit %s was already recorded with amount %s", c.CreditID, prev)
		}
		if p, ok := a.pending[c.CreditID]; ok {
			if p.Amount.Equal(amount) {
				return nil, nil // already waiting for review
			}
			return nil, newError(CodeIdempotencyConflict, "credit_id", "credit %s is already waiting for review with amount %s", c.CreditID, p.Amount)
		}
		if err := a.checkCeiling(amount); err != nil {
			return nil, err
		}
		if c.ReviewAbove.Sign() > 0 && amount.Cmp(c.ReviewAbove) > 0 {
			if err := checkToken(CodeInvalidCommand, "by", c.By); err != nil {
				return nil, err
			}
			return AccountCreditRequested{Account: c.Account, CreditID: c.CreditID, Amount: amount, By: c.By, ReviewAbove: c.ReviewAbove, At: at}, nil
		}
		return AccountCredited{Account: c.Account, CreditID: c.CreditID, Amount: amount, At: at, By: c.By}, nil

	case ApproveCredit:
		return decideApproveCredit(a, c)

	case CreditInternal:
		if err := checkAccountID(a, c.Account); err != nil {
			return nil, err
		}
		if err := checkWithdrawalID(c.WithdrawalID); err != nil {
			return nil, err
		}
		amount, err := AccountAsset.admit("amount", c.Amount)
		if err != nil {
			return nil, err
		}
		at, err := checkAt(c.At)
		if err != nil {
			return nil, err
		}
		if prev, ok := a.credits[internalCreditKey(c.WithdrawalID)]; ok {
			if prev.Equal(amount) {
				return nil, nil
			}
			return nil, newError(CodeIdempotencyConflict, "withdrawal_id", "internal transfer %s was already credited with %s", c.WithdrawalID, prev)
		}
		return AccountCredited{Account: c.Account, CreditID: InternalCreditPrefix + c.WithdrawalID, WithdrawalID: c.WithdrawalID, Amount: amount, At: at}, nil

	case Reserve:
		if err := checkAccountID(a, c.Account); err != nil {
			return nil, err
		}
		if err := checkWithdrawalID(c.WithdrawalID); err != nil {
			return nil, err
		}
		amount, err := AccountAsset.admit("amount", c.Amount)
		if err != nil {
			return nil, err
		}
		if c.DailyLimit.Sign() < 0 {
			return nil, newError(CodeInvalidCommand, "daily_limit", "negative")
		}
		at, err := checkAt(c.At)
		if err != nil {
			return nil, err
		}
		if r, ok := a.reservations.get(c.WithdrawalID); ok {
			// Decided once per withdrawal, whatever happened to it since;
			// the withdrawal's own stream says what it means now.
			if r.Amount.Equal(amount) {
				return nil, nil
			}
			return nil, newError(CodeIdempotencyConflict, "withdrawal_id", "withdrawal %s already reserved %s", c.WithdrawalID, r.Amount)
		}
		if a.available.Cmp(amount) < 0 {
			return nil, newError(CodeInsufficientFunds, "amount", "available %s, needed %s", a.Available(), amount)
		}
		day := utcDay(at)
		if c.DailyLimit.Sign() > 0 && a.daily[day].Add(amount).Cmp(c.DailyLimit) > 0 {
			return nil, newError(CodeDailyLimit, "amount", "%s already reserved on %s; with %s it would exceed the daily limit of %s",
				a.daily[day].pin(), day, amount, c.DailyLimit)
		}
		return AccountReserved{Account: c.Account, WithdrawalID: c.WithdrawalID, Amount: amount, Day: day, DailyLimit: c.DailyLimit, At: at,
			RequestedAt: c.RequestedAt.UTC()}, nil

	case Release:
		if err := checkAccountID(a, c.Account); err != nil {
			return nil, err
		}
		if err := checkWithdrawalID(c.WithdrawalID); err != nil {
			return nil, err
		}
		if err := checkToken(CodeInvalidCommand, "reason", c.Reason); err != nil {
			return nil, err
		}
		at, err := checkAt(c.At)
		if err != nil {
			return nil, err
		}
		r, ok := a.reservations.get(c.WithdrawalID)
		switch {
		case !ok:
			return nil, newError(CodeNoReservation, "withdrawal_id", "no reservation for withdrawal %s", c.WithdrawalID)
		case r.Status == ReservationReleased:
			return nil, nil
		case r.Status == ReservationSettled:
			return nil, newError(CodeInvalidTransition, "withdrawal_id", "the reservation of %s was settled; settled money cannot be released", c.WithdrawalID)
		}
		return AccountReleased{Account: c.Account, WithdrawalID: c.WithdrawalID, Amount: r.Amount, Reason: c.Reason, At: at}, nil

	case Settle:
		if err := checkAccountID(a, c.Account); err != nil {
			return nil, err
		}
		if err := checkWithdrawalID(c.WithdrawalID); err != nil {
			return nil, err
		}
		at, err := checkAt(c.At)
		if err != nil {
			return nil, err
		}
		r, ok := a.reservations.get(c.WithdrawalID)
		switch {
		case !ok:
			return nil, newError(CodeNoReservation, "withdrawal_id", "no reservation for withdrawal %s", c.WithdrawalID)
		case r.Status == ReservationSettled:
			return nil, nil
		case r.Status == ReservationReleased:
			return nil, newError(CodeInvalidTransition, "withdrawal_id", "the reservation of %s was released; it cannot be settled", c.WithdrawalID)
		}
		return AccountSettled{Account: c.Account, WithdrawalID: c.WithdrawalID, Amount: r.Amount, At: at}, nil
	}
	return nil, newError(CodeInvalidCommand, "", "unknown account command %T", c)
}

// checkAccountEvent is every rule an account event must satisfy against the
// state it is applied to (Decide runs it on what it emits, AuditAccount on
// what is stored).
func checkAccountEvent(a Account, e AccountEvent) error {
	if e == nil {
		return newError(CodeUnknownEvent, "", "nil event")
	}
	if e.OccurredAt().IsZero() {
		return newError(CodeInvalidEvent, "at", "missing")
	}
	held := func(wid string, amount Amount) error {
		r, ok := a.reservations.get(wid)
		if !ok {
			return newError(CodeNoReservation, "withdrawal_id", "no reservation for withdrawal %s", wid)
		}
		if r.Status != ReservationHeld {
			return newError(CodeInvalidTransition, "withdrawal_id", "reservation of %s is %s", wid, r.Status)
		}
		if !r.Amount.Equal(amount) {
			return newError(CodeInvalidEvent, "amount", "reservation of %s is %s, not %s", wid, r.Amount, amount)
		}
		return nil
	}
	var account string
	switch ev := e.(type) {
	case AccountCredited:
		account = ev.Account
		if _, ok := a.credits[ev.creditKey()]; ok || ev.CreditID == "" {
			return newError(CodeIdempotencyConflict, "credit_id", "credit %q already recorded", ev.CreditID)
		}
		if ev.WithdrawalID != "" && ev.CreditID != InternalCreditPrefix+ev.WithdrawalID {
			return newError(CodeInvalidEvent, "credit_id", "an internal transfer's credit id is %s<withdrawal id>", InternalCreditPrefix)
		}
		if ev.Amount.Sign() <= 0 {
			return newError(CodeInvalidAmount, "amount", "must be greater than zero")
		}
		if err := checkReviewedCredit(a, ev); err != nil {
			return err
		}
	case AccountCreditRequested:
		account = ev.Account
		if err := checkReviewedCredit(a, ev); err != nil {
			return err
		}
	case AccountReserved:
		account = ev.Account
		if _, ok := a.reservations.get(ev.WithdrawalID); ok || ev.WithdrawalID == "" {
			return newError(CodeIdempotencyConflict, "withdrawal_id", "withdrawal %q already reserved", ev.WithdrawalID)
		}
		if ev.Amount.Sign() <= 0 {
			return newError(CodeInvalidAmount, "amount", "must be greater than zero")
		}
		if a.available.Cmp(ev.Amount) < 0 {
			return newError(CodeInsufficientFunds, "amount", "available %s, needed %s", a.Available(), ev.Amount)
		}
		if ev.Day != utcDay(ev.At) {
			return newError(CodeInvalidEvent, "day", "is not the UTC day of at")
		}
		if ev.DailyLimit.Sign() > 0 && a.daily[ev.Day].Add(ev.Amount).Cmp(ev.DailyLimit) > 0 {
			return newError(CodeDailyLimit, "amount", "exceeds the daily limit of %s", ev.DailyLimit)
		}
	case AccountReleased:
		account = ev.Account
		if err := held(ev.WithdrawalID, ev.Amount); err != nil {
			return err
		}
	case AccountSettled:
		account = ev.Account
		if err := held(ev.WithdrawalID, ev.Amount); err != nil {
			return err
		}
	default:
		return newError(CodeUnknownEvent, "", "unknown account event value %T", e)
	}
	if a.ID != "" && account != a.ID {
		return newError(CodeInvalidAccount, "account", "event for %s on account %s", account, a.ID)
	}
	return nil
}

// owned returns a copy of a whose maps belong to the copy alone.
func (a Account) owned() Account {
	a.credits = cloneOrMake(a.credits)
	a.pending = cloneOrMake(a.pending)
	a.approvedBy = cloneOrMake(a.approvedBy)
	a.reservations = a.reservations.shared()
	a.daily = cloneOrMake(a.daily)
	a.recent = a.recent.owned()
	return a
}

func cloneOrMake[V any](m map[string]V) map[string]V {
	if m == nil {
		return map[string]V{}
	}
	return maps.Clone(m)
}

// EvolveAccount applies one event and returns the new state; a is left
// untouched (its maps are copied first). An event that could not have been
// decided from a is ignored apart from the version; AuditAccount reports it.
func EvolveAccount(a Account, e AccountEvent) Account {
	a = a.owned()
	apply(&a, e)
	return a
}

// FoldAccount replays an account stream from its start. It copies nothing
// per event: the maps it grows were made by it.
func FoldAccount(events []AccountEvent) Account {
	a := Account{}.owned()
	for _, e := range events {
		apply(&a, e)
	}
	return a
}

// FoldAccountFrom applies events in order to a, a state folded earlier
// (a snapshot), copying a's maps once rather than once per event; a is
// left untouched. The result is compact: a reservation is dropped once it
// is released or settled, so the state's size follows the withdrawals in
// flight and the credits, not the account's history.
func FoldAccountFrom(a Account, events []AccountEvent) Account {
	a = a.owned()
	if !a.compact {
		a.compact = true
		for id, r := range a.reservations.all() {
			if r.Status != ReservationHeld {
				a.forget(r)
				a.reservations.del(id)
			}
		}
	}
	for _, e := range events {
		apply(&a, e)
	}
	return a
}

// AuditAccount replays a stream, checking every event and the invariants
// after each; the error names the first bad event (1-based).
func AuditAccount(events []AccountEvent) (Account, error) {
	a := Account{}.owned()
	for i, e := range events {
		if err := checkAccountEvent(a, e); err != nil {
			return a, newError(CodeInvalidEvent, "", "event %d (%s): %v", i+1, e.EventType(), err)
		}
		apply(&a, e)
		if err := a.CheckInvariants(); err != nil {
			return a, newError(CodeInvariant, "", "after event %d: %v", i+1, err)
		}
	}
	return a, nil
}

// ReplayAccount folds an account stream once, checking every event against
// the state before it as Decide does: an event that could not have been
// decided is handed to bad (its 0-based index and why) and skipped, as
// FoldAccount skips it. Linear in the stream — AuditAccount re-checks the
// invariants after every event, which is quadratic on a busy account — so
// the caller checks the invariants once, on the result.
func ReplayAccount(events []AccountEvent, bad func(i int, err error)) Account {
	a := Account{}.owned()
	for i, e := range events {
		a.Version++
		if err := checkAccountEvent(a, e); err != nil {
			bad(i, err)
			continue
		}
		mutate(&a, e)
	}
	return a
}

// apply mutates *a, whose maps the caller owns.
func apply(a *Account, e AccountEvent) {
	a.Version++
	if checkAccountEvent(*a, e) != nil {
		return
	}
	mutate(a, e)
}

// mutate applies an event already checked against *a.
func mutate(a *Account, e AccountEvent) {
	switch ev := e.(type) {
	case AccountCredited:
		a.ID = ev.Account
		a.credits[ev.creditKey()] = ev.Amount
		delete(a.pending, ev.CreditID)
		if ev.ApprovedBy != "" {
			a.approvedBy[ev.CreditID] = ev.ApprovedBy
		}
		a.credited = a.credited.Add(ev.Amount)
		a.available = a.available.Add(ev.Amount)
	case AccountCreditRequested:
		a.ID = ev.Account
		a.pending[ev.CreditID] = PendingCredit{CreditID: ev.CreditID, Amount: ev.Amount, By: ev.By, At: ev.At}
	case AccountReserved:
		a.ID = ev.Account
		a.reservations.put(Reservation{
			WithdrawalID: ev.WithdrawalID, Amount: ev.Amount, Day: ev.Day, Status: ReservationHeld, At: ev.At,
			RequestedAt: ev.RequestedAt,
		})
		a.daily[ev.Day] = a.daily[ev.Day].Add(ev.Amount)
		// Reservations arrive in log order, so the front is the oldest but
		// for clock skew between writers, which only makes an entry stay a
		// little longer.
		a.recent.dropBefore(ev.At.Add(-VelocityWindow - velocityKeepSlack))
		a.recent.push(recentReservation{WithdrawalID: ev.WithdrawalID, Amount: ev.Amount, At: ev.At})
		a.available = a.available.Sub(ev.Amount)
		a.reserved = a.reserved.Add(ev.Amount)
	case AccountReleased:
		r, _ := a.reservations.get(ev.WithdrawalID)
		r.Status, r.ClosedAt, r.Reason = ReservationReleased, ev.At, ev.Reason
		a.close(r)
		a.recent.release(ev.WithdrawalID)
		// Released money never left, so it stops counting against its day.
		a.daily[r.Day] = a.daily[r.Day].Sub(r.Amount)
		a.reserved = a.reserved.Sub(r.Amount)
		a.available = a.available.Add(r.Amount)
	case AccountSettled:
		r, _ := a.reservations.get(ev.WithdrawalID)
		r.Status, r.ClosedAt = ReservationSettled, ev.At
		a.close(r)
		a.reserved = a.reserved.Sub(r.Amount)
		a.settled = a.settled.Add(r.Amount)
	}
}

// close records r released or settled; a compact state forgets it.
func (a *Account) close(r Reservation) {
	if a.compact {
		a.forget(r)
		a.reservations.del(r.WithdrawalID)
		return
	}
	a.reservations.put(r)
}

// forget notes that r's reservation is no longer in the state.
func (a *Account) forget(r Reservation) {
	switch {
	case r.RequestedAt.IsZero():
		a.forgottenUnknown = true
	case r.RequestedAt.After(a.forgotten):
		a.forgotten = r.RequestedAt
	}
}

// MayHaveForgotten reports whether a compact state may have dropped a
// closed reservation of the withdrawal requested at requestedAt: only if
// some dropped reservation was of a withdrawal requested at or after it,
// or of one whose requested_at was not recorded. Every reservation of a
// withdrawal records the same requested_at (its requested event's), so
// when this is false the state itself answers whether the withdrawal was
// reserved: it holds its reservation or it never had one.
func (a Account) MayHaveForgotten(requestedAt time.Time) bool {
	if !a.compact {
		return false
	}
	return a.forgottenUnknown || requestedAt.IsZero() || !requestedAt.After(a.forgotten)
}

// CheckInvariants recomputes the balances from the records and checks that
// available + reserved + settled == credited, that nothing is negative, and
// that the daily totals match the reservations.
func (a Account) CheckInvariants() error {
	bad := func(format string, args ...any) error { return newError(CodeInvariant, "", format, args...) }
	for name, v := range map[string]Amount{"available": a.available, "reserved": a.reserved, "settled": a.settled, "credited": a.credited} {
		if v.Sign() < 0 {
			return bad("%s is negative (%s)", name, v)
		}
	}
	if sum := a.available.Add(a.reserved).Add(a.settled); !sum.Equal(a.credited) {
		return bad("available %s + reserved %s + settled %s = %s, credited %s", a.available, a.reserved, a.settled, sum, a.credited)
	}
	var credits, held, settled Amount
	for _, v := range a.credits {
		credits = credits.Add(v)
	}
	daily := map[string]Amount{}
	for _, r := range a.reservations.all() {
		switch r.Status {
		case ReservationHeld:
			held = held.Add(r.Amount)
		case ReservationSettled:
			settled = settled.Add(r.Amount)
		}
		if r.Status != ReservationReleased {
			daily[r.Day] = daily[r.Day].Add(r.Amount)
		}
	}
	switch {
	case !credits.Equal(a.credited):
		return bad("credits sum to %s, credited is %s", credits, a.credited)
	case !held.Equal(a.reserved):
		return bad("held reservations sum to %s, reserved is %s", held, a.reserved)
	case !a.compact && !settled.Equal(a.settled):
		return bad("settled reservations sum to %s, settled is %s", settled, a.settled)
	}
	if a.compact {
		// Settled reservations are gone: a day's total can only be checked
		// to cover what is still held on it.
		for day, v := range daily {
			if a.daily[day].Cmp(v) < 0 {
				return bad("day %s: %s counted, held reservations say at least %s", day, a.daily[day], v)
			}
		}
		return nil
	}
	for day, v := range a.daily {
		if !v.Equal(daily[day]) {
			return bad("day %s: %s counted, reservations say %s", day, v, daily[day])
		}
	}
	for day, v := range daily {
		if !v.Equal(a.daily[day]) {
			return bad("day %s: %s counted, reservations say %s", day, a.daily[day], v)
		}
	}
	return nil
}
