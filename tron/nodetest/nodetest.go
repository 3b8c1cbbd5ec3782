package nodetest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math/big"
	"testing"

	"github.com/weir-payouts/weir/tron"
)

// Harness is one node under test and the simulated chain behind it.
type Harness struct {
	// Node is what is tested: the SimNode itself, or a client talking to it.
	Node tron.Node
	// Sim is the chain: tests advance its clock, script its faults and
	// inspect its ledger through it, never through Node.
	Sim *tron.SimNode
}

// Factory makes a fresh harness over a new SimNode built from cfg.
type Factory func(t *testing.T, cfg tron.SimConfig) Harness

// Run runs the contract suite against nodes made by newHarness.
func Run(t *testing.T, newHarness Factory) {
	tests := []struct {
		name string
		run  func(t *testing.T, newHarness Factory)
	}{
		{"HeadMovesThreeSecondsPerBlockAndSolidHeadLags", testHeadAndSolidHead},
		{"AcceptedTransferGoesPendingIncludedThenSolid", testLifecycle},
		{"SameBytesAgainAreADuplicate", testDuplicate},
		{"ForeignOrMissingSignatureIsSIGERROR", testSigError},
		{"ExpiredTransactionIsRefusedAndNeverIncluded", testExpiration},
		{"UnknownReferenceBlockIsTAPOSError", testTapos},
		{"BroadcastFaultsBehaveAsDocumented", testBroadcastFaults},
		{"QueryTimeoutsAreErrTimeout", testQueryTimeouts},
		{"SeededFaultsAreDeterministic", testSeeded},
		{"TestSignerIsAcceptedOnlyWhenRegistered", testHMACSigner},
		{"ModelledBalanceRevertsAnOverdraft", testBalances},
		{"BroadcastLogNamesTheWorker", testWorkerLog},
		{"SolidBlockListsItsTransactionsAndReceipts", testSolidBlock},
		{"BlockNotYetSolidIsErrBlockNotSolidNeverAnEmptyBlock", testBlockNotSolid},
		{"HeadBlockListsItsReceiptsBeforeItIsSolid", testHeadBlockReceipts},
		{"GatewayNonAnswerIsErrBadResponseNeverUnknown", testNonAnswer},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newHarness)
		})
	}
}

