package tron

import (
	"context"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// persistTransfer is simTransfer with a recipient, amount, fee limit and
// memo of the test's choosing.
func persistTransfer(t *testing.T, sim *SimNode, s Signer, to Address, amount, feeLimit int64, memo string) SignedTx {
	t.Helper()
	p := TransferParams{
		Owner: s.Address(), To: to, Amount: big.NewInt(amount),
		RefBlock: sim.CurrentSolidHead(), Timestamp: sim.CurrentHead().Timestamp, FeeLimit: feeLimit,
	}
	if memo != "" {
		p.Memo = []byte(memo)
	}
	env, err := BuildTransfer(p)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := s.Sign(context.Background(), env.TxID)
	if err != nil {
		t.Fatal(err)
	}
	return SignedTx{Raw: env.Raw, Signature: sig}
}

// busyChain is a simulated chain with something of every kind on it:
// modelled USDT and TRX, staked resources, transfers that succeeded,
// reverted, ran out of energy and were forced to revert, a memo fee, a
// dropped transaction, pending ones, and broadcasts that faulted.
func busyChain(t *testing.T) (*SimNode, SimConfig, [][32]byte, []Address) {
	t.Helper()
	cfg := SimConfig{Start: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC), StartNumber: 1000, SolidityLag: 3, InclusionDelay: 2, Seed: 7}
	sim := NewSimNode(cfg)
	ctx := context.Background()
	rich, poor, staked := simSigner(t, "rich"), simSigner(t, "poor"), simSigner(t, "staked")
	dest := simSigner(t, "dest").Address()
	sim.SetBalance(rich.Address(), big.NewInt(1_000_000))
	sim.SetBalance(poor.Address(), big.NewInt(5))
	sim.SetBalance(staked.Address(), big.NewInt(500))
	sim.SetTRX(rich.Address(), 500*SunPerTRX)
	sim.SetTRX(poor.Address(), 50*SunPerTRX)
	sim.SetTRX(staked.Address(), 1*SunPerTRX)
	sim.Stake(staked.Address(), 200_000, 5_000)
	sim.Advance(5)

	var ids [][32]byte
	send := func(tx SignedTx) {
		t.Helper()
		res, err := sim.Broadcast(WithWorker(ctx, "w1"), tx)
		if err != nil && !errors.Is(err, ErrTimeout) {
			t.Fatal(err)
		}
		ids = append(ids, TxID(tx.Raw))
		_ = res
	}
	send(persistTransfer(t, sim, rich, dest, 100, 0, ""))         // succeeds, new holder
	send(persistTransfer(t, sim, poor, dest, 50, 0, ""))          // reverts: balance short
	send(persistTransfer(t, sim, rich, dest, 7, 1*SunPerTRX, "")) // out of energy: fee limit
	send(persistTransfer(t, sim, staked, dest, 10, 0, ""))        // energy from stake
	send(persistTransfer(t, sim, rich, dest, 3, 0, "memo"))       // memo fee
	sim.Script(ChannelBroadcast, FaultRevert, FaultDropAfterAccept, FaultBusy, FaultAcceptThenTimeout)
	send(persistTransfer(t, sim, rich, dest, 11, 0, "r")) // forced revert
	send(persistTransfer(t, sim, rich, dest, 12, 0, "d")) // dropped at the next block
	send(persistTransfer(t, sim, rich, dest, 13, 0, "b")) // busy: never accepted
	send(persistTransfer(t, sim, rich, dest, 14, 0, "t")) // accepted, answer lost
	sim.Advance(4)
	send(persistTransfer(t, sim, rich, dest, 15, 0, "pending"))     // still in the pool
	send(persistTransfer(t, sim, rich, dest, 16, 0, "pending too")) // and this one
	if sim.PendingCount() != 2 {
		t.Fatalf("pool: %d, want 2", sim.PendingCount())
	}
	return sim, cfg, ids, []Address{rich.Address(), poor.Address(), staked.Address(), USDTContract, dest}
}

