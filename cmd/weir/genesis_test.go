package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/sagas/audit"
	"github.com/weir-payouts/weir/tron"
	"github.com/weir-payouts/weir/tron/tronhttp"
)

// otherChain serves a simulated chain of its own (another genesis) over
// java-tron's HTTP API.
func otherChain(t *testing.T) (string, string) {
	t.Helper()
	sim := tron.NewSimNode(tron.SimConfig{Seed: 0x0e7e4})
	sim.Advance(30)
	g, err := sim.Genesis(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(tronhttp.NewHandler(sim))
	t.Cleanup(srv.Close)
	return srv.URL, g.IDHex()
}

// TestServeRecordsItsChainAndRefusesAnother: the first `weir serve`
// records its node's genesis in the configuration; `weir audit` checks the
// node against it although the log has no envelope (exit 0 on that chain,
// 1 with a chain_identity violation on another); a restart whose
// --tron-node serves another chain is refused, naming the flag and both
// ids, and records nothing.
func TestServeRecordsItsChainAndRefusesAnother(t *testing.T) {
	dir := t.TempDir()
	cfg := devRestartConfig(dir)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	otherURL, otherGenesis := otherChain(t)

	eng, err := startEngine(ctx, cfg, log, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ours := genesisID(t, eng)
	if ours == otherGenesis {
		t.Fatal("two simulated chains share a genesis")
	}
	cs, err := eng.repo.ConfigLatest(ctx)
	if err != nil || cs.Config.ChainGenesis != ours {
		t.Fatalf("configuration: %+v %v; want chain %s recorded", cs, err, ours)
	}

	code, rep := auditAll(t, eng)
	if code != 0 || !rep.OK || rep.Chain.Identity != "log genesis" || rep.Chain.LogGenesis != ours {
		t.Fatalf("audit on the recorded chain: exit %d chain %+v\n%+v", code, rep.Chain, rep.Violations)
	}
	code, out, errOut := runWeir(t, "audit", "--all", "--json", "--nats-url", eng.natsURL, "--token", "dev-olivia-token", "--tron-node", otherURL)
	rep = audit.Report{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("audit --json (exit %d): %v\n%s\n%s", code, err, out, errOut)
	}
	if code != 1 || rep.OK || rep.Chain.Identity != "mismatch" || len(rep.Violations) != 1 || rep.Violations[0].Check != "chain_identity" ||
		!strings.Contains(rep.Violations[0].What, otherGenesis) || !strings.Contains(rep.Violations[0].What, ours) {
		t.Fatalf("audit on another chain: exit %d chain %+v\n%+v", code, rep.Chain, rep.Violations)
	}
	if err := eng.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// Restart against a node of another chain: refused.
	keyFile := filepath.Join(t.TempDir(), "hot.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(devSigningKey[:])), 0o600); err != nil {
		t.Fatal(err)
	}
	wrong := cfg
	wrong.TronNode, wrong.TronHTTP, wrong.SigningKey, wrong.StartupWait = otherURL, "", keyFile, 5*time.Second
	wrong.Principals, wrong.Custody = devFlagFiles(t)
	eng, err = startEngine(ctx, wrong, log, io.Discard)
	if err == nil {
		_ = eng.Close(ctx)
		t.Fatal("serve started on another chain")
	}
	for _, want := range []string{"--tron-node " + otherURL, "--publish-config", ours, otherGenesis} {
		if !errors.Is(err, sagas.ErrChainMismatch) || !strings.Contains(err.Error(), want) {
			t.Fatalf("refusal %q does not name %s", err, want)
		}
	}

	// The log is as it was: the same configuration version, the same chain.
	eng, err = startEngine(ctx, cfg, log, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = eng.Close(ctx) }()
	if after, err := eng.repo.ConfigLatest(ctx); err != nil || after.Version != cs.Version || after.Config.ChainGenesis != ours {
		t.Fatalf("after the refusal: %+v %v, want v%d on %s", after, err, cs.Version, ours)
	}
}