// Deterministic test keys (never funded anywhere).
func testSigner(t *testing.T, label string) *tron.KeySigner {
	t.Helper()
	key := sha256.Sum256([]byte("weir nodetest key " + label))
	s, err := tron.NewKeySigner(key[:])
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var recipient = tron.MustParseAddress("TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC")

type fixture struct {
	t      *testing.T
	h      Harness
	ctx    context.Context
	signer tron.Signer
	n      int64
}

func newFixture(t *testing.T, newHarness Factory, cfg tron.SimConfig) *fixture {
	return &fixture{t: t, h: newHarness(t, cfg), ctx: tron.WithWorker(context.Background(), "suite"), signer: testSigner(t, "owner")}
}

// build makes a fresh transfer (distinct amount each call) referencing the
// current solid head, read from the simulator so no head fault is consumed.
func (f *fixture) build(mutate ...func(*tron.TransferParams)) tron.Envelope {
	f.t.Helper()
	f.n++
	head := f.h.Sim.CurrentHead()
	p := tron.TransferParams{
		Owner:     f.signer.Address(),
		To:        recipient,
		Amount:    big.NewInt(1_000_000 + f.n),
		RefBlock:  f.h.Sim.CurrentSolidHead(),
		Timestamp: head.Timestamp,
	}
	for _, m := range mutate {
		m(&p)
	}
	env, err := tron.BuildTransfer(p)
	if err != nil {
		f.t.Fatal(err)
	}
	return env
}

func (f *fixture) sign(env tron.Envelope, s tron.Signer) tron.SignedTx {
	f.t.Helper()
	sig, err := s.Sign(f.ctx, env.TxID)
	if err != nil {
		f.t.Fatal(err)
	}
	return tron.SignedTx{Raw: env.Raw, Signature: sig}
}

func (f *fixture) signed(mutate ...func(*tron.TransferParams)) tron.SignedTx {
	f.t.Helper()
	return f.sign(f.build(mutate...), f.signer)
}

func (f *fixture) broadcast(tx tron.SignedTx) tron.BroadcastResult {
	f.t.Helper()
	res, err := f.h.Node.Broadcast(f.ctx, tx)
	if err != nil {
		f.t.Fatalf("broadcast: %v", err)
	}
	return res
}

func (f *fixture) lookup(txid [32]byte) tron.TxStatus {
	f.t.Helper()
	st, err := f.h.Node.Lookup(f.ctx, txid)
	if err != nil {
		f.t.Fatalf("lookup: %v", err)
	}
	return st
}

func (f *fixture) solidLookup(txid [32]byte) tron.TxStatus {
	f.t.Helper()
	st, err := f.h.Node.SolidLookup(f.ctx, txid)
	if err != nil {
		f.t.Fatalf("solid lookup: %v", err)
	}
	return st
}

func testHeadAndSolidHead(t *testing.T, newHarness Factory) {
	f := newFixture(t, newHarness, tron.SimConfig{StartNumber: 1000})
	ctx := f.ctx
	first, err := f.h.Node.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first != f.h.Sim.CurrentHead() || first.Number != 1000 || first.Time() != tron.DefaultSimStart {
		t.Fatalf("first head %+v", first)
	}
	prev := first
	for range 25 {
		f.h.Sim.Advance(1)
		h, err := f.h.Node.Head(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h.Number != prev.Number+1 || h.Timestamp-prev.Timestamp != tron.BlockInterval.Milliseconds() {
			t.Fatalf("head %+v after %+v: want the next block 3 s later", h, prev)
		}
		if binary.BigEndian.Uint64(h.ID[:8]) != uint64(h.Number) || h.ID == prev.ID {
			t.Fatalf("block id %x does not start with its number", h.ID)
		}
		prev = h
	}
	solid, err := f.h.Node.SolidHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if solid.Number != prev.Number-tron.DefaultSolidityLag || solid != f.h.Sim.CurrentSolidHead() {
		t.Fatalf("solid head %d with head %d, want lag %d", solid.Number, prev.Number, tron.DefaultSolidityLag)
	}
	ref, err := f.h.Node.RefBlock(ctx)
	if err != nil || ref != solid {
		t.Fatalf("ref block %+v, %v; want the solid head", ref, err)
	}
	target := f.h.Sim.CurrentHead().Time().Add(30 * tron.BlockInterval).Add(tron.BlockInterval / 2)
	if got := f.h.Sim.AdvanceTo(target); got.Number != prev.Number+30 {
		t.Fatalf("AdvanceTo: head %d, want %d", got.Number, prev.Number+30)
	}
}

func testLifecycle(t *testing.T, newHarness Factory) {
	f := newFixture(t, newHarness, tron.SimConfig{})
	tx := f.signed()
	txid := tx.TxID()
	res := f.broadcast(tx)
	if !res.IsAccepted() || res.TxID != txid {
		t.Fatalf("broadcast = %+v, want SUCCESS for %x", res, txid)
	}
	if st := f.lookup(txid); st.State != tron.TxPending {
		t.Fatalf("after accept: %v, want pending", st)
	}
	if st := f.solidLookup(txid); st.State != tron.TxUnknown {
		t.Fatalf("solid view of a pending tx: %v, want unknown", st)
	}
	block := f.h.Sim.Advance(1)
	st := f.lookup(txid)
	if !st.Succeeded() || st.BlockNumber != block.Number || st.BlockTime != block.Timestamp {
		t.Fatalf("after one block: %+v, want included in %d with SUCCESS", st, block.Number)
	}
	if st := f.solidLookup(txid); st.State != tron.TxUnknown {
		t.Fatalf("not yet solid: %v", st)
	}
	f.h.Sim.Advance(tron.DefaultSolidityLag - 1)
	if st := f.solidLookup(txid); st.State != tron.TxUnknown {
		t.Fatalf("one block short of solid: %v", st)
	}
	f.h.Sim.Advance(1)
	if st := f.solidLookup(txid); !st.Succeeded() || st.BlockNumber != block.Number {
		t.Fatalf("solid: %v", st)
	}
	tr, ok := f.h.Sim.TransferByTxID(txid)
	if !ok || tr.From != f.signer.Address() || tr.To != recipient || tr.Amount.Cmp(big.NewInt(1_000_001)) != 0 {
		t.Fatalf("ledger entry %+v, %v", tr, ok)
	}
	if l := f.h.Sim.Ledger(); l.Included != 1 || l.Succeeded != 1 || l.Total.Cmp(tr.Amount) != 0 {
		t.Fatalf("ledger summary %+v", l)
	}
}

func testDuplicate(t *testing.T, newHarness Factory) {
	f := newFixture(t, newHarness, tron.SimConfig{})
	tx := f.signed()
	if res := f.broadcast(tx); !res.IsAccepted() {
		t.Fatalf("first send: %v", res)
	}
	res := f.broadcast(tx)
	if res.Code != tron.CodeDupTransactionError || !res.IsAmbiguous() {
		t.Fatalf("second send: %v, want DUP (ambiguous)", res)
	}
	f.h.Sim.Advance(1)
	if res := f.broadcast(tx); res.Code != tron.CodeDupTransactionError {
		t.Fatalf("send after inclusion: %v", res)
	}
	f.h.Sim.Advance(3)
	if l := f.h.Sim.Ledger(); l.Included != 1 {
		t.Fatalf("a txid was included %d times", l.Included)
	}
}

func testSigError(t *testing.T, newHarness Factory) {
	f := newFixture(t, newHarness, tron.SimConfig{})
	env := f.build()
	foreign := f.sign(env, testSigner(t, "intruder"))
	res := f.broadcast(foreign)
	if res.Code != tron.CodeSigError || !res.IsHardReject() {
		t.Fatalf("foreign signature: %v, want SIGERROR", res)
	}
	res = f.broadcast(tron.SignedTx{Raw: env.Raw})
	if res.Code != tron.CodeSigError {
		t.Fatalf("no signature: %v, want SIGERROR", res)
	}
	f.h.Sim.Advance(2)
	if st := f.lookup(env.TxID); st.State != tron.TxUnknown {
		t.Fatalf("refused tx is %v", st)
	}
}

func testExpiration(t *testing.T, newHarness Factory) {
	f := newFixture(t, newHarness, tron.SimConfig{InclusionDelay: 30})
	f.h.Sim.Advance(40)
	head := f.h.Sim.CurrentHead()

	stale := f.signed(func(p *tron.TransferParams) {
		p.Timestamp = head.Timestamp - 10_000
		p.Expiration = head.Timestamp
	})
	if res := f.broadcast(stale); res.Code != tron.CodeTransactionExpirationError {
		t.Fatalf("expired at head time: %v", res)
	}

	// Accepted, but the inclusion delay (30 blocks) outlasts its life (20 blocks).
	short := f.signed(func(p *tron.TransferParams) { p.Expiration = head.Timestamp + 60_000 })
	if res := f.broadcast(short); !res.IsAccepted() {
		t.Fatalf("short-lived tx: %v", res)
	}
	f.h.Sim.Advance(40)
	if st := f.lookup(short.TxID()); st.State != tron.TxUnknown {
		t.Fatalf("expired tx is %v, want unknown", st)
	}
	solid := f.h.Sim.CurrentSolidHead()
	if solid.Timestamp < head.Timestamp+60_000 {
		t.Fatalf("test setup: solid time %d not past expiration", solid.Timestamp)
	}
	for _, tr := range f.h.Sim.Transfers() {
		if tr.TxID == short.TxID() {
			t.Fatal("a transaction was included after its expiration")
		}
	}
	// Resending the same bytes now is honestly refused as expired.
	if res := f.broadcast(short); res.Code != tron.CodeTransactionExpirationError {
		t.Fatalf("resend after expiry: %v", res)
	}
}

func testTapos(t *testing.T, newHarness Factory) {
	f := newFixture(t, newHarness, tron.SimConfig{})
	f.h.Sim.Advance(5)
	tx := f.signed(func(p *tron.TransferParams) { p.RefBlock.ID[12] ^= 0xff })
	if res := f.broadcast(tx); res.Code != tron.CodeTaposError || !res.IsHardReject() {
		t.Fatalf("bad reference: %v, want TAPOS_ERROR", res)
	}
}

func testBroadcastFaults(t *testing.T, newHarness Factory) {
	tests := []struct {
		fault       tron.Fault
		timeout     bool
		code        tron.BroadcastCode
		outcome     tron.Outcome
		afterSend   tron.TxState
		afterBlock  tron.TxState
		receipt     tron.ReceiptResult
		resendLands bool // a resend of the same bytes gets it included
	}{
		{tron.FaultTimeoutBeforeAccept, true, "", tron.OutcomeAmbiguous, tron.TxUnknown, tron.TxUnknown, "", true},
		{tron.FaultAcceptThenTimeout, true, "", tron.OutcomeAmbiguous, tron.TxPending, tron.TxIncluded, tron.ReceiptSuccess, false},
		{tron.FaultBusy, false, tron.CodeServerBusy, tron.OutcomeAmbiguous, tron.TxUnknown, tron.TxUnknown, "", true},
		{tron.FaultUnknownCode, false, tron.SimUnknownCode, tron.OutcomeAmbiguous, tron.TxUnknown, tron.TxUnknown, "", true},
		{tron.FaultFalseExpired, false, tron.CodeTransactionExpirationError, tron.OutcomeAmbiguous, tron.TxPending, tron.TxIncluded, tron.ReceiptSuccess, false},
		{tron.FaultDupNotAccepted, false, tron.CodeDupTransactionError, tron.OutcomeAmbiguous, tron.TxUnknown, tron.TxUnknown, "", true},
		{tron.FaultConnectionAfterAccept, false, tron.CodeNotEnoughEffectiveConnection, tron.OutcomeAmbiguous, tron.TxPending, tron.TxIncluded, tron.ReceiptSuccess, false},
		{tron.FaultDropAfterAccept, false, tron.CodeSuccess, tron.OutcomeAccepted, tron.TxPending, tron.TxUnknown, "", true},
		{tron.FaultRevert, false, tron.CodeSuccess, tron.OutcomeAccepted, tron.TxPending, tron.TxIncluded, tron.ReceiptRevert, false},
		{tron.FaultOutOfEnergy, false, tron.CodeSuccess, tron.OutcomeAccepted, tron.TxPending, tron.TxIncluded, tron.ReceiptOutOfEnergy, false},
	}
	for _, tc := range tests {
		t.Run(string(tc.fault), func(t *testing.T) {
			f := newFixture(t, newHarness, tron.SimConfig{})
			tx := f.signed()
			txid := tx.TxID()
			f.h.Sim.Script(tron.ChannelBroadcast, tc.fault)
			res, err := f.h.Node.Broadcast(f.ctx, tx)
			if tc.timeout != errors.Is(err, tron.ErrTimeout) {
				t.Fatalf("err = %v, want timeout=%v", err, tc.timeout)
			}
			if !tc.timeout && err != nil {
				t.Fatal(err)
			}
			if got := tron.ClassifyBroadcast(res, err); got != tc.outcome {
				t.Fatalf("outcome %v (%v), want %v", got, res, tc.outcome)
			}
			if err == nil && res.Code != tc.code {
				t.Fatalf("code %q, want %q", res.Code, tc.code)
			}
			if f.h.Sim.ScriptRemaining(tron.ChannelBroadcast) != 0 {
				t.Fatal("scripted fault not consumed")
			}
			if st := f.lookup(txid); st.State != tc.afterSend {
				t.Fatalf("after send: %v, want %v", st, tc.afterSend)
			}
			f.h.Sim.Advance(1)
			st := f.lookup(txid)
			if st.State != tc.afterBlock || (tc.afterBlock == tron.TxIncluded && st.Receipt != tc.receipt) {
				t.Fatalf("after a block: %v, want %v %s", st, tc.afterBlock, tc.receipt)
			}
			tr, included := f.h.Sim.TransferByTxID(txid)
			if included != (tc.afterBlock == tron.TxIncluded) || (included && tr.Receipt != tc.receipt) {
				t.Fatalf("ledger: %+v included=%v", tr, included)
			}
			if tc.resendLands {
				if res := f.broadcast(tx); !res.IsAccepted() {
					t.Fatalf("resend: %v", res)
				}
				f.h.Sim.Advance(1)
				if st := f.lookup(txid); !st.Succeeded() {
					t.Fatalf("resent tx: %v", st)
				}
			}
			if l := f.h.Sim.Ledger(); l.Included > 1 {
				t.Fatalf("txid included %d times", l.Included)
			}
		})
	}
}

func testQueryTimeouts(t *testing.T, newHarness Factory) {
	f := newFixture(t, newHarness, tron.SimConfig{})
	tx := f.signed()
	f.broadcast(tx)
	f.h.Sim.Script(tron.ChannelLookup, tron.FaultLookupTimeout, tron.FaultNone, tron.FaultLookupTimeout)
	if _, err := f.h.Node.Lookup(f.ctx, tx.TxID()); !errors.Is(err, tron.ErrTimeout) {
		t.Fatalf("lookup: %v", err)
	}
	if st := f.lookup(tx.TxID()); st.State != tron.TxPending {
		t.Fatalf("FaultNone lets a call through: %v", st)
	}
	if _, err := f.h.Node.SolidLookup(f.ctx, tx.TxID()); !errors.Is(err, tron.ErrTimeout) {
		t.Fatalf("solid lookup: %v", err)
	}
	f.h.Sim.Script(tron.ChannelHead, tron.FaultHeadTimeout, tron.FaultHeadTimeout, tron.FaultHeadTimeout)
	calls := map[string]func(context.Context) (tron.BlockHeader, error){
		"head": f.h.Node.Head, "solid head": f.h.Node.SolidHead, "ref block": f.h.Node.RefBlock,
	}
	for name, call := range calls {
		if _, err := call(f.ctx); !errors.Is(err, tron.ErrTimeout) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if _, err := f.h.Node.Head(f.ctx); err != nil {
		t.Fatalf("after the script: %v", err)
	}
	solid := f.h.Sim.CurrentSolidHead().Number
	f.h.Sim.Script(tron.ChannelLookup, tron.FaultLookupTimeout, tron.FaultLookupTimeout, tron.FaultLookupTimeout)
	if _, err := f.h.Node.SolidBlockByNum(f.ctx, solid); !errors.Is(err, tron.ErrTimeout) {
		t.Fatalf("solid block: %v", err)
	}
	if _, err := f.h.Node.SolidTxInfosByBlockNum(f.ctx, solid); !errors.Is(err, tron.ErrTimeout) {
		t.Fatalf("solid tx infos: %v", err)
	}
	if _, err := f.h.Node.TxInfosByBlockNum(f.ctx, f.h.Sim.CurrentHead().Number); !errors.Is(err, tron.ErrTimeout) {
		t.Fatalf("head block tx infos: %v", err)
	}
	if got := f.h.Sim.FaultCounts(); got[tron.FaultHeadTimeout] != 3 || got[tron.FaultLookupTimeout] != 5 {
		t.Fatalf("fault counts %v", got)
	}
}

// outcomeTrace runs a fixed call sequence and records what each call saw.
func outcomeTrace(t *testing.T, newHarness Factory, seed int64) []string {
	cfg := tron.SimConfig{Seed: seed, FaultRates: map[tron.Fault]float64{
		tron.FaultTimeoutBeforeAccept: 0.1, tron.FaultAcceptThenTimeout: 0.1, tron.FaultBusy: 0.1,
		tron.FaultFalseExpired: 0.1, tron.FaultDropAfterAccept: 0.1, tron.FaultRevert: 0.1,
		tron.FaultLookupTimeout: 0.3, tron.FaultHeadTimeout: 0.3,
	}}
	f := newFixture(t, newHarness, cfg)
	var trace []string
	for range 30 {
		tx := f.signed()
		res, err := f.h.Node.Broadcast(f.ctx, tx)
		trace = append(trace, "b:"+string(res.Code)+":"+errName(err))
		st, err := f.h.Node.Lookup(f.ctx, tx.TxID())
		trace = append(trace, "l:"+st.State.String()+":"+errName(err))
		_, err = f.h.Node.Head(f.ctx)
		trace = append(trace, "h:"+errName(err))
		f.h.Sim.Advance(1)
	}
	return trace
}

func errName(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, tron.ErrTimeout):
		return "timeout"
	}
	return err.Error()
}

func testSeeded(t *testing.T, newHarness Factory) {
	a, b := outcomeTrace(t, newHarness, 42), outcomeTrace(t, newHarness, 42)
	if len(a) != len(b) {
		t.Fatalf("traces differ in length")
	}
	faulty := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, different call %d: %s vs %s", i, a[i], b[i])
		}
		if a[i] != "b:SUCCESS:ok" && a[i] != "h:ok" && a[i] != "l:pending:ok" {
			faulty++
		}
	}
	if faulty == 0 {
		t.Fatal("seeded rates injected no fault in 90 calls")
	}
	c := outcomeTrace(t, newHarness, 43)
	same := true
	for i := range a {
		same = same && a[i] == c[i]
	}
	if same {
		t.Fatal("different seeds gave the same 90-call trace")
	}
}

