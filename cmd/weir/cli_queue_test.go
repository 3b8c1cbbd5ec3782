package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/projections"
)

// threeApprovals serves three requested withdrawals, a second apart.
type threeApprovals struct{}

func (threeApprovals) PendingApprovals() []aggregate.Withdrawal {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ws := make([]aggregate.Withdrawal, 3)
	for i := range ws {
		ws[i] = aggregate.Withdrawal{
			ID: fmt.Sprintf("0000000%d-0000-4000-8000-000000000000", i), State: aggregate.StateRequested, Account: "acme",
			Amount: aggregate.MustParseAmount(aggregate.USDT, "3"), Asset: aggregate.USDT.Code, RequiredApprovals: 1,
			RequestedAt: base.Add(time.Duration(i) * time.Second),
		}
	}
	return ws
}
func (threeApprovals) Ready(time.Time) []aggregate.Withdrawal        { return nil }
func (threeApprovals) InFlight(time.Time) []projections.InFlightItem { return nil }

// `weir queue --limit N` prints one page and the command for the next;
// `--cursor` continues after it, and the last page says no more.
func TestQueueCommandPages(t *testing.T) {
	s := newStack(t, false)
	principals, err := api.NewPrincipals([]api.Principal{{Name: "bob", Token: tokBob, Roles: []api.Role{api.RoleApprover}}})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := api.StartService(s.nc, api.ServiceConfig{Intake: s.intake, Principals: principals, Queues: threeApprovals{},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })

	code, out, errOut := s.weir(t, "queue", "approvals", "--limit", "2", "--token", tokBob)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "first page", out, "00000000-", "00000001-", "2 item(s)", "more: weir queue approvals --cursor ")
	if strings.Contains(out, "00000002-") {
		t.Fatalf("first page holds the third item:\n%s", out)
	}
	cursor := strings.TrimSpace(out[strings.Index(out, "--cursor ")+len("--cursor "):])
	code, out, errOut = s.weir(t, "queue", "approvals", "--limit", "2", "--cursor", cursor, "--token", tokBob)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "last page", out, "00000002-", "1 item(s)")
	if strings.Contains(out, "more:") || strings.Contains(out, "00000001-") {
		t.Fatalf("last page:\n%s", out)
	}
	code, out, errOut = s.weir(t, "queue", "approvals", "--limit", "1001", "--token", tokBob)
	wantCode(t, code, 1, out, errOut)
	wantContains(t, "limit too high", errOut, "weir queue: invalid_command: ", "limit")
}

// oneInFlight serves one in-flight withdrawal whose send is unacknowledged.
type oneInFlight struct{ threeApprovals }

func (oneInFlight) InFlight(now time.Time) []projections.InFlightItem {
	w := aggregate.Withdrawal{
		ID: "00000009-0000-4000-8000-000000000000", State: aggregate.StateBroadcasting, Account: "acme",
		ToAddress: cliTestAddr, RequestedBy: "alice", RequestedAt: now.Add(-2 * time.Hour),
		Amount: aggregate.MustParseAmount(aggregate.USDT, "7"), Asset: aggregate.USDT.Code, RequiredApprovals: 1,
	}
	return []projections.InFlightItem{{Withdrawal: w, Since: now.Add(-90 * time.Second), Age: 90 * time.Second,
		Unacknowledged: true, LeaseLapsed: true, Ambiguous: true}}
}

// The human queue names destination, requester and age; in flight it
// says whether the withdrawal is ambiguous (reconciliation by txid due).
func TestQueueHumanOutputShowsDestinationRequesterAgeAndAmbiguity(t *testing.T) {
	s := newStack(t, false)
	principals, err := api.NewPrincipals([]api.Principal{{Name: "bob", Token: tokBob, Roles: []api.Role{api.RoleApprover}}})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := api.StartService(s.nc, api.ServiceConfig{Intake: s.intake, Principals: principals, Queues: oneInFlight{},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	code, out, errOut := s.weir(t, "queue", "in-flight", "--token", tokBob)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "in-flight", out, "TO", "REQUESTER", "AGE", "AMBIGUOUS", cliTestAddr, "alice", "1m30s", "YES")
	code, out, errOut = s.weir(t, "queue", "approvals", "--token", tokBob)
	wantCode(t, code, 0, out, errOut)
	if strings.Contains(out, "AMBIGUOUS") {
		t.Fatalf("approvals show an ambiguity column:\n%s", out)
	}
}
