package sagas

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
)

// LedgerConsumer is the durable consumer name of the ledger saga.
const LedgerConsumer = "weir-ledger"

// Ledger is the saga that keeps accounts in step with withdrawals:
//
//	withdrawal.requested            → reserve on the account, then record
//	                                  funds_reserved (or reject with
//	                                  insufficient_funds / daily_limit);
//	                                  release instead if it already ended
//	withdrawal.rejected / .failed   → release the reservation
//	withdrawal.confirmed            → settle the reservation
//	withdrawal.settled_internally   → settle, and credit the custodied
//	                                  destination account
//	account.reserved                → the same as withdrawal.requested for
//	                                  the withdrawal it names: record
//	                                  funds_reserved, or release if the
//	                                  withdrawal ended meanwhile
//
// Every step is idempotent, so the intake may run a step inline for a fast
// reply and the durable consumer may run it again after a crash: no startup
// scan, no reaper — an unacknowledged event is simply redelivered. The
// account's live state forgets a reservation once it is closed, so it
// answers a repeated step alone only while the reservation is held (and
// for an internal credit, which it keys by withdrawal id); after that the
// withdrawal's own stream does: a repeated reserve asks it whether it was
// reserved or ended (ReserveFor), a settle that finds no reservation is a
// replay when the withdrawal was recorded reserved (Finish), and a release
// that finds none has nothing to give back (Release). The outcome is
// recorded on the withdrawal only if it is not there yet.
//
// The account.reserved step closes the gap a reserving path leaves when it
// dies between its two appends (account, then withdrawal): if the
// withdrawal was cancelled in between, every withdrawal event may already
// have been handled before the reservation existed, and only the
// reservation's own event is left to bring it back.
//
// When this process's step (inline, or the consumer's own) has appended a
// withdrawal's funds_reserved, the consumer does not load the withdrawal for
// that withdrawal's events before it in the log (its requested, the
// account.reserved of its reservation): they have nothing left to do, and
// any end of the withdrawal is a later event, handled with a load as
// always. That memory is bounded, in-process, and dropped once the consumer
// has passed the funds_reserved; after a restart the consumer loads as
// before (see reservedSet).
type Ledger struct {
	repo       *Repo
	dailyLimit aggregate.Amount
	config     *ConfigSource // when set, the daily limit in force in the log
	now        Clock
	log        *slog.Logger
	reserved   *reservedSet // withdrawals this process recorded reserved; see reservedSet
}

// NewLedger returns the ledger saga. A zero dailyLimit means no limit.
func NewLedger(repo *Repo, dailyLimit aggregate.Amount, now Clock, log *slog.Logger) *Ledger {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Ledger{repo: repo, dailyLimit: dailyLimit, now: now, log: log, reserved: newReservedSet(reservedMax)}
}

// Run consumes withdrawal and account events durably until ctx is done.
// One durable consumer over every aggregate type (policy events are
// ignored) keeps one cursor, in stream order, for both.
func (l *Ledger) Run(ctx context.Context) error {
	return l.repo.store.Consume(ctx, LedgerConsumer, "", func(r eventstore.Record) error {
		err := l.handle(r)
		if quarantined(err) {
			// An aggregate this step needs is quarantined: no retry can
			// cure it, and nothing may be decided on it. The step is left
			// undone (no reservation, settlement or release moves money),
			// and health reports the violation.
			l.log.Error("ledger: step skipped, an aggregate it needs is quarantined", "type", r.Key.Type, "id", r.Key.ID,
				"event", r.Type, "seq", r.Sequence, "err", err)
			return nil
		}
		if err != nil {
			l.log.Warn("ledger: will retry", "type", r.Key.Type, "id", r.Key.ID, "event", r.Type, "version", r.AggregateVersion, "err", err)
			return err
		}
		return nil
	}, eventstore.OnViolation(func(v *eventstore.IntegrityError) error {
		// Never folded into a balance or a decision; acknowledged so the
		// rest of the log keeps moving.
		l.log.Error("ledger: event quarantined, not handled", "seq", v.Sequence, "subject", v.Subject, "event", v.Type, "err", v.Err)
		return nil
	}))
}

// ErrStaleRead means a load answered with an aggregate older than the event
// being handled (a lagging replica answering a direct get). The event is
// not acknowledged, so it is redelivered, and decided again on a read that
// has caught up — never on the stale one.
var ErrStaleRead = errors.New("sagas: stale read: the aggregate loaded is older than the event being handled")

// fresh refuses a load at pos that does not yet include the event r of the
// same aggregate.
func fresh(r eventstore.Record, pos eventstore.Position) error {
	if pos.Version < r.AggregateVersion {
		return fmt.Errorf("%w: %s %s loaded at version %d, event %s is version %d",
			ErrStaleRead, r.Key.Type, r.Key.ID, pos.Version, r.Type, r.AggregateVersion)
	}
	return nil
}