func testHMACSigner(t *testing.T, newHarness Factory) {
	hs := tron.NewHMACSigner([]byte("suite"))
	for _, registered := range []bool{false, true} {
		cfg := tron.SimConfig{}
		if registered {
			cfg.Verifiers = []tron.SignatureVerifier{hs}
		}
		f := newFixture(t, newHarness, cfg)
		f.signer = hs
		res := f.broadcast(f.signed())
		if res.IsAccepted() != registered {
			t.Fatalf("registered=%v: %v", registered, res)
		}
	}
}

func testBalances(t *testing.T, newHarness Factory) {
	f := newFixture(t, newHarness, tron.SimConfig{})
	owner := f.signer.Address()
	f.h.Sim.SetBalance(owner, big.NewInt(1_500_000))
	ok := f.signed(func(p *tron.TransferParams) { p.Amount = big.NewInt(1_000_000) })
	over := f.signed(func(p *tron.TransferParams) { p.Amount = big.NewInt(600_000) })
	f.broadcast(ok)
	f.broadcast(over)
	f.h.Sim.Advance(1)
	if st := f.lookup(ok.TxID()); !st.Succeeded() {
		t.Fatalf("covered transfer: %v", st)
	}
	if st := f.lookup(over.TxID()); st.Receipt != tron.ReceiptRevert || !st.Failed() {
		t.Fatalf("overdraft: %v, want REVERT", st)
	}
	if got := f.h.Sim.Balance(owner); got.Cmp(big.NewInt(500_000)) != 0 {
		t.Fatalf("owner balance %v", got)
	}
	if got := f.h.Sim.Balance(recipient); got.Cmp(big.NewInt(1_000_000)) != 0 {
		t.Fatalf("recipient balance %v", got)
	}
	if l := f.h.Sim.Ledger(); l.Succeeded != 1 || l.Failed != 1 || l.Total.Cmp(big.NewInt(1_000_000)) != 0 {
		t.Fatalf("ledger %+v", l)
	}
}

