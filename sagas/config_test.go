package sagas_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
	"github.com/weir-payouts/weir/sagas"
)

const (
	chainA = "00000000000000001ebf88508a03865c71d452e25f4d51194196a1d22b6653dc"
	chainB = "0000000000000000aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
)

// TestStartConfigRecordsTheChainAndRefusesAnother: the first start records
// the node's genesis; a start on another chain is refused naming both ids
// and appends nothing — even with Replace (dev mode) — until ReplaceChain
// (--publish-config); a process that does not know the chain changes
// nothing; a log recorded before the chain was learns it without Replace.
func TestStartConfigRecordsTheChainAndRefusesAnother(t *testing.T) {
	repo := sagas.NewRepo(eventstoretest.Start(t).Store(t.Context(), eventlog.NewRegistry()))
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pub := func(replace, replaceChain bool) sagas.ConfigPublish {
		at = at.Add(time.Second)
		return sagas.ConfigPublish{By: aggregate.SystemActor, Process: "test", Replace: replace, ReplaceChain: replaceChain, At: at}
	}
	files := aggregate.Config{HotWallets: []string{"TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC"}, PolicyQuorum: 1}

	// A log older than the field: v1 without the chain.
	if cs, _, err := repo.StartConfig(t.Context(), files, pub(false, false)); err != nil || cs.Version != 1 || cs.Config.ChainGenesis != "" {
		t.Fatalf("v1: %+v %v", cs, err)
	}
	// The first start that knows the chain records it, without Replace.
	withA := files
	withA.ChainGenesis = strings.ToUpper(chainA)
	cs, published, err := repo.StartConfig(t.Context(), withA, pub(false, false))
	if err != nil || !published || cs.Version != 2 || cs.Config.ChainGenesis != chainA {
		t.Fatalf("recording the chain: %+v %v %v", cs, published, err)
	}
	// The same chain again: nothing; a process that does not know: nothing.
	for _, c := range []aggregate.Config{withA, files} {
		if cs, published, err := repo.StartConfig(t.Context(), c, pub(false, false)); err != nil || published || cs.Version != 2 {
			t.Fatalf("same chain (%q): %+v %v %v", c.ChainGenesis, cs, published, err)
		}
	}
	// Another chain: refused even with Replace, nothing appended.
	withB := files
	withB.ChainGenesis = chainB
	_, _, err = repo.StartConfig(t.Context(), withB, pub(true, false))
	var mismatch *sagas.ChainMismatchError
	if !errors.Is(err, sagas.ErrChainMismatch) || !errors.As(err, &mismatch) || mismatch.Recorded != chainA || mismatch.Node != chainB ||
		!strings.Contains(err.Error(), chainA) || !strings.Contains(err.Error(), chainB) {
		t.Fatalf("another chain: %v", err)
	}
	if cs, err := repo.ConfigLatest(t.Context()); err != nil || cs.Version != 2 || cs.Config.ChainGenesis != chainA {
		t.Fatalf("after the refusal: %+v %v", cs, err)
	}
	// Another chain and other files, without Replace: the chain is named
	// first (the more dangerous difference).
	withB.DailyLimit = aggregate.MustParseAmount(aggregate.USDT, "5")
	if _, _, err := repo.StartConfig(t.Context(), withB, pub(false, false)); !errors.Is(err, sagas.ErrChainMismatch) {
		t.Fatalf("another chain and a drift: %v", err)
	}
	// A drift on the recorded chain stays a drift.
	driftA := withA
	driftA.DailyLimit = withB.DailyLimit
	if _, _, err := repo.StartConfig(t.Context(), driftA, pub(false, false)); !errors.Is(err, sagas.ErrConfigDrift) {
		t.Fatalf("a drift: %v", err)
	}
	// --publish-config moves the log to the other chain.
	if cs, published, err := repo.StartConfig(t.Context(), withB, pub(true, true)); err != nil || !published || cs.Version != 3 || cs.Config.ChainGenesis != chainB {
		t.Fatalf("publishing the other chain: %+v %v %v", cs, published, err)
	}
}

// TestConfigEventWithoutChainGenesisDecodes: a configuration event written
// before the field existed decodes with the chain unknown and is valid; a
// malformed one is refused, naming the field.
func TestConfigEventWithoutChainGenesisDecodes(t *testing.T) {
	old := `{"version":1,"config":{"principals":[],"hot_wallets":["TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC"],"custody":[],"daily_limit":"0","credit_review_above":"0","policy_quorum":2},"by":"weir-serve","at":"2026-01-01T00:00:00Z"}`
	var ev aggregate.ConfigChanged
	if err := json.Unmarshal([]byte(old), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Config.ChainGenesis != "" || ev.Config.Validate() != nil {
		t.Fatalf("old event: %+v %v", ev.Config, ev.Config.Validate())
	}
	b, err := json.Marshal(ev)
	if err != nil || strings.Contains(string(b), "chain_genesis") {
		t.Fatalf("an unknown chain is written as a value: %s %v", b, err)
	}
	ev.Config.ChainGenesis = "00ff"
	var de *aggregate.Error
	if err := ev.Config.Validate(); !errors.As(err, &de) || de.Field != "chain_genesis" {
		t.Fatalf("bad genesis: %v", err)
	}
}