func (l *Ledger) handle(r eventstore.Record) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch r.Key.Type {
	case eventlog.TypeWithdrawal:
		l.reserved.passed(r.Key.ID, r.Sequence)
		return l.handleWithdrawal(ctx, r)
	case eventlog.TypeAccount:
		return l.handleAccount(ctx, r)
	}
	return nil
}

func (l *Ledger) handleWithdrawal(ctx context.Context, r eventstore.Record) error {
	switch r.Type {
	case aggregate.EventRequested, aggregate.EventRejected, aggregate.EventFailed,
		aggregate.EventConfirmed, aggregate.EventSettledInternally:
	default:
		return nil
	}
	if r.Type == aggregate.EventRequested {
		if l.reserved.covers(r.Key.ID, "", r.Sequence) {
			// This process recorded it reserved after this event; any end
			// of it is a later event, handled on its own.
			return nil
		}
		defer l.lockReserving(r.Key.ID)()
	}
	w, pos, err := l.repo.Withdrawal(ctx, r.Key.ID)
	if err != nil {
		return err
	}
	if err := fresh(r, pos); err != nil {
		return err
	}
	if r.Type == aggregate.EventRequested {
		_, err := l.reserve(ctx, w, pos)
		return err
	}
	return l.Finish(ctx, w)
}

// handleAccount brings the withdrawal a reservation was made for in line
// with it: recorded on the withdrawal while it may still be paid, released
// once it cannot.
func (l *Ledger) handleAccount(ctx context.Context, r eventstore.Record) error {
	if r.Type != aggregate.EventAccountReserved {
		return nil
	}
	e, err := aggregate.DecodeAccountEvent(r.Type, r.Payload)
	if err != nil {
		return integrityViolation(r.Key.Type, r.Key.ID, err)
	}
	res, ok := e.(aggregate.AccountReserved)
	if !ok {
		return fmt.Errorf("account %s event %d: %s decoded as %T", r.Key.ID, r.AggregateVersion, r.Type, e)
	}
	if l.reserved.covers(res.WithdrawalID, r.Key.ID, r.Sequence) {
		// This process recorded the withdrawal reserved on this account
		// after this event: the common case below, known without a load.
		return nil
	}
	defer l.lockReserving(res.WithdrawalID)()
	w, pos, err := l.repo.Withdrawal(ctx, res.WithdrawalID)
	if err != nil {
		return err
	}
	if !w.Exists() {
		// The reservation was made after its withdrawal was written (every
		// reserving path starts from the withdrawal), so this read is behind.
		return fmt.Errorf("%w: account %s reserved %s for withdrawal %s, which has no events yet",
			ErrStaleRead, r.Key.ID, res.Amount, res.WithdrawalID)
	}
	if w.Account != r.Key.ID {
		l.log.Error("ledger: reservation on an account that is not the withdrawal's", "account", r.Key.ID,
			"withdrawal", w.ID, "withdrawal_account", w.Account, "amount", res.Amount.String())
		return nil
	}
	// Recorded on a withdrawal that may still be paid, or settled: nothing
	// to do (funds_reserved follows this event in the log, so any later
	// end of the withdrawal is an event of its own, handled after it).
	// This is the common case and costs no account read.
	ended := w.State == aggregate.StateRejected || w.State == aggregate.StateFailed
	if !ended && (w.Reserved || w.Terminal()) {
		return nil
	}
	if _, apos, err := l.repo.Account(ctx, r.Key.ID); err != nil {
		return err
	} else if err := fresh(r, apos); err != nil {
		return err
	}
	_, err = l.reserve(ctx, w, pos)
	return err
}

// Reserve holds the withdrawal's amount on its account and records that on
// the withdrawal; when the account refuses (insufficient funds, daily
// limit) the withdrawal is rejected with that reason and the balance is
// untouched. If the withdrawal ended meanwhile (cancelled), a reservation
// just made is released again. Returns the withdrawal's state afterwards.
func (l *Ledger) Reserve(ctx context.Context, id string) (aggregate.Withdrawal, error) {
	defer l.lockReserving(id)()
	w, pos, err := l.repo.Withdrawal(ctx, id)
	if err != nil {
		return w, err
	}
	return l.reserve(ctx, w, pos)
}

// lockReserving serialises, within this process, the paths that reserve
// one withdrawal (the intake's inline step, the consumer's handling of its
// requested and account.reserved events): a path that waited finds the
// work done when it reads the withdrawal, instead of repeating it against
// the account — on a busy account every repeat queues behind the account's
// own lock. Across processes the streams' expectations still decide.
func (l *Ledger) lockReserving(id string) (unlock func()) {
	return l.repo.locks.lock("reserving." + id)
}

// UseConfig makes the ledger reserve against the daily limit in force in
// the log (read at each reservation) instead of the one it was built with.
// Call it before the ledger runs.
func (l *Ledger) UseConfig(cs *ConfigSource) { l.config = cs }

// limit is the daily limit to reserve against now.
func (l *Ledger) limit(ctx context.Context) aggregate.Amount {
	if l.config == nil {
		return l.dailyLimit
	}
	return l.config.DailyLimit(ctx)
}