func testWorkerLog(t *testing.T, newHarness Factory) {
	f := newFixture(t, newHarness, tron.SimConfig{})
	tx1, tx2 := f.signed(), f.signed()
	for i, tx := range []tron.SignedTx{tx1, tx2, tx1} {
		ctx := tron.WithWorker(context.Background(), []string{"w1", "w2", "w2"}[i])
		if _, err := f.h.Node.Broadcast(ctx, tx); err != nil {
			t.Fatal(err)
		}
	}
	log := f.h.Sim.BroadcastLog()
	if len(log) != 3 {
		t.Fatalf("log has %d records", len(log))
	}
	want := []struct {
		worker   string
		txid     [32]byte
		accepted bool
	}{{"w1", tx1.TxID(), true}, {"w2", tx2.TxID(), true}, {"w2", tx1.TxID(), false}}
	for i, w := range want {
		r := log[i]
		if r.Seq != i+1 || r.Worker != w.worker || r.TxID != w.txid || r.Accepted != w.accepted {
			t.Fatalf("record %d = %+v, want %+v", i, r, w)
		}
	}
	f.h.Sim.Advance(1)
	if tr, _ := f.h.Sim.TransferByTxID(tx1.TxID()); tr.Worker != "w1" {
		t.Fatalf("transfer credited to worker %q, want w1", tr.Worker)
	}
}