// answers is everything a chain answers, through every read path.
func answers(t *testing.T, sim *SimNode, ids [][32]byte, addrs []Address) map[string]any {
	t.Helper()
	ctx := context.Background()
	out := map[string]any{
		"head": sim.CurrentHead(), "solid": sim.CurrentSolidHead(), "pending": sim.PendingCount(),
		"log": sim.BroadcastLog(), "transfers": sim.Transfers(), "ledger": sim.Ledger().Total.String(),
		"ledgerCounts": [3]int{sim.Ledger().Included, sim.Ledger().Succeeded, sim.Ledger().Failed},
	}
	put := func(k string, v any, err error) {
		if err != nil {
			v = "error: " + err.Error()
		}
		out[k] = v
	}
	h, err := sim.Head(ctx)
	put("Head", h, err)
	h, err = sim.SolidHead(ctx)
	put("SolidHead", h, err)
	h, err = sim.RefBlock(ctx)
	put("RefBlock", h, err)
	h, err = sim.Genesis(ctx)
	put("Genesis", h, err)
	p, err := sim.ChainPrices(ctx)
	put("ChainPrices", p, err)
	head := sim.CurrentHead().Number
	for n := int64(0); n <= head+1; n++ {
		k := "block " + itoa(n)
		b, ok := sim.Block(n)
		put(k+" Block", [2]any{b, ok}, nil)
		sb, err := sim.SolidBlockByNum(ctx, n)
		put(k+" SolidBlockByNum", sb, err)
		infos, err := sim.SolidTxInfosByBlockNum(ctx, n)
		put(k+" SolidTxInfos", infos, err)
		trs, err := sim.SolidBlockTransfers(ctx, n)
		put(k+" SolidBlockTransfers", trs, err)
	}
	for i, id := range ids {
		k := "tx " + itoa(int64(i))
		put(k+" Status", [2]TxStatus{sim.Status(id, false), sim.Status(id, true)}, nil)
		tx, st, ok := sim.Transaction(id)
		put(k+" Transaction", [3]any{tx, st, ok}, nil)
		tr, ok := sim.TransferByTxID(id)
		put(k+" TransferByTxID", [2]any{tr, ok}, nil)
		info, ok := sim.TxInfo(id)
		put(k+" TxInfo", [2]any{info, ok}, nil)
		st, err := sim.Lookup(ctx, id)
		put(k+" Lookup", st, err)
		st, err = sim.SolidLookup(ctx, id)
		put(k+" SolidLookup", st, err)
	}
	for _, a := range addrs {
		k := "addr " + a.String()
		put(k+" Balance", sim.Balance(a).String(), nil)
		put(k+" TRX", sim.TRX(a), nil)
		put(k+" AccountState", sim.AccountState(a), nil)
		acct, err := sim.Account(ctx, a)
		put(k+" Account", acct, err)
		bal, err := sim.TokenBalance(ctx, USDTContract, a)
		put(k+" TokenBalance", bal.String(), err)
		e, err := sim.EstimateTransferEnergy(ctx, a, USDTContract, addrs[len(addrs)-1], big.NewInt(1))
		put(k+" EstimateTransferEnergy", e, err)
	}
	return out
}

func itoa(n int64) string { return big.NewInt(n).String() }

func compareAnswers(t *testing.T, when string, a, b map[string]any) {
	t.Helper()
	for k, va := range a {
		if vb := b[k]; !reflect.DeepEqual(va, vb) {
			t.Errorf("%s: %s differs:\n saved:  %+v\n loaded: %+v", when, k, va, vb)
		}
	}
	if len(a) != len(b) {
		t.Errorf("%s: %d answers saved, %d loaded", when, len(a), len(b))
	}
}

