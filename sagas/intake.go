package sagas

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/tron"
)

// withdrawalID canonicalises a withdrawal id from a path or body; an id
// that is not a UUID names no withdrawal, so it is not found (404), not
// invalid: nothing could ever have been created under it.
func withdrawalID(id string) (string, error) {
	canon, err := aggregate.ParseOperationID(id)
	if err != nil {
		return "", notFound("withdrawal", id)
	}
	return canon, nil
}

func notFound(what, id string) error {
	return &aggregate.Error{Code: ErrNotFound.Code, Message: fmt.Sprintf("%s %q not found", what, id)}
}

// Clock reads the wall clock. Intake records command times with it; the
// broadcast saga never uses it for expiry decisions.
type Clock func() time.Time

// Intake is the application layer both transports (HTTP and NATS) call:
// validate → load → decide → append with optimistic concurrency → reply
// with the resulting state. Every write goes through Repo.
type Intake struct {
	repo   *Repo
	ledger *Ledger
	now    Clock

	policyQuorum int                       // see SetPolicyQuorum; 0 reads as 1
	reviewAbove  aggregate.Amount          // see SetCreditReviewAbove; zero: no review
	config       *ConfigSource             // see UseConfig; nil: the values set above
	blocklist    map[tron.Address]struct{} // see SetDestinationBlocklist
	policyCache  policyCache               // see WatchPolicy
}

// NewIntake returns the application layer over repo. The ledger performs
// reservations and releases inline so a reply shows their outcome; the
// same ledger, run as a durable consumer, completes them after a crash.
func NewIntake(repo *Repo, ledger *Ledger, now Clock) *Intake {
	if now == nil {
		now = time.Now
	}
	return &Intake{repo: repo, ledger: ledger, now: now}
}

// RequestInput is a withdrawal request as it arrives. Amount is the raw
// JSON value, so a JSON number can be refused (amounts are decimal
// strings); By is the authenticated principal.
type RequestInput struct {
	OperationID string          `json:"operation_id"`
	Account     string          `json:"account"`
	ToAddress   string          `json:"to_address"`
	Amount      json.RawMessage `json:"amount"`
	Asset       string          `json:"asset"`
	By          string          `json:"-"`
}

// Request creates a withdrawal idempotently by operation id and reserves
// its amount. replayed is true when an identical request had already
// created it (the current state is returned). The same operation id with
// another meaning is an idempotency_conflict and changes nothing.
func (in *Intake) Request(ctx context.Context, req RequestInput) (w aggregate.Withdrawal, replayed bool, err error) {
	cmd, err := in.requestCommand(ctx, req)
	if err != nil {
		return w, false, err
	}
	// Creation is an append to an empty subject: decide on the empty
	// state first, and read the stream only if that append loses (a replay
	// or a conflict is then decided against what is there).
	w, pos, events, err := in.repo.UpdateWithdrawalFrom(ctx, cmd.ID, aggregate.Withdrawal{}, eventstore.Position{}, func(aggregate.Withdrawal) (aggregate.Command, error) {
		return cmd, nil
	})
	if err != nil {
		return w, false, err
	}
	replayed = len(events) == 0
	// Reserve inline so the reply says whether the money is held; the
	// ledger's consumer does the same after a crash between the two.
	unlock := in.ledger.lockReserving(cmd.ID)
	w, err = in.ledger.reserve(ctx, w, pos)
	unlock()
	if err != nil {
		return w, replayed, err
	}
	return w, replayed, nil
}

func (in *Intake) requestCommand(ctx context.Context, req RequestInput) (aggregate.RequestWithdrawal, error) {
	var cmd aggregate.RequestWithdrawal
	id, err := aggregate.ParseOperationID(req.OperationID)
	if err != nil {
		return cmd, err
	}
	if err := aggregate.ValidateAccountID(req.Account); err != nil {
		return cmd, err
	}
	assetCode := req.Asset
	if assetCode == "" {
		assetCode = aggregate.USDT.Code
	}
	asset, err := aggregate.LookupAsset(assetCode)
	if err != nil {
		return cmd, err
	}
	if len(req.Amount) == 0 {
		return cmd, &aggregate.Error{Code: aggregate.CodeInvalidAmount, Field: "amount", Message: "amount is required (a decimal string)"}
	}
	amount, err := aggregate.ParseAmountJSON(asset, req.Amount)
	if err != nil {
		return cmd, err
	}
	to, err := tron.ParseAddress(req.ToAddress)
	if err != nil {
		return cmd, &aggregate.Error{Code: aggregate.CodeInvalidAddress, Field: "to_address", Message: err.Error()}
	}
	if err := in.refuseDestination(ctx, to); err != nil {
		return cmd, err
	}
	policy, err := in.Policy(ctx)
	if err != nil {
		return cmd, err
	}
	at := in.now().UTC()
	var sum *aggregate.Amount
	if policy.MeasuresVelocity(req.Account) {
		// Measured from the account's fold before this request's own
		// reservation; two requests racing on one account may each miss
		// the other (the daily limit, decided at reservation, is the hard
		// cap).
		a, _, err := in.repo.Account(ctx, req.Account)
		if err != nil {
			return cmd, fmt.Errorf("velocity: load account %s: %w", req.Account, err)
		}
		s := a.SentInWindow(at)
		sum = &s
	}
	return aggregate.RequestWithdrawal{
		ID: id, Account: req.Account, ToAddress: to.String(), Amount: amount, Asset: asset.Code,
		RequestedBy: req.By, Policy: policy, WindowSum: sum, At: at,
	}, nil
}