// successThenRevert sends two transfers into the pool: one that will
// succeed, then one the chain will revert.
func (f *fixture) successThenRevert() (ok, reverted tron.SignedTx) {
	f.t.Helper()
	ok, reverted = f.signed(), f.signed()
	f.broadcast(ok)
	f.h.Sim.Script(tron.ChannelBroadcast, tron.FaultRevert)
	f.broadcast(reverted)
	return ok, reverted
}

func testSolidBlock(t *testing.T, newHarness Factory) {
	f := newFixture(t, newHarness, tron.SimConfig{})
	ok, reverted := f.successThenRevert()
	block := f.h.Sim.Advance(1)
	f.h.Sim.Advance(tron.DefaultSolidityLag + 1) // block and the empty one after it are solid

	b, err := f.h.Node.SolidBlockByNum(f.ctx, block.Number)
	if err != nil {
		t.Fatal(err)
	}
	parent, _ := f.h.Sim.Block(block.Number - 1)
	if b.Header != block || b.ParentID != parent.ID {
		t.Fatalf("block %+v parent %x, want %+v parent %x", b.Header, b.ParentID, block, parent.ID)
	}
	want := [][32]byte{ok.TxID(), reverted.TxID()}
	if len(b.TxIDs) != 2 || b.TxIDs[0] != want[0] || b.TxIDs[1] != want[1] {
		t.Fatalf("block txids %x, want %x", b.TxIDs, want)
	}
	wantSuccessThenRevert(t, block, want)(f.h.Node.SolidTxInfosByBlockNum(f.ctx, block.Number))

	empty, err := f.h.Node.SolidBlockByNum(f.ctx, block.Number+1)
	if err != nil || empty.Header.Number != block.Number+1 || empty.ParentID != block.ID || len(empty.TxIDs) != 0 {
		t.Fatalf("empty block: %+v, %v", empty, err)
	}
	if infos, err := f.h.Node.SolidTxInfosByBlockNum(f.ctx, block.Number+1); err != nil || len(infos) != 0 {
		t.Fatalf("infos of an empty block: %+v, %v", infos, err)
	}
}