// reserve is Reserve for a withdrawal the caller holds at pos (the intake
// has just written it): the withdrawal is not read again unless another
// writer moved it meanwhile. A withdrawal that already ended is not
// reserved; whatever reservation it holds is released instead — a
// reserving path that loaded it before the cancel may have reserved after
// the cancel's release, and died before it could give it back.
func (l *Ledger) reserve(ctx context.Context, w aggregate.Withdrawal, pos eventstore.Position) (aggregate.Withdrawal, error) {
	if w.Terminal() {
		return w, l.Release(ctx, w)
	}
	if !w.Exists() || w.Reserved {
		return w, nil
	}
	id := w.ID
	err := l.repo.ReserveFor(ctx, w.ID, aggregate.Reserve{
		Account: w.Account, WithdrawalID: w.ID, Amount: w.Amount, DailyLimit: l.limit(ctx), At: l.now().UTC(),
		RequestedAt: w.RequestedAt,
	})
	var next aggregate.Command = aggregate.RecordReservation{At: l.now().UTC()}
	switch {
	case errors.Is(err, aggregate.ErrInsufficientFunds), errors.Is(err, aggregate.ErrDailyLimit):
		reason := aggregate.ReasonInsufficientFunds
		if errors.Is(err, aggregate.ErrDailyLimit) {
			reason = aggregate.ReasonDailyLimit
		}
		next = aggregate.Reject{Reason: reason, Detail: err.Error(), At: l.now().UTC()}
	case err != nil:
		return w, fmt.Errorf("reserve %s on %s: %w", id, w.Account, err)
	}
	var events []aggregate.Event
	w, pos, events, err = l.repo.UpdateWithdrawalFrom(ctx, id, w, pos, func(w aggregate.Withdrawal) (aggregate.Command, error) {
		if w.Terminal() || w.Reserved {
			return nil, errSkip // someone else recorded it, or it was cancelled meanwhile
		}
		return next, nil
	})
	if err == nil && len(events) == 1 && events[0].EventType() == aggregate.EventFundsReserved {
		// Appended here, at pos: the consumer need not load w for the
		// events before it.
		l.reserved.add(id, w.Account, pos.Sequence)
	}
	if errors.Is(err, errSkip) {
		w, err = l.reload(ctx, id)
		if err == nil && w.Terminal() {
			err = l.Finish(ctx, w) // cancelled while we reserved: give it back
		}
	}
	return w, err
}

// errSkip stops an update whose work someone else already did.
var errSkip = errors.New("sagas: nothing to do")

func (l *Ledger) reload(ctx context.Context, id string) (aggregate.Withdrawal, error) {
	w, _, err := l.repo.Withdrawal(ctx, id)
	return w, err
}

// Release gives a rejected or failed withdrawal's reservation back (a no-op
// when it holds none).
func (l *Ledger) Release(ctx context.Context, w aggregate.Withdrawal) error {
	if w.State != aggregate.StateRejected && w.State != aggregate.StateFailed {
		return nil
	}
	_, _, err := l.repo.UpdateAccount(ctx, w.Account, aggregate.Release{
		Account: w.Account, WithdrawalID: w.ID, Reason: w.Reason, At: l.now().UTC(),
	})
	if errors.Is(err, aggregate.ErrNoReservation) {
		// Never reserved (e.g. rejected for insufficient funds). The Repo
		// confirmed the refusal on the stream leader's view, so a replica
		// behind the account.reserved event cannot make it look so.
		return nil
	}
	return err
}

// Finish brings the account in line with a terminal withdrawal: release on
// rejected/failed, settle on confirmed (and credit the destination account
// of an internal transfer). Idempotent.
func (l *Ledger) Finish(ctx context.Context, w aggregate.Withdrawal) error {
	switch w.State {
	case aggregate.StateRejected, aggregate.StateFailed:
		return l.Release(ctx, w)
	case aggregate.StateConfirmed:
		_, _, err := l.repo.UpdateAccount(ctx, w.Account, aggregate.Settle{
			Account: w.Account, WithdrawalID: w.ID, At: l.now().UTC(),
		})
		if errors.Is(err, aggregate.ErrNoReservation) && w.Reserved {
			// The live account state forgets a reservation once it is
			// closed. A withdrawal is recorded reserved only after its
			// reservation was made, and a confirmed one's is never
			// released, so none held means it was settled already (a
			// replay). The Repo confirmed the refusal on the leader's view.
			err = nil
		}
		if err != nil {
			return fmt.Errorf("settle %s on %s: %w", w.ID, w.Account, err)
		}
		if w.Route.IsInternal() {
			// Its own command, keyed by the withdrawal: no operator credit
			// id can collide with it (issue 16, item 5).
			_, _, err = l.repo.UpdateAccount(ctx, w.Route.Account(), aggregate.CreditInternal{
				Account: w.Route.Account(), WithdrawalID: w.ID, Amount: w.Amount, At: l.now().UTC(),
			})
			if err != nil {
				return fmt.Errorf("credit internal transfer %s to %s: %w", w.ID, w.Route.Account(), err)
			}
		}
	}
	return nil
}
