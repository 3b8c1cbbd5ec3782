package sagas

import (
	"context"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
)

// Statement entry kinds (CONTRACT.md "Reading and deciding").
const (
	EntryCredited = "credited"
	EntryReserved = "reserved"
	EntryReleased = "released"
	EntrySettled  = "settled"
)

// StatementEntry is one movement on an account: a credit, a reservation
// for a withdrawal, its release or its settlement. Seq is the event's
// stream sequence (orders entries and pages them); By is who made a credit
// (empty for the others and for internal transfers); Reason is a
// release's reason.
type StatementEntry struct {
	Seq          uint64    `json:"seq"`
	At           time.Time `json:"at"`
	Kind         string    `json:"kind"`
	Amount       string    `json:"amount"`
	WithdrawalID *string   `json:"withdrawal_id"`
	CreditID     *string   `json:"credit_id"`
	By           *string   `json:"by"`
	Reason       *string   `json:"reason,omitempty"`
}

// Statement lists account's movements, oldest first, read from its stream
// (verified as every Load is). A credit waiting for review is no movement
// and is not listed until it is credited.
func (in *Intake) Statement(ctx context.Context, account string) ([]StatementEntry, error) {
	if aggregate.ValidateAccountID(account) != nil {
		return nil, notFound("account", account)
	}
	recs, err := in.repo.AccountRecords(ctx, account)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, notFound("account", account)
	}
	events, err := eventlog.AccountEvents(recs)
	if err != nil {
		return nil, err
	}
	ptr := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	out := make([]StatementEntry, 0, len(recs))
	for i, e := range events {
		en := StatementEntry{Seq: recs[i].Sequence, At: recs[i].Time.UTC()}
		switch ev := e.(type) {
		case aggregate.AccountCredited:
			en.Kind, en.Amount, en.At = EntryCredited, ev.Amount.String(), ev.At.UTC()
			en.CreditID, en.WithdrawalID, en.By = ptr(ev.CreditID), ptr(ev.WithdrawalID), ptr(ev.By)
		case aggregate.AccountReserved:
			en.Kind, en.Amount, en.At, en.WithdrawalID = EntryReserved, ev.Amount.String(), ev.At.UTC(), ptr(ev.WithdrawalID)
		case aggregate.AccountReleased:
			en.Kind, en.Amount, en.At, en.WithdrawalID = EntryReleased, ev.Amount.String(), ev.At.UTC(), ptr(ev.WithdrawalID)
			en.Reason = ptr(ev.Reason)
		case aggregate.AccountSettled:
			en.Kind, en.Amount, en.At, en.WithdrawalID = EntrySettled, ev.Amount.String(), ev.At.UTC(), ptr(ev.WithdrawalID)
		default:
			continue
		}
		out = append(out, en)
	}
	return out, nil
}