func testBlockNotSolid(t *testing.T, newHarness Factory) {
	f := newFixture(t, newHarness, tron.SimConfig{StartNumber: 100})
	tx := f.signed()
	f.broadcast(tx)
	head := f.h.Sim.Advance(1) // holds tx, not solid yet
	for _, num := range []int64{head.Number, head.Number + 50, 99} {
		b, err := f.h.Node.SolidBlockByNum(f.ctx, num)
		if !errors.Is(err, tron.ErrBlockNotSolid) {
			t.Fatalf("block %d (solid head %d): %+v, %v; want ErrBlockNotSolid", num, f.h.Sim.CurrentSolidHead().Number, b, err)
		}
		// java-tron answers [] for a block it lacks: an implementation may
		// say so or refuse, never list a receipt.
		infos, err := f.h.Node.SolidTxInfosByBlockNum(f.ctx, num)
		if len(infos) != 0 || (err != nil && !errors.Is(err, tron.ErrBlockNotSolid)) {
			t.Fatalf("infos of block %d: %+v, %v", num, infos, err)
		}
	}
	f.h.Sim.Advance(tron.DefaultSolidityLag)
	if b, err := f.h.Node.SolidBlockByNum(f.ctx, head.Number); err != nil || len(b.TxIDs) != 1 || b.TxIDs[0] != tx.TxID() {
		t.Fatalf("once solid: %+v, %v", b, err)
	}
}

