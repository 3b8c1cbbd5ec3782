package nodetest

import (
	"errors"
	"math/big"
	"testing"

	"github.com/weir-payouts/weir/tron"
)

// RunWallet runs the wallet and chain-reading contract (tron.WalletReader,
// tron.ChainReader) and the simulated chain's fee model against nodes made
// by newHarness, whose Node must implement both interfaces.
func RunWallet(t *testing.T, newHarness Factory) {
	tests := []struct {
		name string
		run  func(t *testing.T, newHarness Factory)
	}{
		{"ReadsTokenBalanceTRXResourcesAndPrices", testWalletRead},
		{"EstimateChargesAnAddressWithoutUSDTAboutTwice", testEstimate},
		{"TransferBurnsTRXForEnergyAndTheReceiptSaysHowMuch", testFeeBurnt},
		{"StakedEnergyIsUsedBeforeTRX", testStakedFirst},
		{"TooLowFeeLimitRunsOutOfEnergyAndBurnsTheLimit", testFeeLimitOOE},
		{"TooLittleTRXRunsOutOfEnergyAndTokensStay", testTRXShortOOE},
		{"ShortUSDTRevertsAndStillBurnsTheFee", testUSDTShortRevert},
		{"MemoBurnsOneTRXMore", testMemoFee},
		{"NoBandwidthAndNoTRXIsRefusedAtBroadcast", testBandwidthRefused},
		{"GenesisIsBlockZeroAndNamesTheChain", testGenesis},
		{"SolidBlockTransfersDecodeEachTransferWithItsReceipt", testSolidTransfers},
		{"GatewayNonAnswerToAReadIsErrBadResponse", testWalletNonAnswer},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newHarness)
		})
	}
}

func (f *fixture) wallet() tron.WalletReader {
	f.t.Helper()
	w, ok := f.h.Node.(tron.WalletReader)
	if !ok {
		f.t.Fatalf("%T is no tron.WalletReader", f.h.Node)
	}
	return w
}

func (f *fixture) chain() tron.ChainReader {
	f.t.Helper()
	c, ok := f.h.Node.(tron.ChainReader)
	if !ok {
		f.t.Fatalf("%T is no tron.ChainReader", f.h.Node)
	}
	return c
}

func (f *fixture) fund(a tron.Address, usdt, trxSun int64) {
	f.t.Helper()
	if err := f.h.Sim.Fund(a, big.NewInt(usdt), trxSun); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) account(a tron.Address) tron.Account {
	f.t.Helper()
	acct, err := f.wallet().Account(f.ctx, a)
	if err != nil {
		f.t.Fatalf("account %s: %v", a, err)
	}
	return acct
}

// land broadcasts tx, includes it and returns its receipt as the node
// reports it (the per-block infos carry the fee breakdown).
func (f *fixture) land(tx tron.SignedTx) tron.TxInfo {
	f.t.Helper()
	if res := f.broadcast(tx); !res.IsAccepted() {
		f.t.Fatalf("broadcast: %v", res)
	}
	block := f.h.Sim.Advance(1)
	f.h.Sim.Advance(tron.DefaultSolidityLag)
	infos, err := f.h.Node.SolidTxInfosByBlockNum(f.ctx, block.Number)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, in := range infos {
		if in.TxID == tx.TxID() {
			st := f.lookup(tx.TxID())
			if st.FeeSun != in.FeeSun || st.EnergyUsed != in.EnergyUsed || st.Receipt != in.Receipt {
				f.t.Fatalf("lookup %+v disagrees with the block's info %+v", st, in)
			}
			return in
		}
	}
	f.t.Fatalf("%x not in block %d", tx.TxID(), block.Number)
	return tron.TxInfo{}
}

