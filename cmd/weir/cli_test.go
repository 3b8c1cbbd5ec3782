package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/cmd/weir/natsauth"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
	"github.com/weir-payouts/weir/sagas"
)

// Tokens of the test principals.
const (
	tokAlice  = "alice-token-0001" // requester, approver
	tokBob    = "bob-token-00002"  // approver
	tokCarol  = "carol-token-0003" // approver
	tokOlivia = "olivia-token-005" // operator, requester
	tokAudrey = "audrey-token-006" // auditor only: reads the event log, nothing else
	tokOscar  = "oscar-token-0007" // operator: the second pair of eyes

	cliTestAddr = "TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC"
)

// stack is the real weir stack in process: an embedded nats-server with a
// TCP listener (the commands dial it like a producer would), the event
// store, the repo, the ledger and intake, and — for the client commands —
// the NATS micro service.
type stack struct {
	emb    *eventstoretest.Server
	url    string
	nc     *nats.Conn
	store  *eventstore.Store
	repo   *sagas.Repo
	ledger *sagas.Ledger
	intake *sagas.Intake
	svc    micro.Service
	// principals and log are what the service was started with.
	principals *api.Principals
	log        *slog.Logger
}

func newStack(t *testing.T, withService bool) *stack {
	t.Helper()
	principals, err := api.NewPrincipals([]api.Principal{
		{Name: "alice", Token: tokAlice, Roles: []api.Role{api.RoleRequester, api.RoleApprover}},
		{Name: "bob", Token: tokBob, Roles: []api.Role{api.RoleApprover}},
		{Name: "carol", Token: tokCarol, Roles: []api.Role{api.RoleApprover}},
		{Name: "olivia", Token: tokOlivia, Roles: []api.Role{api.RoleOperator, api.RoleRequester}},
		{Name: "audrey", Token: tokAudrey, Roles: []api.Role{api.RoleAuditor}},
		{Name: "oscar", Token: tokOscar, Roles: []api.Role{api.RoleOperator}},
	})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	emb := eventstoretest.Start(t, eventstoretest.Listen(), eventstoretest.Auth(natsauth.New(principals, logger)))
	nc := emb.Conn()
	store := emb.StoreOn(t.Context(), nc, eventlog.NewRegistry())
	repo := sagas.NewRepo(store)
	ledger := sagas.NewLedger(repo, aggregate.Amount{}, nil, logger)
	s := &stack{emb: emb, url: emb.ClientURL(), nc: nc, store: store, repo: repo, ledger: ledger,
		intake: sagas.NewIntake(repo, ledger, nil), principals: principals, log: logger}
	if withService {
		s.svc, err = api.StartService(nc, api.ServiceConfig{Intake: s.intake, Principals: principals, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.svc.Stop() })
	}
	return s
}

// weir runs one command against the stack (its --nats-url is appended).
// An audit logs in as the auditor-only principal unless the arguments give
// another --token (a later flag wins): its NATS permissions must be all the
// audit needs.
func (s *stack) weir(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	if len(args) > 0 && args[0] == "audit" {
		args = append([]string{"audit", "--token", tokAudrey}, args[1:]...)
	}
	return runWeir(t, append(args, "--nats-url", s.url)...)
}

// natsGet asks the service directly, for comparing the CLI's --json.
func (s *stack) natsGet(t *testing.T, subject, token string, body any) []byte {
	t.Helper()
	msg := nats.NewMsg(subject)
	msg.Data, _ = json.Marshal(body)
	msg.Header.Set("Authorization", "Bearer "+token)
	m, err := s.nc.RequestMsg(msg, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return m.Data
}

func wantCode(t *testing.T, code, want int, stdout, stderr string) {
	t.Helper()
	if code != want {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, want, stdout, stderr)
	}
}

func wantContains(t *testing.T, what, text string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(text, sub) {
			t.Fatalf("%s does not contain %q:\n%s", what, sub, text)
		}
	}
}