// wantSuccessThenRevert returns a check that a receipts answer lists
// want (a SUCCESS then a REVERT with its message) in block, with fees.
func wantSuccessThenRevert(t *testing.T, block tron.BlockHeader, want [][32]byte) func([]tron.TxInfo, error) {
	return func(infos []tron.TxInfo, err error) {
		t.Helper()
		if err != nil || len(infos) != len(want) {
			t.Fatalf("infos of block %d: %+v, %v; want %d", block.Number, infos, err, len(want))
		}
		for i, in := range infos {
			if in.TxID != want[i] || in.BlockNumber != block.Number || in.BlockTime != block.Timestamp || in.FeeSun <= 0 {
				t.Fatalf("info %d: %+v, want %x in block %d at %d with a fee", i, in, want[i], block.Number, block.Timestamp)
			}
		}
		if infos[0].Receipt != tron.ReceiptSuccess || infos[1].Receipt != tron.ReceiptRevert || infos[1].Message == "" {
			t.Fatalf("receipts %q, %q (%q), want SUCCESS then REVERT with a message", infos[0].Receipt, infos[1].Receipt, infos[1].Message)
		}
	}
}

// testHeadBlockReceipts: the head view lists a block's receipts as soon
// as the block exists — what a worker's head scan reads to learn that a
// transaction was included (not dropped) long before it is solid — and
// answers [] for a block past the head, as java-tron does. Once the block
// is solid both views say the same.
func testHeadBlockReceipts(t *testing.T, newHarness Factory) {
	f := newFixture(t, newHarness, tron.SimConfig{})
	ok, reverted := f.successThenRevert()
	if infos, err := f.h.Node.TxInfosByBlockNum(f.ctx, f.h.Sim.CurrentHead().Number+1); err != nil || len(infos) != 0 {
		t.Fatalf("infos of the block after the head: %+v, %v; want []", infos, err)
	}
	block := f.h.Sim.Advance(1) // holds both, not solid
	if infos, err := f.h.Node.SolidTxInfosByBlockNum(f.ctx, block.Number); len(infos) != 0 || (err != nil && !errors.Is(err, tron.ErrBlockNotSolid)) {
		t.Fatalf("solid infos of a head block: %+v, %v", infos, err)
	}
	check := wantSuccessThenRevert(t, block, [][32]byte{ok.TxID(), reverted.TxID()})
	check(f.h.Node.TxInfosByBlockNum(f.ctx, block.Number))
	if infos, err := f.h.Node.TxInfosByBlockNum(f.ctx, block.Number+1); err != nil || len(infos) != 0 {
		t.Fatalf("infos past the head: %+v, %v; want []", infos, err)
	}
	f.h.Sim.Advance(tron.DefaultSolidityLag + 1)
	if infos, err := f.h.Node.TxInfosByBlockNum(f.ctx, block.Number+1); err != nil || len(infos) != 0 {
		t.Fatalf("infos of an empty block: %+v, %v", infos, err)
	}
	check(f.h.Node.TxInfosByBlockNum(f.ctx, block.Number))
	check(f.h.Node.SolidTxInfosByBlockNum(f.ctx, block.Number))
}

