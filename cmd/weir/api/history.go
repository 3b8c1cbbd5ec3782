package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/projections/history"
	"github.com/weir-payouts/weir/sagas"
)

// History is the withdrawal history index (projections/history.Reader
// satisfies it); nil lists nothing.
type History interface {
	Walk(ctx context.Context, account string, before uint64, fn func(history.Entry) (stop bool, err error)) error
}

// ListQuery is GET /v1/withdrawals?state=S&account=A&limit=N&cursor=C and
// the body of weir.cmd.withdrawal.list.
type ListQuery struct {
	State   string `json:"state,omitempty"`
	Account string `json:"account,omitempty"`
	Limit   int    `json:"limit,omitempty"`
	Cursor  string `json:"cursor,omitempty"`
}

// ListBody is the reply of the withdrawal list.
type ListBody struct {
	Withdrawals []aggregate.WithdrawalView `json:"withdrawals"`
	NextCursor  *string                    `json:"next_cursor"`
}

// StatementBody is GET /v1/accounts/{id}/statement.
type StatementBody struct {
	Entries    []sagas.StatementEntry `json:"entries"`
	NextCursor *string                `json:"next_cursor"`
}

// StatementQuery is the body of weir.cmd.account.statement.
type StatementQuery struct {
	Account string `json:"account"`
	Limit   int    `json:"limit,omitempty"`
	Cursor  string `json:"cursor,omitempty"`
}

// scanPerItem bounds the index entries one page may examine per item
// asked for: a rare filter answers a short page with a next_cursor rather
// than reading the whole index in one request.
const scanPerItem = 20

// seesAll: approvers, operators and auditors read every withdrawal and
// statement entry (of the accounts they are scoped to); a principal that
// is only a requester sees its own.
func seesAll(p Principal) bool {
	return p.Has(RoleApprover) || p.Has(RoleOperator) || p.Has(RoleAuditor)
}

func pageLimit(limit int) (int, error) {
	switch {
	case limit == 0:
		return DefaultPageLimit, nil
	case limit < 0 || limit > MaxPageLimit:
		return 0, apiError(aggregate.CodeInvalidCommand, "limit", fmt.Sprintf("limit must be 1 to %d", MaxPageLimit))
	}
	return limit, nil
}

func seqCursor(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return 0, apiError(aggregate.CodeInvalidCommand, "cursor", "not a cursor this API gave out")
	}
	return n, nil
}

// list pages the withdrawal history newest first. Each entry of the index
// is loaded from the log (verified) and filtered on what was loaded.
func (o *ops) list(ctx context.Context, p Principal, q ListQuery) (result, error) {
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return result{}, err
	}
	if q.State != "" && !slices.Contains(aggregate.States(), aggregate.State(q.State)) {
		return result{}, apiError(aggregate.CodeInvalidCommand, "state", fmt.Sprintf("no state %q", q.State))
	}
	if q.Account != "" {
		if err := aggregate.ValidateAccountID(q.Account); err != nil {
			return result{}, err
		}
		if err := mayAct(p, q.Account); err != nil {
			return result{}, err
		}
	}
	before, err := seqCursor(q.Cursor)
	if err != nil {
		return result{}, err
	}
	body := ListBody{Withdrawals: []aggregate.WithdrawalView{}}
	if o.history == nil {
		return result{body: body}, nil
	}
	own := !seesAll(p)
	var lastTaken, lastSeen uint64
	scanned, maxScan := 0, limit*scanPerItem
	more := false
	err = o.history.Walk(ctx, q.Account, before, func(e history.Entry) (bool, error) {
		if scanned >= maxScan {
			more = true
			return true, nil
		}
		scanned++
		lastSeen = e.Seq
		if (own && e.RequestedBy != p.Name) || !p.MayAct(e.Account) {
			return false, nil
		}
		w, err := o.intake.Withdrawal(ctx, e.ID)
		if errors.Is(err, sagas.ErrIntegrityViolation) {
			return false, nil // quarantined: its own GET says so (409); the list goes on
		}
		if err != nil {
			return true, fmt.Errorf("list: withdrawal %s: %w", e.ID, err)
		}
		if (own && w.RequestedBy != p.Name) || !p.MayAct(w.Account) || (q.Account != "" && w.Account != q.Account) ||
			(q.State != "" && string(w.State) != q.State) {
			return false, nil
		}
		if len(body.Withdrawals) == limit {
			more = true
			return true, nil
		}
		body.Withdrawals = append(body.Withdrawals, w.View())
		lastTaken = e.Seq
		return false, nil
	})
	if errors.Is(err, history.ErrBadCursor) {
		return result{}, apiError(aggregate.CodeInvalidCommand, "cursor", "not a cursor this API gave out (for this account)")
	}
	if err != nil {
		return result{}, err
	}
	if more {
		next := lastSeen
		if len(body.Withdrawals) == limit {
			next = lastTaken
		}
		c := strconv.FormatUint(next, 10)
		body.NextCursor = &c
	}
	return result{body: body}, nil
}

// statement pages an account's movements newest first (cursor: the last
// entry's seq). A principal that is only a requester sees the movements of
// its own withdrawals and its own credits.
func (o *ops) statement(ctx context.Context, p Principal, q StatementQuery) (result, error) {
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return result{}, err
	}
	before, err := seqCursor(q.Cursor)
	if err != nil {
		return result{}, err
	}
	if err := mayAct(p, q.Account); err != nil {
		return result{}, err
	}
	entries, err := o.intake.Statement(ctx, q.Account)
	if err != nil {
		return result{}, err
	}
	own := !seesAll(p)
	mine := map[string]bool{}
	visible := func(e sagas.StatementEntry) (bool, error) {
		if !own {
			return true, nil
		}
		if e.WithdrawalID == nil {
			return e.By != nil && *e.By == p.Name, nil
		}
		id := *e.WithdrawalID
		if v, ok := mine[id]; ok {
			return v, nil
		}
		w, err := o.intake.Withdrawal(ctx, id)
		if err != nil {
			return false, err
		}
		mine[id] = w.RequestedBy == p.Name
		return mine[id], nil
	}
	body := StatementBody{Entries: []sagas.StatementEntry{}}
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if before != 0 && e.Seq >= before {
			continue
		}
		ok, err := visible(e)
		if err != nil {
			return result{}, err
		}
		if !ok {
			continue
		}
		if len(body.Entries) == limit {
			c := strconv.FormatUint(body.Entries[limit-1].Seq, 10)
			body.NextCursor = &c
			break
		}
		body.Entries = append(body.Entries, e)
	}
	return result{body: body}, nil
}

// listQuery reads GET /v1/withdrawals's query.
func listQuery(r *http.Request) (ListQuery, error) {
	page, err := pageQuery(r)
	if err != nil {
		return ListQuery{}, err
	}
	q := r.URL.Query()
	return ListQuery{State: q.Get("state"), Account: q.Get("account"), Limit: page.Limit, Cursor: page.Cursor}, nil
}