// Withdrawal returns one withdrawal's current state.
func (in *Intake) Withdrawal(ctx context.Context, id string) (aggregate.Withdrawal, error) {
	canon, err := withdrawalID(id)
	if err != nil {
		return aggregate.Withdrawal{}, err
	}
	w, _, err := in.repo.Withdrawal(ctx, canon)
	if err != nil {
		return w, err
	}
	if !w.Exists() {
		return w, notFound("withdrawal", id)
	}
	return w, nil
}

// EventView is one event of a withdrawal as the API shows it: the state is
// the withdrawal's state after the event.
type EventView struct {
	Version uint64          `json:"version"`
	Type    string          `json:"type"`
	At      time.Time       `json:"at"`
	State   aggregate.State `json:"state"`
	Data    json.RawMessage `json:"data"`
}

// Events lists a withdrawal's events in order.
func (in *Intake) Events(ctx context.Context, id string) ([]EventView, error) {
	canon, err := withdrawalID(id)
	if err != nil {
		return nil, err
	}
	recs, err := in.repo.WithdrawalRecords(ctx, canon)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, notFound("withdrawal", id)
	}
	events, err := eventlog.WithdrawalEvents(recs)
	if err != nil {
		return nil, err
	}
	out := make([]EventView, len(recs))
	var w aggregate.Withdrawal
	for i, r := range recs {
		w = aggregate.Evolve(w, events[i])
		at := events[i].OccurredAt().UTC()
		if at.IsZero() {
			at = r.Time
		}
		data, err := viewData(r, events[i])
		if err != nil {
			return nil, err
		}
		out[i] = EventView{Version: r.AggregateVersion, Type: r.Type, At: at, State: w.State, Data: data}
	}
	return out, nil
}

// Redacted stands in for a secret in an API view.
const Redacted = "redacted"

// viewData is an event's payload as the API shows it. The signature of a
// signed event is redacted: with the raw bytes (which stay, as they hold no
// secret and are what the txid hashes) it is a transaction anyone could
// broadcast until it expires. The stored event is not touched.
func viewData(r eventstore.Record, e aggregate.Event) (json.RawMessage, error) {
	// Events decode strictly (no unknown fields), so the typed event is
	// the whole payload.
	if s, ok := e.(aggregate.Signed); ok {
		s.Signature = Redacted
		return json.Marshal(s)
	}
	return r.Payload, nil
}

// Approve records the principal's approval under the policy in force.
func (in *Intake) Approve(ctx context.Context, id, by string) (aggregate.Withdrawal, error) {
	canon, err := withdrawalID(id)
	if err != nil {
		return aggregate.Withdrawal{}, err
	}
	policy, err := in.Policy(ctx)
	if err != nil {
		return aggregate.Withdrawal{}, err
	}
	w, _, err := in.repo.UpdateWithdrawal(ctx, canon, func(w aggregate.Withdrawal) (aggregate.Command, error) {
		if !w.Exists() {
			return nil, notFound("withdrawal", id)
		}
		return aggregate.Approve{By: by, Policy: policy, At: in.now().UTC()}, nil
	})
	return w, err
}

// Cancel rejects a withdrawal in its cancellable prefix (requested or
// approved) with reason cancelled and releases its reservation. Only its
// requester or an operator may cancel.
func (in *Intake) Cancel(ctx context.Context, id, by string, operator bool) (aggregate.Withdrawal, error) {
	return in.endAndRelease(ctx, id, func(w aggregate.Withdrawal) (aggregate.Command, error) {
		if !operator && w.RequestedBy != by {
			return nil, &aggregate.Error{Code: ErrForbidden.Code, Message: "only the requester or an operator may cancel"}
		}
		return aggregate.Cancel{By: by, At: in.now().UTC()}, nil
	})
}

// endAndRelease decides the command cmd returns for an existing withdrawal
// (404 otherwise) and releases its reservation once it is rejected.
func (in *Intake) endAndRelease(ctx context.Context, id string, cmd func(aggregate.Withdrawal) (aggregate.Command, error)) (aggregate.Withdrawal, error) {
	canon, err := withdrawalID(id)
	if err != nil {
		return aggregate.Withdrawal{}, err
	}
	w, _, err := in.repo.UpdateWithdrawal(ctx, canon, func(w aggregate.Withdrawal) (aggregate.Command, error) {
		if !w.Exists() {
			return nil, notFound("withdrawal", id)
		}
		return cmd(w)
	})
	if err != nil {
		return w, err
	}
	if err := in.ledger.Release(ctx, w); err != nil {
		return w, err
	}
	return w, nil
}