func testNonAnswer(t *testing.T, newHarness Factory) {
	f := newFixture(t, newHarness, tron.SimConfig{})
	var txid [32]byte
	solid := f.h.Sim.CurrentSolidHead().Number
	f.h.Sim.Script(tron.ChannelLookup, tron.FaultLookupNonAnswer, tron.FaultLookupNonAnswer, tron.FaultLookupNonAnswer, tron.FaultLookupNonAnswer,
		tron.FaultLookupNonAnswer)
	if st, err := f.h.Node.Lookup(f.ctx, txid); !errors.Is(err, tron.ErrBadResponse) {
		t.Fatalf("lookup: %v, %v; want ErrBadResponse", st, err)
	}
	if st, err := f.h.Node.SolidLookup(f.ctx, txid); !errors.Is(err, tron.ErrBadResponse) {
		t.Fatalf("solid lookup: %v, %v; want ErrBadResponse", st, err)
	}
	if b, err := f.h.Node.SolidBlockByNum(f.ctx, solid); !errors.Is(err, tron.ErrBadResponse) {
		t.Fatalf("solid block: %+v, %v; want ErrBadResponse", b, err)
	}
	if infos, err := f.h.Node.SolidTxInfosByBlockNum(f.ctx, solid); !errors.Is(err, tron.ErrBadResponse) {
		t.Fatalf("solid tx infos: %+v, %v; want ErrBadResponse", infos, err)
	}
	if infos, err := f.h.Node.TxInfosByBlockNum(f.ctx, f.h.Sim.CurrentHead().Number); !errors.Is(err, tron.ErrBadResponse) {
		t.Fatalf("head block tx infos: %+v, %v; want ErrBadResponse", infos, err)
	}
	if st := f.solidLookup(txid); st.State != tron.TxUnknown {
		t.Fatalf("after the script: %v", st)
	}
	if got := f.h.Sim.FaultCounts()[tron.FaultLookupNonAnswer]; got != 5 {
		t.Fatalf("%d non-answers injected, want 5", got)
	}
}
