package nodetest_test

import (
	"context"
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas/hotwallet"
	"github.com/weir-payouts/weir/tron"
	"github.com/weir-payouts/weir/tron/nodetest"
)

func TestLaggingBackendZeroBehindSatisfiesTheWalletContract(t *testing.T) {
	nodetest.RunWallet(t, func(t *testing.T, cfg tron.SimConfig) nodetest.Harness {
		sim := tron.NewSimNode(cfg)
		return nodetest.Harness{Node: &nodetest.Lagging{Sim: sim}, Sim: sim}
	})
}

func TestBalancedOverUpToDateBackendsSatisfiesTheWalletContract(t *testing.T) {
	nodetest.RunWallet(t, func(t *testing.T, cfg tron.SimConfig) nodetest.Harness {
		sim := tron.NewSimNode(cfg)
		return nodetest.Harness{Node: nodetest.NewBalanced(nil, sim, &nodetest.Lagging{Sim: sim}), Sim: sim}
	})
}

// nodeOnly hides every method of a SimNode but tron.Node's: a backend
// that reads no wallets.
type nodeOnly struct{ tron.Node }

func TestBalancedRoutesWalletReadsAndABackendWithoutThemSaysSo(t *testing.T) {
	ctx := context.Background()
	sim := tron.NewSimNode(tron.SimConfig{Instant: true})
	hot := tron.MustParseAddress("TNyYNoVfDGHVvyxMjiCm9z7rHNFoR14DSy")
	sim.SetBalance(hot, big.NewInt(7_000_000))
	b := nodetest.NewBalanced(nodetest.ByMethod(0, map[tron.NodeMethod]int{tron.NodeAccount: 1, tron.NodeGenesis: 1}), sim, nodeOnly{sim})
	if got, err := b.TokenBalance(ctx, tron.USDTContract, hot); err != nil || got.Int64() != 7_000_000 {
		t.Fatalf("balance through backend 0: %v, %v", got, err)
	}
	if _, err := b.Account(ctx, hot); !errors.Is(err, tron.ErrNotSupported) {
		t.Fatalf("account through a backend without wallet reads: %v, want ErrNotSupported", err)
	}
	if _, err := b.Genesis(ctx); !errors.Is(err, tron.ErrNotSupported) {
		t.Fatalf("genesis through a backend without chain reads: %v, want ErrNotSupported", err)
	}
	want := []nodetest.Routed{{1, tron.NodeTokenBalance, 0}, {2, tron.NodeAccount, 1}, {3, tron.NodeGenesis, 1}}
	got := b.Calls()
	if len(got) != len(want) {
		t.Fatalf("calls %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("calls %+v, want %+v", got, want)
		}
	}
}

func TestLaggingBackendHasNoTransfersOfBlocksItHasNotSeen(t *testing.T) {
	ctx := context.Background()
	sim := tron.NewSimNode(tron.SimConfig{Instant: true, StartNumber: 100})
	sim.Advance(100)
	lag := &nodetest.Lagging{Sim: sim, Behind: 60}
	solid := sim.CurrentSolidHead().Number
	if _, err := lag.SolidBlockTransfers(ctx, solid); !errors.Is(err, tron.ErrBlockNotSolid) {
		t.Fatalf("transfers of a block the backend lacks: %v, want ErrBlockNotSolid", err)
	}
	if txs, err := lag.SolidBlockTransfers(ctx, solid-60); err != nil || txs == nil {
		t.Fatalf("transfers of a block it has: %v, %v", txs, err)
	}
	g, err := lag.Genesis(ctx)
	if want, _ := sim.Genesis(ctx); err != nil || g != want {
		t.Fatalf("genesis %+v, %v; the chain's is %+v", g, err, want)
	}
}

// The hot-wallet monitor behind a balancer over an up-to-date and a
// lagging backend: it reads the wallet, pauses sending when it runs dry
// and resumes once it is funded.
func TestWalletMonitoringWorksBehindABalancer(t *testing.T) {
	ctx := context.Background()
	sim := tron.NewSimNode(tron.SimConfig{Instant: true})
	hot := tron.MustParseAddress("TNyYNoVfDGHVvyxMjiCm9z7rHNFoR14DSy")
	sim.SetBalance(hot, big.NewInt(5_000_000))
	sim.SetTRX(hot, 500*tron.SunPerTRX)
	b := nodetest.NewBalanced(nodetest.Seeded(14, 0.5, 0.5), sim, &nodetest.Lagging{Sim: sim, Behind: 3})
	m, err := hotwallet.New(hotwallet.Config{Reader: b, Address: hot, FeeLimit: 100 * tron.SunPerTRX})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Refresh(ctx); err != nil {
		t.Fatalf("reading the wallet behind the balancer: %v", err)
	}
	if s := m.Status(); s.USDT != "5" || s.TRX != "500" || s.Sending != hotwallet.SendingActive {
		t.Fatalf("status %+v", s)
	}
	ten := aggregate.Withdrawal{Amount: aggregate.MustParseAmount(aggregate.USDT, "10")}
	if ok, why := m.MaySend(ctx, ten); ok || !strings.Contains(why, "USDT short") {
		t.Fatalf("10 of 5 USDT: ok=%v %q", ok, why)
	}
	if err := sim.Fund(hot, big.NewInt(20_000_000), 0); err != nil {
		t.Fatal(err)
	}
	if err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, why := m.MaySend(ctx, ten); !ok {
		t.Fatalf("refused after funding: %s", why)
	}
	methods := map[tron.NodeMethod]bool{}
	for _, c := range b.Calls() {
		methods[c.Method] = true
	}
	if !methods[tron.NodeTokenBalance] || !methods[tron.NodeAccount] || !methods[tron.NodeChainPrices] {
		t.Fatalf("the monitor's reads did not go through the balancer: %+v", b.Calls())
	}
}