// Decline is an approver's refusal of a withdrawal awaiting approval, with
// a reason: it ends rejected (reason declined, the decliner and the reason
// recorded) and the reservation is released. The transport checks the
// approver role; the decider refuses any state but requested
// (invalid_transition).
func (in *Intake) Decline(ctx context.Context, id, by, reason string) (aggregate.Withdrawal, error) {
	return in.endAndRelease(ctx, id, func(aggregate.Withdrawal) (aggregate.Command, error) {
		return aggregate.Decline{By: by, Reason: reason, At: in.now().UTC()}, nil
	})
}

// CreditInput is an operator's credit to an account.
type CreditInput struct {
	Account  string          `json:"account"`
	CreditID string          `json:"credit_id"`
	Amount   json.RawMessage `json:"amount"`
	By       string          `json:"-"` // the authenticated principal, recorded on the credit
}

// Credit adds money to an account, idempotent by credit id (see
// CreditWithReview for a credit that waits for a second operator).
func (in *Intake) Credit(ctx context.Context, c CreditInput) (aggregate.AccountView, bool, error) {
	v, _, replayed, err := in.CreditWithReview(ctx, c)
	return v, replayed, err
}

// CreditWithReview is Credit that also says when the credit, being above
// the review amount (SetCreditReviewAbove), waits for a second operator
// instead: pending is then set and the balances have not changed.
func (in *Intake) CreditWithReview(ctx context.Context, c CreditInput) (view aggregate.AccountView, pending *aggregate.PendingCredit, replayed bool, err error) {
	if err := aggregate.ValidateAccountID(c.Account); err != nil {
		return aggregate.AccountView{}, nil, false, err
	}
	if c.CreditID == "" {
		return aggregate.AccountView{}, nil, false, &aggregate.Error{Code: aggregate.CodeInvalidCommand, Field: "credit_id", Message: "credit_id is required"}
	}
	if len(c.Amount) == 0 {
		return aggregate.AccountView{}, nil, false, &aggregate.Error{Code: aggregate.CodeInvalidAmount, Field: "amount", Message: "amount is required (a decimal string)"}
	}
	amount, err := aggregate.ParseAmountJSON(aggregate.AccountAsset, c.Amount)
	if err != nil {
		return aggregate.AccountView{}, nil, false, err
	}
	a, events, err := in.repo.UpdateAccount(ctx, c.Account, aggregate.Credit{
		Account: c.Account, CreditID: c.CreditID, Amount: amount, At: in.now().UTC(), By: c.By, ReviewAbove: in.creditReviewAbove(ctx),
	})
	if err != nil {
		return aggregate.AccountView{}, nil, false, err
	}
	if p, ok := a.PendingCredit(c.CreditID); ok {
		pending = &p
	}
	return a.View(), pending, len(events) == 0, nil
}

// Account returns an account's balances; an account with no events is not
// found.
func (in *Intake) Account(ctx context.Context, id string) (aggregate.AccountView, error) {
	if aggregate.ValidateAccountID(id) != nil {
		return aggregate.AccountView{}, notFound("account", id)
	}
	a, pos, err := in.repo.Account(ctx, id)
	if err != nil {
		return aggregate.AccountView{}, err
	}
	if pos.Version == 0 {
		return aggregate.AccountView{}, notFound("account", id)
	}
	return a.View(), nil
}

// Policy returns the policy in force (see Repo.PolicyInForce), from memory
// between policy events while WatchPolicy runs (see policyCache).
func (in *Intake) Policy(ctx context.Context) (aggregate.Policy, error) {
	p, ok, gen := in.policyCache.get()
	if ok {
		return p, nil
	}
	s, pos, err := in.repo.Policy(ctx)
	if err != nil {
		return aggregate.Policy{}, fmt.Errorf("load policy: %w", err)
	}
	p = policyInForce(s)
	in.policyCache.fill(p, pos, gen)
	return p, nil
}

// SetPolicy puts p in force as the next policy version (who, when), with no
// quorum: it is for start-up configuration (the --policy file). Operators'
// changes go through ProposePolicy. Setting the policy in force again
// changes nothing.
func (in *Intake) SetPolicy(ctx context.Context, p aggregate.Policy, by string) (aggregate.Policy, error) {
	if err := CheckPolicy(p); err != nil {
		return aggregate.Policy{}, err
	}
	s, pos, err := in.repo.updatePolicy(ctx, aggregate.SetPolicy{Policy: p, By: by, At: in.now().UTC()})
	in.policyCache.wrote(s, pos, err) // this process reads its own write at once
	if err != nil {
		return aggregate.Policy{}, err
	}
	return s.Policy, nil
}
