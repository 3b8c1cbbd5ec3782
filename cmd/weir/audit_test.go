package main

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/sagas/audit"
	"github.com/weir-payouts/weir/tron"
	"github.com/weir-payouts/weir/tron/tronhttp"
)

// The judgement is tested in sagas/audit; these tests cover the command:
// flags, exit status, the human report, --json, the node over HTTP. They
// log in as an auditor-only principal (stack.weir).

// TestAuditPrintsFindingsAndExitsByOutcome: a clean log prints OK and
// exits 0; a forged self-approval prints the violation with its withdrawal,
// event and check, under its event in the timeline, and exits 1.
func TestAuditPrintsFindingsAndExitsByOutcome(t *testing.T) {
	s := newStack(t, false)
	ctx := t.Context()
	if _, _, err := s.intake.Credit(ctx, sagas.CreditInput{Account: "acme", CreditID: "seed", Amount: json.RawMessage(`"100"`)}); err != nil {
		t.Fatal(err)
	}
	id := uuid.NewString()
	if _, _, err := s.intake.Request(ctx, sagas.RequestInput{OperationID: id, Account: "acme", ToAddress: cliTestAddr, Amount: json.RawMessage(`"10"`), By: "alice"}); err != nil {
		t.Fatal(err)
	}
	sim := tron.NewSimNode(tron.SimConfig{Start: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)})
	sim.Advance(30)
	srv := httptest.NewServer(tronhttp.NewHandler(sim))
	t.Cleanup(srv.Close)

	code, out, errOut := s.weir(t, "audit", "--all", "--tron-node", srv.URL)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "clean audit --all", out, "audited 1 withdrawal(s), 1 account(s)", "states: requested 1",
		"chain: 0 txid(s) checked against "+srv.URL, "OK: every check holds")
	if errOut != "" {
		t.Fatalf("stderr is not a terminal, yet: %q", errOut)
	}

	// The requester approves her own withdrawal: appended around the deciders.
	_, pos, err := s.repo.Withdrawal(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	forged := aggregate.Approved{Approval: aggregate.Approval{By: "alice", At: time.Now().UTC(), Rule: "single", PolicyVersion: 0}, RequiredApprovals: 1, At: time.Now().UTC()}
	if _, err := s.store.Append(ctx, eventstore.Key{Type: eventlog.TypeWithdrawal, ID: id}, pos, eventstore.Event{Type: forged.EventType(), Data: forged}); err != nil {
		t.Fatal(err)
	}
	version := pos.Version + 1

	code, out, errOut = s.weir(t, "audit", "--all", "--tron-node", "")
	wantCode(t, code, 1, out, errOut)
	wantContains(t, "audit --all", out,
		"VIOLATION withdrawal "+id+" event "+itoa(version)+" (withdrawal.approved) [approval]: approval by alice, who requested the withdrawal (self-approval)",
		"FAILED: ")
	wantContains(t, "stderr", errOut, "weir audit: ")

	code, out, errOut = s.weir(t, "audit", id, "--tron-node", "http://127.0.0.1:1")
	wantCode(t, code, 1, out, errOut)
	wantContains(t, "audit ID", out, "withdrawal "+id+": approved", "VERSION", "withdrawal.approved",
		"^ VIOLATION [approval]: approval by alice", "chain: tron node http://127.0.0.1:1 unreachable")

	code, out, errOut = s.weir(t, "audit", id, "--tron-node", "", "--json")
	wantCode(t, code, 1, out, errOut)
	var rep audit.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.OK || rep.Withdrawal == nil || len(rep.Violations) == 0 {
		t.Fatalf("audit ID --json: %v %s", err, out)
	}
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

// TestAuditRefusesBadArguments: an id that is not a UUID, an unknown
// withdrawal, neither an id nor --all.
func TestAuditRefusesBadArguments(t *testing.T) {
	s := newStack(t, false)
	code, out, errOut := s.weir(t, "audit")
	wantCode(t, code, 2, out, errOut)
	code, out, errOut = s.weir(t, "audit", "x", "--all")
	wantCode(t, code, 2, out, errOut)
	code, out, errOut = s.weir(t, "audit", "not-a-uuid")
	wantCode(t, code, 2, out, errOut)
	wantContains(t, "bad id", errOut, "could not run", "not a withdrawal id")
	code, out, errOut = s.weir(t, "audit", uuid.NewString())
	wantCode(t, code, 2, out, errOut)
	wantContains(t, "unknown id", errOut, "could not run", "not found")
	// An empty log passes.
	code, out, errOut = s.weir(t, "audit", "--all", "--tron-node", "")
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "empty log", out, "audited 0 withdrawal(s)", "OK")
}

// TestAuditExitsTwoWhenItCannotRun: no NATS there, or a NATS user not
// allowed to read the log, is "could not run" (2), never "violation" (1).
func TestAuditExitsTwoWhenItCannotRun(t *testing.T) {
	code, out, errOut := runWeir(t, "audit", "--all", "--nats-url", "nats://127.0.0.1:1", "--tron-node", "")
	wantCode(t, code, 2, out, errOut)
	wantContains(t, "no server", errOut, "could not run", "cannot connect")

	srv := eventstoretest.StartServer(t, &server.Options{JetStream: true,
		Users: []*server.User{{Username: "nobody", Password: "pw", Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{Deny: []string{"$JS.>"}},
		}}}})
	url := fmt.Sprintf("nats://nobody:pw@%s", srv.Addr())
	start := time.Now()
	code, out, errOut = runWeir(t, "audit", "--all", "--nats-url", url, "--tron-node", "")
	wantCode(t, code, 2, out, errOut)
	wantContains(t, "not authorised", errOut, "could not run: not authorised")
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %s to notice the refusal", d)
	}
}

// TestProgressDrawsOnlyOnATerminal: a buffer (or a pipe) gets nothing; a
// terminal gets a bar that ends with a cleared line.
func TestProgressDrawsOnlyOnATerminal(t *testing.T) {
	var buf strings.Builder
	p := newProgress(&buf)
	p.Start("withdrawals", 4)
	p.Add(2)
	p.Done()
	if buf.Len() != 0 {
		t.Fatalf("drew on a buffer: %q", buf.String())
	}
	p = &progress{w: &buf, on: true}
	p.Start("withdrawals", 4)
	p.Set(1) // within 100 ms of the last drawing: skipped
	p.last = time.Time{}
	p.Set(2)
	p.Done()
	if strings.Contains(buf.String(), "1/4") {
		t.Fatalf("redrew within 100 ms: %q", buf.String())
	}
	wantContains(t, "bar", buf.String(), "withdrawals", "[###############...............]  50% 2/4", "100% 4/4", "\r\033[K")
	var nilBar *progress
	nilBar.Start("x", 1)
	nilBar.Add(1)
	nilBar.Done()
}