// TestSavedSimChainLoadsWithTheSameAnswersOnEveryReadPath: a busy chain
// saved to a file and loaded back answers every read exactly as the
// original, and both go on identically: the pending transactions are
// included in the same blocks with the same receipts, an included one is
// still a duplicate, and the file is private.
func TestSavedSimChainLoadsWithTheSameAnswersOnEveryReadPath(t *testing.T) {
	sim, cfg, ids, addrs := busyChain(t)
	path := filepath.Join(t.TempDir(), "simchain.json")
	if err := sim.SaveFile(path); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("saved file: %v %v, want mode 0600", fi, err)
	}
	loaded, err := LoadSimNodeFile(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := answers(t, sim, ids, addrs)
	if l := sim.Ledger(); l.Included < 6 || l.Failed < 3 || l.Succeeded < 3 {
		t.Fatalf("the chain is not busy enough to prove anything: %+v", l)
	}
	compareAnswers(t, "after load", want, answers(t, loaded, ids, addrs))

	// Both chains go on the same way.
	ctx := context.Background()
	again := persistTransfer(t, sim, simSigner(t, "rich"), addrs[len(addrs)-1], 99, 0, "after")
	for _, n := range []*SimNode{sim, loaded} {
		if res, err := n.Broadcast(ctx, again); err != nil || res.Code != CodeSuccess {
			t.Fatalf("broadcast after load: %+v %v", res, err)
		}
		if res, err := n.Broadcast(ctx, mustTx(t, n, ids[0])); err != nil || res.Code != CodeDupTransactionError {
			t.Fatalf("an included transaction sent again: %+v %v", res, err)
		}
		if res, err := n.Broadcast(ctx, mustTx(t, n, ids[len(ids)-1])); err != nil || res.Code != CodeDupTransactionError {
			t.Fatalf("a pending transaction sent again: %+v %v", res, err)
		}
		n.Advance(6)
	}
	ids = append(ids, TxID(again.Raw))
	compareAnswers(t, "six blocks later", answers(t, sim, ids, addrs), answers(t, loaded, ids, addrs))
	if sim.PendingCount() != 0 || sim.Ledger().Included != loaded.Ledger().Included {
		t.Fatalf("pool %d, included %d and %d", sim.PendingCount(), sim.Ledger().Included, loaded.Ledger().Included)
	}

	// Saving the loaded chain gives the same bytes as saving the original.
	a, err := sim.MarshalState()
	if err != nil {
		t.Fatal(err)
	}
	b, err := loaded.MarshalState()
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Fatal("the loaded chain saves differently from the original")
	}
}

// TestSavedSimChainKeepsHoldersWhenBalancesAreNotModelled: without
// modelled balances the chain remembers who received the token (the next
// transfer to them costs less energy, and they exist); that survives too.
func TestSavedSimChainKeepsHoldersWhenBalancesAreNotModelled(t *testing.T) {
	cfg := SimConfig{Instant: true}
	sim := NewSimNode(cfg)
	from, to := simSigner(t, "from"), simSigner(t, "to").Address()
	tx := persistTransfer(t, sim, from, to, 5, 0, "")
	if res, err := sim.Broadcast(context.Background(), tx); err != nil || res.Code != CodeSuccess {
		t.Fatalf("%+v %v", res, err)
	}
	sim.Advance(1)
	data, err := sim.MarshalState()
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadSimNode(data, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ids, addrs := [][32]byte{TxID(tx.Raw)}, []Address{from.Address(), to}
	if e, _ := sim.EstimateTransferEnergy(context.Background(), from.Address(), USDTContract, to, big.NewInt(1)); e != SimTransferEnergy {
		t.Fatalf("energy to a holder: %d", e)
	}
	compareAnswers(t, "unmodelled balances", answers(t, sim, ids, addrs), answers(t, loaded, ids, addrs))
}

func mustTx(t *testing.T, sim *SimNode, id [32]byte) SignedTx {
	t.Helper()
	tx, _, ok := sim.Transaction(id)
	if !ok {
		t.Fatalf("transaction %s unknown", HexID(id))
	}
	return tx
}

// TestUnreadableSimChainIsRefusedNamingTheFile: a saved chain that is
// truncated, of another format or inconsistent is refused with an error
// naming the file, never replaced by a new chain; a missing file is
// os.ErrNotExist (the caller starts a new chain).
func TestUnreadableSimChainIsRefusedNamingTheFile(t *testing.T) {
	sim, cfg, _, _ := busyChain(t)
	good, err := sim.MarshalState()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := LoadSimNodeFile(filepath.Join(dir, "absent.json"), cfg); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v, want os.ErrNotExist", err)
	}
	cases := map[string]string{
		"truncated":         string(good[:len(good)/2]),
		"empty":             "",
		"other format":      strings.Replace(string(good), `"format":1`, `"format":99`, 1),
		"head before start": strings.Replace(string(good), `"head":`, `"head":-`, 1),
		"corrupt raw":       strings.Replace(string(good), `"raw":"`, `"raw":"AAAA`, 1),
		"bad balance":       strings.Replace(string(good), `"usdt_balances":{`, `"usdt_balances":{"TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t":"-1",`, 1),
		"not json":          "\x00\x01garbage",
	}
	for name, body := range cases {
		if body == string(good) {
			t.Fatalf("%s: the corruption did not apply", name)
		}
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadSimNodeFile(path, cfg)
		if !errors.Is(err, ErrSimStateUnreadable) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want ErrSimStateUnreadable naming %s", name, err, path)
		}
	}
}