// TestProducerCommandsDriveTheService walks a withdrawal through the CLI:
// credit, request (and its replay and conflict), a refused self-approval,
// approvals, show, events, balance — human output and --json.
func TestProducerCommandsDriveTheService(t *testing.T) {
	s := newStack(t, true)

	code, out, errOut := s.weir(t, "credit", "--account", "acme", "--credit-id", "dep-1", "--amount", "5000", "--token", tokOlivia)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "credit output", out, "account", "acme", "available", "5000")
	if strings.Contains(out, "idempotent replay") {
		t.Fatalf("a first credit reported as a replay:\n%s", out)
	}
	code, out, errOut = s.weir(t, "credit", "--account", "acme", "--credit-id", "dep-1", "--amount", "5000.00", "--token", tokOlivia)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "credit replay output", out, "(idempotent replay)")

	// request, --json: exactly the service's reply.
	id := uuid.NewString()
	code, out, errOut = s.weir(t, "request", "--id", id, "--account", "acme", "--to", cliTestAddr, "--amount", "1500.50", "--token", tokAlice, "--json")
	wantCode(t, code, 0, out, errOut)
	var w aggregate.WithdrawalView
	if err := json.Unmarshal([]byte(out), &w); err != nil {
		t.Fatalf("request --json is not a withdrawal: %v\n%s", err, out)
	}
	if w.ID != id || w.State != aggregate.StateRequested || w.Amount != "1500.5" || w.AmountUnits != "1500500000" || w.RequiredApprovals != 2 {
		t.Fatalf("request --json: %+v", w)
	}

	// The same request again is a replay; another amount is a conflict.
	code, out, errOut = s.weir(t, "request", "--id", id, "--account", "acme", "--to", cliTestAddr, "--amount", "1500.5", "--token", tokAlice)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "request replay output", out, "(idempotent replay)", "state", "requested", id)
	code, out, errOut = s.weir(t, "request", "--id", id, "--account", "acme", "--to", cliTestAddr, "--amount", "99", "--token", tokAlice)
	wantCode(t, code, 1, out, errOut)
	if !strings.HasPrefix(errOut, "weir request: idempotency_conflict: ") || out != "" {
		t.Fatalf("conflict: stdout %q stderr %q", out, errOut)
	}

	// A self-approval is refused: one line on stderr; with --json the
	// error document on stdout too.
	code, out, errOut = s.weir(t, "approve", id, "--token", tokAlice)
	wantCode(t, code, 1, out, errOut)
	if !strings.HasPrefix(errOut, "weir approve: self_approval: ") || out != "" {
		t.Fatalf("self-approval: stdout %q stderr %q", out, errOut)
	}
	code, out, errOut = s.weir(t, "approve", "--json", id, "--token", tokAlice)
	wantCode(t, code, 1, out, errOut)
	var eb api.ErrorBody
	if err := json.Unmarshal([]byte(out), &eb); err != nil || eb.Error.Code != "self_approval" || eb.Error.Message == "" {
		t.Fatalf("self-approval --json: %v %q", err, out)
	}
	wantContains(t, "stderr", errOut, "weir approve: self_approval: ")

	// Flags before or after the id.
	code, out, errOut = s.weir(t, "approve", "--token", tokBob, id)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "approve output", out, "state", "requested", "approvals", "1 of 2 required", "bob", "four-eyes")
	code, out, errOut = s.weir(t, "approve", id, "--token", tokCarol)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "approve output", out, "approved", "2 of 2 required", "carol", "POLICY VERSION")

	// show --json equals the service's reply (= the HTTP API's body).
	code, out, errOut = s.weir(t, "show", id, "--json", "--token", tokBob)
	wantCode(t, code, 0, out, errOut)
	if want := string(s.natsGet(t, api.SubjectWithdrawalGet, tokBob, map[string]string{"id": id})) + "\n"; out != want {
		t.Fatalf("show --json:\n%s\nservice:\n%s", out, want)
	}
	code, out, errOut = s.weir(t, "show", id, "--token", tokBob)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "show output", out, "withdrawal", id, "approved", "1500.5 USDT-TRC20 (1500500000 units)", "route", "txid", "attempt", "reason")

	// events: a table; --json is the service's reply.
	code, out, errOut = s.weir(t, "events", id, "--token", tokBob)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "events output", out, "VERSION", "AT", "TYPE", "STATE",
		"withdrawal.requested", "withdrawal.funds_reserved", "withdrawal.approval_recorded", "withdrawal.approved", "by=carol")
	code, out, errOut = s.weir(t, "events", "--json", id, "--token", tokBob)
	wantCode(t, code, 0, out, errOut)
	if want := string(s.natsGet(t, api.SubjectWithdrawalEvents, tokBob, map[string]string{"id": id})) + "\n"; out != want {
		t.Fatalf("events --json:\n%s\nservice:\n%s", out, want)
	}

	// balance, then cancel by the requester releases the reservation.
	code, out, errOut = s.weir(t, "balance", "acme", "--token", tokBob)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "balance output", out, "available", "3499.5", "reserved", "1500.5")
	code, out, errOut = s.weir(t, "cancel", id, "--token", tokAlice)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "cancel output", out, "rejected (terminal)", "cancelled")
	code, out, errOut = s.weir(t, "cancel", id, "--token", tokBob)
	wantCode(t, code, 1, out, errOut)
	wantContains(t, "cancel by another", errOut, "weir cancel: forbidden: ")
	code, out, errOut = s.weir(t, "balance", "acme", "--token", tokBob)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "balance after cancel", out, "available", "5000", "reserved   0")

	code, out, errOut = s.weir(t, "show", uuid.NewString(), "--token", tokBob)
	wantCode(t, code, 1, out, errOut)
	wantContains(t, "unknown withdrawal", errOut, "weir show: not_found: ")
}

