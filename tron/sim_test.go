package tron

import (
	"context"
	"crypto/sha256"
	"errors"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"
)

func simSigner(t *testing.T, label string) *KeySigner {
	t.Helper()
	k := sha256.Sum256([]byte(label))
	s, err := NewKeySigner(k[:])
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func simTransfer(t *testing.T, sim *SimNode, s Signer, amount int64) SignedTx {
	t.Helper()
	env, err := BuildTransfer(TransferParams{
		Owner:     s.Address(),
		To:        USDTContract, // any TRON address will do as a recipient
		Amount:    big.NewInt(amount),
		RefBlock:  sim.CurrentSolidHead(),
		Timestamp: sim.CurrentHead().Timestamp,
	})
	if err != nil {
		t.Fatal(err)
	}
	sig, err := s.Sign(context.Background(), env.TxID)
	if err != nil {
		t.Fatal(err)
	}
	return SignedTx{Raw: env.Raw, Signature: sig}
}

func TestSimConfigValidateRefusesNonsense(t *testing.T) {
	bad := []SimConfig{
		{SolidityLag: -1},
		{InclusionDelay: -1},
		{StartNumber: -5},
		{FaultRates: map[Fault]float64{"no_such_fault": 0.1}},
		{FaultRates: map[Fault]float64{FaultBusy: 1.5}},
		{FaultRates: map[Fault]float64{FaultBusy: 0.6, FaultRevert: 0.6}},
		{Balances: map[Address]*big.Int{USDTContract: big.NewInt(-1)}},
	}
	for i, cfg := range bad {
		if err := cfg.Validate(); err == nil {
			t.Errorf("config %d accepted: %+v", i, cfg)
		}
	}
	// Rates of different channels do not add up together.
	ok := SimConfig{FaultRates: map[Fault]float64{FaultBusy: 0.9, FaultLookupTimeout: 0.9, FaultHeadTimeout: 0.9}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestScriptRefusesAFaultOfAnotherChannel(t *testing.T) {
	sim := NewSimNode(SimConfig{})
	defer func() {
		if recover() == nil {
			t.Fatal("scripting a lookup fault on the broadcast channel did not panic")
		}
	}()
	sim.Script(ChannelBroadcast, FaultLookupTimeout)
}

func TestEveryFaultBelongsToOneChannel(t *testing.T) {
	total := 0
	for _, ch := range []Channel{ChannelBroadcast, ChannelLookup, ChannelHead} {
		for _, f := range Faults(ch) {
			if f.Channel() != ch {
				t.Errorf("%s listed under %s but belongs to %s", f, ch, f.Channel())
			}
			total++
		}
	}
	if total != len(Faults("")) || total != len(faultChannels) {
		t.Fatalf("%d faults listed by channel, %d in all, %d known", total, len(Faults("")), len(faultChannels))
	}
}

func TestInstantModeIncludesInTheNextBlockAndSolidifiesAtOnce(t *testing.T) {
	sim := NewSimNode(SimConfig{Instant: true, InclusionDelay: 10, SolidityLag: 10})
	tx := simTransfer(t, sim, simSigner(t, "bench"), 5)
	if res, err := sim.Broadcast(context.Background(), tx); err != nil || !res.IsAccepted() {
		t.Fatalf("%v %v", res, err)
	}
	sim.Advance(1)
	st, err := sim.SolidLookup(context.Background(), tx.TxID())
	if err != nil || !st.Succeeded() {
		t.Fatalf("solid lookup after one block: %v %v", st, err)
	}
	if sim.CurrentSolidHead() != sim.CurrentHead() {
		t.Fatal("instant mode: solid head lags")
	}
}

// A lag set on a running chain applies from then on and never takes
// solidity back: the head moves on first, so what was solid stays solid,
// and a transfer sent afterwards is solid only lag blocks after its own.
func TestSolidityLagSetOnARunningChainNeverUnsolidifiesABlock(t *testing.T) {
	sim := NewSimNode(SimConfig{Instant: true})
	tx := simTransfer(t, sim, simSigner(t, "lag"), 5)
	if res, err := sim.Broadcast(context.Background(), tx); err != nil || !res.IsAccepted() {
		t.Fatalf("%v %v", res, err)
	}
	sim.Advance(1)
	solid := sim.CurrentSolidHead()
	sim.SetSolidityLag(19)
	if got := sim.CurrentSolidHead(); got.Number != solid.Number {
		t.Fatalf("solid head %d after the lag was set, want %d (unchanged)", got.Number, solid.Number)
	}
	if h := sim.CurrentHead().Number; h != solid.Number+19 {
		t.Fatalf("head %d, want %d", h, solid.Number+19)
	}
	if st, err := sim.SolidLookup(context.Background(), tx.TxID()); err != nil || !st.Succeeded() {
		t.Fatalf("a transfer solid before the lag was set: %v %v", st, err)
	}
	late := simTransfer(t, sim, simSigner(t, "lag"), 6)
	if res, err := sim.Broadcast(context.Background(), late); err != nil || !res.IsAccepted() {
		t.Fatalf("%v %v", res, err)
	}
	sim.Advance(19)
	if st, err := sim.SolidLookup(context.Background(), late.TxID()); err != nil || st.Succeeded() {
		t.Fatalf("solid 18 blocks after its own: %v %v", st, err)
	}
	sim.Advance(1)
	if st, err := sim.SolidLookup(context.Background(), late.TxID()); err != nil || !st.Succeeded() {
		t.Fatalf("not solid 19 blocks after its own: %v %v", st, err)
	}
}

func TestDroppedTransactionResentBeforeTheNextBlockStaysInThePool(t *testing.T) {
	sim := NewSimNode(SimConfig{})
	tx := simTransfer(t, sim, simSigner(t, "drop"), 7)
	sim.Script(ChannelBroadcast, FaultDropAfterAccept)
	ctx := context.Background()
	if res, _ := sim.Broadcast(ctx, tx); !res.IsAccepted() {
		t.Fatalf("first send: %v", res)
	}
	// The pool would drop it at the next block; an honest resend revives it.
	if res, _ := sim.Broadcast(ctx, tx); !res.IsAccepted() {
		t.Fatalf("resend: %v", res)
	}
	sim.Advance(1)
	if st := sim.Status(tx.TxID(), false); !st.Succeeded() {
		t.Fatalf("resent tx: %v", st)
	}
}

func TestCancelledContextIsAnErrorAndATimeoutIsErrTimeout(t *testing.T) {
	sim := NewSimNode(SimConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sim.Head(ctx); !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
		t.Fatalf("cancelled: %v", err)
	}
	ctx, cancel = context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	tx := simTransfer(t, sim, simSigner(t, "late"), 1)
	if _, err := sim.Broadcast(ctx, tx); !errors.Is(err, ErrTimeout) {
		t.Fatalf("deadline: %v", err)
	}
	if len(sim.BroadcastLog()) != 0 || sim.PendingCount() != 0 {
		t.Fatal("a call with a dead context reached the node")
	}
}

func TestRunProducesBlocksOnTheWallClockUntilCancelled(t *testing.T) {
	sim := NewSimNode(SimConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sim.Run(ctx, time.Millisecond) }()
	start := sim.CurrentHead()
	wait, waitCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer waitCancel()
	h, err := sim.WaitHead(wait, start.Number+3)
	if err != nil {
		t.Fatal(err)
	}
	if h.Timestamp < start.Timestamp+3*BlockInterval.Milliseconds() {
		t.Fatalf("chain time %d after 3 blocks from %d", h.Timestamp, start.Timestamp)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v on cancel", err)
	}
	if err := sim.Run(context.Background(), 0); err == nil {
		t.Fatal("zero interval accepted")
	}
}

// Racing workers sending overlapping transactions while the chain moves:
// every txid lands at most once, and the ledger adds up.
func TestConcurrentBroadcastsNeverIncludeATxidTwice(t *testing.T) {
	sim := NewSimNode(SimConfig{Seed: 7, FaultRates: map[Fault]float64{
		FaultAcceptThenTimeout: 0.2, FaultDropAfterAccept: 0.1, FaultFalseExpired: 0.1, FaultDupNotAccepted: 0.1,
	}})
	signer := simSigner(t, "racers")
	txs := make([]SignedTx, 20)
	for i := range txs {
		txs[i] = simTransfer(t, sim, signer, int64(i+1))
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := WithWorker(context.Background(), "w"+string(rune('0'+w)))
			for round := range 5 {
				for _, tx := range txs {
					_, _ = sim.Broadcast(ctx, tx)
					_, _ = sim.Lookup(ctx, tx.TxID())
				}
				if w == 0 {
					sim.Advance(1 + round%2)
				}
			}
		}()
	}
	wg.Wait()
	sim.Advance(5)
	seen := map[[32]byte]bool{}
	total := new(big.Int)
	for _, tr := range sim.Transfers() {
		if seen[tr.TxID] {
			t.Fatalf("txid %x included twice", tr.TxID)
		}
		seen[tr.TxID] = true
		if tr.Receipt == ReceiptSuccess {
			total.Add(total, tr.Amount)
		}
		if !strings.HasPrefix(tr.Worker, "w") {
			t.Fatalf("transfer without a worker: %+v", tr)
		}
	}
	if l := sim.Ledger(); l.Total.Cmp(total) != 0 || l.Included != len(seen) {
		t.Fatalf("ledger %+v, recount %v over %d", l, total, len(seen))
	}
	if len(sim.BroadcastLog()) != 4*5*len(txs) {
		t.Fatalf("log has %d records", len(sim.BroadcastLog()))
	}
}