func (f *fixture) usdt(a tron.Address) *big.Int {
	f.t.Helper()
	b, err := f.wallet().TokenBalance(f.ctx, tron.USDTContract, a)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

func testWalletRead(t *testing.T, newHarness Factory) {
	f := newFixture(t, newHarness, tron.SimConfig{})
	owner := f.signer.Address()
	f.fund(owner, 5_000_000, 100*tron.SunPerTRX)
	f.h.Sim.Stake(owner, 70_000, 1_000)
	if got := f.usdt(owner); got.Cmp(big.NewInt(5_000_000)) != 0 {
		t.Fatalf("balanceOf = %v, want 5000000", got)
	}
	if got := f.usdt(recipient); got.Sign() != 0 {
		t.Fatalf("balanceOf an empty address = %v", got)
	}
	acct := f.account(owner)
	want := tron.Account{Address: owner, Exists: true, BalanceSun: 100 * tron.SunPerTRX, EnergyLimit: 70_000,
		FreeNetLimit: tron.SimFreeBandwidth, NetLimit: 1_000}
	if acct != want {
		t.Fatalf("account %+v, want %+v", acct, want)
	}
	if acct.Energy() != 70_000 || acct.Bandwidth() != 1_600 {
		t.Fatalf("available energy %d bandwidth %d", acct.Energy(), acct.Bandwidth())
	}
	if got := f.account(recipient); got.Exists || got.BalanceSun != 0 {
		t.Fatalf("unknown address: %+v", got)
	}
	prices, err := f.wallet().ChainPrices(f.ctx)
	if err != nil || prices != (tron.ChainPrices{EnergySun: 210, BandwidthSun: 1_000, MemoSun: 1_000_000}) {
		t.Fatalf("prices %+v, %v", prices, err)
	}
}

func testEstimate(t *testing.T, newHarness Factory) {
	f := newFixture(t, newHarness, tron.SimConfig{})
	owner := f.signer.Address()
	f.fund(owner, 5_000_000, 100*tron.SunPerTRX)
	est := func(amount int64) (int64, error) {
		return f.wallet().EstimateTransferEnergy(f.ctx, owner, tron.USDTContract, recipient, big.NewInt(amount))
	}
	if e, err := est(1_000_000); err != nil || e != tron.SimTransferEnergyNewHolder {
		t.Fatalf("to an address without USDT: %d, %v; want %d", e, err, tron.SimTransferEnergyNewHolder)
	}
	f.fund(recipient, 1, 0)
	if e, err := est(1_000_000); err != nil || e != tron.SimTransferEnergy {
		t.Fatalf("to a holder: %d, %v; want %d", e, err, tron.SimTransferEnergy)
	}
	if e, err := est(6_000_000); !errors.Is(err, tron.ErrCallFailed) {
		t.Fatalf("more than the owner holds: %d, %v; want ErrCallFailed", e, err)
	}
}

func testFeeBurnt(t *testing.T, newHarness Factory) {
	f := newFixture(t, newHarness, tron.SimConfig{})
	owner := f.signer.Address()
	f.fund(owner, 10_000_000, 100*tron.SunPerTRX)
	in := f.land(f.signed(func(p *tron.TransferParams) { p.Amount = big.NewInt(1_000_000) }))
	wantFee := int64(tron.SimTransferEnergyNewHolder * tron.SimEnergyPriceSun)
	if in.Receipt != tron.ReceiptSuccess || in.EnergyUsed != tron.SimTransferEnergyNewHolder ||
		in.EnergyFeeSun != wantFee || in.FeeSun != wantFee || in.NetFeeSun != 0 || in.NetUsage <= 0 {
		t.Fatalf("receipt %+v: want SUCCESS, %d energy burnt for %d sun, bandwidth free", in, tron.SimTransferEnergyNewHolder, wantFee)
	}
	// Used resources recover linearly over 24 h: the 19 blocks it took to
	// be solid gave a byte back.
	if acct := f.account(owner); acct.BalanceSun != 100*tron.SunPerTRX-wantFee || acct.FreeNetUsed != in.NetUsage-1 {
		t.Fatalf("owner after: %+v", acct)
	}
	if got := f.usdt(recipient); got.Cmp(big.NewInt(1_000_000)) != 0 {
		t.Fatalf("recipient holds %v", got)
	}
	// The free bandwidth is spent: the next transfer burns its bandwidth,
	// and the recipient now holds USDT, so it costs less energy.
	in2 := f.land(f.signed(func(p *tron.TransferParams) { p.Amount = big.NewInt(1_000_000) }))
	if in2.EnergyUsed != tron.SimTransferEnergy || in2.NetUsage != 0 || in2.NetFeeSun != in.NetUsage*tron.SimBandwidthPriceSun ||
		in2.FeeSun != tron.SimTransferEnergy*tron.SimEnergyPriceSun+in2.NetFeeSun {
		t.Fatalf("second receipt %+v", in2)
	}
}

func testStakedFirst(t *testing.T, newHarness Factory) {
	f := newFixture(t, newHarness, tron.SimConfig{})
	owner := f.signer.Address()
	f.fund(owner, 10_000_000, 100*tron.SunPerTRX)
	f.fund(recipient, 1, 0)
	f.h.Sim.Stake(owner, 50_000, 5_000)
	in := f.land(f.signed())
	burnt := int64(tron.SimTransferEnergy - 50_000)
	if in.EnergyFromStake != 50_000 || in.EnergyFeeSun != burnt*tron.SimEnergyPriceSun || in.FeeSun != in.EnergyFeeSun || in.NetFeeSun != 0 {
		t.Fatalf("receipt %+v: want 50000 staked energy, %d burnt, staked bandwidth", in, burnt)
	}
	// 57 s of recovery: 50000 × 57/86400 ≈ 33 energy back.
	if acct := f.account(owner); acct.EnergyUsed != 50_000-33 || acct.Energy() != 33 || acct.NetUsed != in.NetUsage-1 {
		t.Fatalf("owner after: %+v", acct)
	}
	// Energy recovers over 24 h of chain time.
	f.h.Sim.AdvanceTo(f.h.Sim.CurrentHead().Time().Add(tron.ResourceWindow))
	if acct := f.account(owner); acct.Energy() != 50_000 {
		t.Fatalf("a day later: %+v", acct)
	}
}

func testFeeLimitOOE(t *testing.T, newHarness Factory) {
	f := newFixture(t, newHarness, tron.SimConfig{})
	owner := f.signer.Address()
	f.fund(owner, 10_000_000, 100*tron.SunPerTRX)
	in := f.land(f.signed(func(p *tron.TransferParams) { p.FeeLimit = 10 * tron.SunPerTRX }))
	limit := int64(10*tron.SunPerTRX) / tron.SimEnergyPriceSun
	if in.Receipt != tron.ReceiptOutOfEnergy || in.EnergyUsed != limit || in.FeeSun != limit*tron.SimEnergyPriceSun {
		t.Fatalf("receipt %+v: want OUT_OF_ENERGY burning the 10 TRX limit", in)
	}
	if f.usdt(owner).Cmp(big.NewInt(10_000_000)) != 0 || f.usdt(recipient).Sign() != 0 {
		t.Fatal("tokens moved on OUT_OF_ENERGY")
	}
	if acct := f.account(owner); acct.BalanceSun != 100*tron.SunPerTRX-in.FeeSun {
		t.Fatalf("TRX after: %d", acct.BalanceSun)
	}
}

func testTRXShortOOE(t *testing.T, newHarness Factory) {
	f := newFixture(t, newHarness, tron.SimConfig{})
	owner := f.signer.Address()
	f.fund(owner, 10_000_000, 5*tron.SunPerTRX)
	in := f.land(f.signed())
	if in.Receipt != tron.ReceiptOutOfEnergy || in.Message == "" {
		t.Fatalf("receipt %+v: want OUT_OF_ENERGY", in)
	}
	if acct := f.account(owner); acct.BalanceSun != 5*tron.SunPerTRX-in.FeeSun || acct.BalanceSun >= tron.SimEnergyPriceSun {
		t.Fatalf("TRX after %d, fee %d: want all but change burnt", acct.BalanceSun, in.FeeSun)
	}
	if f.usdt(owner).Cmp(big.NewInt(10_000_000)) != 0 {
		t.Fatal("tokens moved on OUT_OF_ENERGY")
	}
	if l := f.h.Sim.Ledger(); l.Failed != 1 || l.Succeeded != 0 {
		t.Fatalf("ledger %+v", l)
	}
}

func testUSDTShortRevert(t *testing.T, newHarness Factory) {
	f := newFixture(t, newHarness, tron.SimConfig{})
	owner := f.signer.Address()
	f.fund(owner, 1_000_000, 100*tron.SunPerTRX)
	in := f.land(f.signed(func(p *tron.TransferParams) { p.Amount = big.NewInt(2_000_000) }))
	if in.Receipt != tron.ReceiptRevert || in.FeeSun <= 0 || in.FeeSun != in.EnergyFeeSun+in.NetFeeSun {
		t.Fatalf("receipt %+v: want REVERT with the energy burnt", in)
	}
	if f.usdt(owner).Cmp(big.NewInt(1_000_000)) != 0 || f.usdt(recipient).Sign() != 0 {
		t.Fatal("tokens moved on REVERT")
	}
	if acct := f.account(owner); acct.BalanceSun != 100*tron.SunPerTRX-in.FeeSun {
		t.Fatalf("TRX after %d, fee %d", acct.BalanceSun, in.FeeSun)
	}
}

func testMemoFee(t *testing.T, newHarness Factory) {
	f := newFixture(t, newHarness, tron.SimConfig{})
	owner := f.signer.Address()
	f.fund(owner, 10_000_000, 100*tron.SunPerTRX)
	f.fund(recipient, 1, 0)
	f.h.Sim.Stake(owner, 0, 10_000) // bandwidth for both: only the memo differs
	plain := f.land(f.signed())
	memo := f.land(f.signed(func(p *tron.TransferParams) { p.Memo = []byte("weir:memo") }))
	if memo.FeeSun-plain.FeeSun != tron.SimMemoFeeSun {
		t.Fatalf("fee with memo %d, without %d: want 1 TRX more", memo.FeeSun, plain.FeeSun)
	}
}

func testBandwidthRefused(t *testing.T, newHarness Factory) {
	f := newFixture(t, newHarness, tron.SimConfig{})
	owner := f.signer.Address()
	f.fund(owner, 10_000_000, 0)
	f.h.Sim.SetTRX(owner, 0)
	// The first transfer's bandwidth is free; with no TRX its energy is not
	// paid: it lands OUT_OF_ENERGY.
	if in := f.land(f.signed()); in.Receipt != tron.ReceiptOutOfEnergy || in.FeeSun != 0 {
		t.Fatalf("first receipt %+v", in)
	}
	res := f.broadcast(f.signed())
	if res.Code != tron.CodeBandwidthError || !res.IsHardReject() {
		t.Fatalf("second broadcast %v: want BANDWITH_ERROR", res)
	}
}

func testGenesis(t *testing.T, newHarness Factory) {
	f := newFixture(t, newHarness, tron.SimConfig{StartNumber: 500})
	g, err := f.chain().Genesis(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.h.Node.SolidBlockByNum(f.ctx, 0)
	if err != nil || b.Header != g || len(b.TxIDs) != 0 {
		t.Fatalf("block 0: %+v, %v; genesis %+v", b, err, g)
	}
	if g.Number != 0 || g.ID == ([32]byte{}) || g.ID[7] != 0 || g.IDHex() == tron.MainnetGenesisID {
		t.Fatalf("genesis %+v", g)
	}
	other := newFixture(t, newHarness, tron.SimConfig{StartNumber: 500, Seed: 7})
	if g2, err := other.chain().Genesis(other.ctx); err != nil || g2.ID == g.ID {
		t.Fatalf("another chain's genesis %+v, %v: want another id", g2, err)
	}
}

func testSolidTransfers(t *testing.T, newHarness Factory) {
	f := newFixture(t, newHarness, tron.SimConfig{})
	owner := f.signer.Address()
	other := testSigner(t, "other")
	f.fund(owner, 1_500_000, 100*tron.SunPerTRX)
	f.fund(other.Address(), 1_000_000, 100*tron.SunPerTRX)
	paid := f.signed(func(p *tron.TransferParams) { p.Amount = big.NewInt(1_000_000) })
	short := f.signed(func(p *tron.TransferParams) { p.Amount = big.NewInt(900_000) })
	foreign := f.sign(f.build(func(p *tron.TransferParams) { p.Owner = other.Address(); p.Amount = big.NewInt(5) }), other)
	for _, tx := range []tron.SignedTx{paid, short, foreign} {
		if res := f.broadcast(tx); !res.IsAccepted() {
			t.Fatalf("broadcast %v", res)
		}
	}
	block := f.h.Sim.Advance(1)
	if _, err := f.chain().SolidBlockTransfers(f.ctx, block.Number); !errors.Is(err, tron.ErrBlockNotSolid) {
		t.Fatalf("before it is solid: %v, want ErrBlockNotSolid", err)
	}
	f.h.Sim.Advance(tron.DefaultSolidityLag)
	got, err := f.chain().SolidBlockTransfers(f.ctx, block.Number)
	if err != nil || len(got) != 3 {
		t.Fatalf("transfers %+v, %v", got, err)
	}
	want := []struct {
		tx      tron.SignedTx
		from    tron.Address
		amount  int64
		receipt tron.ReceiptResult
	}{{paid, owner, 1_000_000, tron.ReceiptSuccess}, {short, owner, 900_000, tron.ReceiptRevert}, {foreign, other.Address(), 5, tron.ReceiptSuccess}}
	for i, w := range want {
		g := got[i]
		if g.TxID != w.tx.TxID() || g.From != w.from || g.To != recipient || g.Contract != tron.USDTContract ||
			g.Amount.Int64() != w.amount || g.Receipt != w.receipt || g.BlockNumber != block.Number || g.BlockTime != block.Timestamp {
			t.Fatalf("transfer %d = %+v, want %x from %s of %d (%s)", i, g, w.tx.TxID(), w.from, w.amount, w.receipt)
		}
	}
	mine, err := tron.SolidTransfersFrom(f.ctx, f.chain(), tron.USDTContract, owner, block.Number-1, block.Number)
	if err != nil || len(mine) != 2 || mine[0].TxID != paid.TxID() || mine[1].TxID != short.TxID() {
		t.Fatalf("owner's transfers %+v, %v", mine, err)
	}
	if _, err := tron.SolidTransfersFrom(f.ctx, f.chain(), tron.USDTContract, owner, block.Number, f.h.Sim.CurrentHead().Number); !errors.Is(err, tron.ErrBlockNotSolid) {
		t.Fatalf("range past the solid head: %v, want ErrBlockNotSolid", err)
	}
}

func testWalletNonAnswer(t *testing.T, newHarness Factory) {
	f := newFixture(t, newHarness, tron.SimConfig{})
	owner := f.signer.Address()
	f.fund(owner, 5_000_000, 100*tron.SunPerTRX)
	solid := f.h.Sim.CurrentSolidHead().Number
	calls := map[string]func() error{
		"TokenBalance": func() error { _, err := f.wallet().TokenBalance(f.ctx, tron.USDTContract, owner); return err },
		"Account":      func() error { _, err := f.wallet().Account(f.ctx, owner); return err },
		"EstimateTransferEnergy": func() error {
			_, err := f.wallet().EstimateTransferEnergy(f.ctx, owner, tron.USDTContract, recipient, big.NewInt(1))
			return err
		},
		"ChainPrices":         func() error { _, err := f.wallet().ChainPrices(f.ctx); return err },
		"Genesis":             func() error { _, err := f.chain().Genesis(f.ctx); return err },
		"SolidBlockTransfers": func() error { _, err := f.chain().SolidBlockTransfers(f.ctx, solid); return err },
	}
	for name, call := range calls {
		f.h.Sim.Script(tron.ChannelLookup, tron.FaultLookupNonAnswer)
		if err := call(); !errors.Is(err, tron.ErrBadResponse) {
			t.Errorf("%s behind a gateway's non-answer: %v, want ErrBadResponse", name, err)
		}
		if n := f.h.Sim.ScriptRemaining(tron.ChannelLookup); n != 0 {
			t.Errorf("%s left %d scripted faults: one call, one fault", name, n)
		}
		if err := call(); err != nil {
			t.Errorf("%s once the gateway answers: %v", name, err)
		}
	}
}