// TestPolicyCommandsShowAndSet: the token comes from WEIR_TOKEN; a new
// policy version is shown with its version; an invalid one is refused.
func TestPolicyCommandsShowAndSet(t *testing.T) {
	s := newStack(t, true)
	t.Setenv("WEIR_TOKEN", tokOlivia)

	code, out, errOut := s.weir(t, "policy", "show")
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "policy show", out, `"four-eyes above 1000" version 0`, "single", "four-eyes", "1000")

	dir := t.TempDir()
	good := filepath.Join(dir, "solo.json")
	if err := os.WriteFile(good, []byte(`{"name":"solo","rules":[{"name":"one","threshold":"0","approvers":1}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = s.weir(t, "policy", "set", "--file", good)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "policy set", out, "policy version 1 in force", `"solo" version 1`)

	code, out, errOut = s.weir(t, "policy", "show", "--json")
	wantCode(t, code, 0, out, errOut)
	var p api.PolicyView
	if err := json.Unmarshal([]byte(out), &p); err != nil || p.Version != 1 || p.Name != "solo" {
		t.Fatalf("policy show --json: %v %s", err, out)
	}

	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"name":"x","rules":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = s.weir(t, "policy", "set", "--file", bad)
	wantCode(t, code, 1, out, errOut)
	wantContains(t, "invalid policy", errOut, "weir policy set: invalid_policy: ")

	// Only an operator may set it.
	code, out, errOut = s.weir(t, "policy", "set", "--file", good, "--token", tokBob)
	wantCode(t, code, 1, out, errOut)
	wantContains(t, "forbidden", errOut, "weir policy set: forbidden: ")
}

// TestClientCommandsExplainFailures: usage errors exit 2, help exits 0,
// and a NATS without the weir service says so.
func TestClientCommandsExplainFailures(t *testing.T) {
	for _, name := range []string{"request", "approve", "cancel", "credit", "show", "events", "balance", "queue", "audit"} {
		code, out, errOut := runWeir(t, name, "--help")
		wantCode(t, code, 0, out, errOut)
		wantContains(t, name+" --help", errOut, "Usage: weir "+name, "-nats-url", "-token")
	}
	for _, args := range [][]string{{"policy", "show", "--help"}, {"policy", "set", "--help"}} {
		code, out, errOut := runWeir(t, args...)
		wantCode(t, code, 0, out, errOut)
		wantContains(t, strings.Join(args, " "), errOut, "Usage: weir policy")
	}
	code, out, errOut := runWeir(t, "policy", "--help")
	wantCode(t, code, 0, out, errOut)

	code, out, errOut = runWeir(t, "approve")
	wantCode(t, code, 2, out, errOut)
	code, out, errOut = runWeir(t, "approve", "a", "b")
	wantCode(t, code, 2, out, errOut)
	code, out, errOut = runWeir(t, "request", "--account", "acme")
	wantCode(t, code, 2, out, errOut)
	wantContains(t, "request usage", errOut, "--amount, --id, --to required")
	code, out, errOut = runWeir(t, "policy", "frobnicate")
	wantCode(t, code, 2, out, errOut)

	// A NATS server with no weir service on it.
	s := newStack(t, false)
	code, out, errOut = s.weir(t, "show", uuid.NewString(), "--token", tokBob)
	wantCode(t, code, 1, out, errOut)
	wantContains(t, "no service", errOut, "weir show: no weir service at "+s.url)

	// No NATS at all.
	s.emb.Shutdown()
	code, out, errOut = s.weir(t, "show", uuid.NewString(), "--timeout", "2s")
	wantCode(t, code, 1, out, errOut)
	wantContains(t, "no NATS", errOut, "weir show: cannot connect to NATS at "+s.url)
}

// TestParseInterspersedKeepsFlagValues: a flag's value is never taken for
// the positional argument, wherever the flag is.
func TestParseInterspersedKeepsFlagValues(t *testing.T) {
	for _, args := range [][]string{
		{"ID", "--token", "T", "--json"},
		{"--token", "T", "ID", "--json"},
		{"--json", "--token=T", "ID"},
		{"--token", "T", "--json", "--", "ID"},
	} {
		var stderr bytes.Buffer
		fs := newFlagSet("x", "x", &stderr)
		o := addClientFlags(fs)
		pos, err := parseInterspersed(fs, args)
		if err != nil || len(pos) != 1 || pos[0] != "ID" || o.token != "T" || !o.json {
			t.Fatalf("%q: pos %q token %q json %v err %v", args, pos, o.token, o.json, err)
		}
	}
}
