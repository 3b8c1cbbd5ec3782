package audit_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/sagas/audit"
)

// TestApproverIsJudgedByTheConfigurationInForceAtTheApproval: carol's
// approval given while she was an approver stands after a later version
// takes the role away; the same approval forged after that version is a
// violation — judged by the log's position, not by the event's say-so.
func TestApproverIsJudgedByTheConfigurationInForceAtTheApproval(t *testing.T) {
	h := newHistory(t)
	before := h.pay("12", "carol")
	h.setConfig(func(c *aggregate.Config) {
		c.Principals = slices.DeleteFunc(slices.Clone(c.Principals), func(p aggregate.ConfigPrincipal) bool { return p.Name == "carol" })
	})
	after := h.request("10")
	h.forge(after, aggregate.Approved{Approval: aggregate.Approval{By: "carol", At: h.at(), Rule: "single", PolicyVersion: h.policy().Version}, RequiredApprovals: 1, At: h.now})
	rep := h.all(false)
	for _, f := range rep.Violations {
		if f.Withdrawal == before {
			t.Errorf("an approval given while carol was an approver is blamed: %s", f.What)
		}
	}
	want := mutated{check: "authority", withdrawal: after, version: 3, what: `approval by "carol", who is no principal in configuration v2`}
	if !slices.ContainsFunc(rep.Violations, want.matches) {
		t.Fatalf("the approval after v2 is not named:\n%s", findingsText(rep.Violations))
	}
}

// TestLogWithoutConfigurationIsJudgedAsBeforeWithANote: a log written
// before weir recorded its configuration audits clean (nothing to judge
// authority against), and the report says so.
func TestLogWithoutConfigurationIsJudgedAsBeforeWithANote(t *testing.T) {
	srv := eventstoretest.Start(t)
	store := srv.Store(t.Context(), eventlog.NewRegistry())
	repo := sagas.NewRepo(store)
	ledger := sagas.NewLedger(repo, aggregate.Amount{}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	in := sagas.NewIntake(repo, ledger, nil)
	if _, _, err := in.Credit(t.Context(), sagas.CreditInput{Account: "acme", CreditID: "seed", Amount: json.RawMessage(`"100"`)}); err != nil {
		t.Fatal(err)
	}
	id := uuid.NewString()
	if _, _, err := in.Request(t.Context(), sagas.RequestInput{OperationID: id, Account: "acme", ToAddress: payee, Amount: json.RawMessage(`"5"`), By: "anyone"}); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Approve(t.Context(), id, "someone"); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.All(t.Context(), store, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		t.Fatalf("a log without configuration is not judged as before:\n%s", findingsText(rep.Violations))
	}
	if !slices.ContainsFunc(rep.Notes, func(f audit.Finding) bool {
		return f.Check == "config" && strings.Contains(f.What, "records no configuration")
	}) {
		t.Fatalf("no note that the log records no configuration: %+v", rep.Notes)
	}
}

// TestAuditNamesAConfigurationNotPublishedByWeir: a configuration version
// whose publisher is a principal (weir serve is the only publisher) and
// one that skips a version are named with their stream sequence.
func TestAuditNamesAConfigurationNotPublishedByWeir(t *testing.T) {
	h := newHistory(t)
	k := eventstore.Key{Type: eventlog.TypeConfig, ID: eventlog.ConfigStreamID}
	forge := func(e aggregate.ConfigChanged) uint64 {
		t.Helper()
		_, pos, err := h.store.Load(t.Context(), k)
		if err != nil {
			t.Fatal(err)
		}
		if pos, err = h.store.Append(t.Context(), k, pos, eventstore.Event{Type: e.EventType(), Data: e}); err != nil {
			t.Fatal(err)
		}
		return pos.Sequence
	}
	cfg := h.config
	cfg.Principals = append(slices.Clone(cfg.Principals), aggregate.ConfigPrincipal{Name: "mallory", Roles: []string{aggregate.RoleOperator}})
	byMallory := forge(aggregate.ConfigChanged{Version: 2, Config: cfg, By: "mallory", At: h.at()})
	skipped := forge(aggregate.ConfigChanged{Version: 4, Config: h.config, By: aggregate.SystemActor, At: h.at()})
	rep := h.all(false)
	for _, want := range []mutated{
		{check: "config", seq: byMallory, what: `version 2 published by "mallory"`},
		{check: "config", seq: skipped, what: "version 4 follows version 2"},
	} {
		if !slices.ContainsFunc(rep.Violations, want.matches) {
			t.Errorf("not named: %+v\n%s", want, findingsText(rep.Violations))
		}
	}
}
