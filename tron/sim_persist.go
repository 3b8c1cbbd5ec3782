package tron

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// ---- persistence -------------------------------------------------------
//
// A simulated chain can be kept in a file so that a process restarted on
// the same data (weir serve's dev mode) finds the chain its log speaks of:
// the same blocks, transactions, receipts, balances and resources.
//
// What is kept: the chain's identity (start block and time, seed, token,
// energy price), the head, every included transaction (signed bytes,
// block, receipt, costs) in inclusion order, the pool, the TRC-20 and TRX
// balances, staked resources and their use, and the broadcast log. Block
// headers need no storage: they are derived from the seed and the number.
// What is not: scripted faults, fault counts and the position of the
// seeded fault draws (a loaded chain draws from its configuration's seed
// anew), and the solidity lag and inclusion delay, which come from the
// configuration the chain is loaded with.

// SimStateFormat is the version of the saved state; a file of another
// version is refused.
const SimStateFormat = 1

type simState struct {
	Format         int                        `json:"format"`
	StartNumber    int64                      `json:"start_number"`
	StartMs        int64                      `json:"start_ms"`
	Seed           int64                      `json:"seed"`
	Token          Address                    `json:"token"`
	EnergyPriceSun int64                      `json:"energy_price_sun"`
	Head           int64                      `json:"head"`
	Balances       map[Address]string         `json:"usdt_balances,omitempty"` // base units; nil: not modelled
	TRX            map[Address]int64          `json:"trx_balances,omitempty"`  // sun; nil: not modelled
	BalancesOn     bool                       `json:"usdt_modelled"`
	TRXOn          bool                       `json:"trx_modelled"`
	Held           []Address                  `json:"held,omitempty"`
	Accounts       map[Address]simAccountJSON `json:"accounts,omitempty"`
	Included       []simTxJSON                `json:"included"` // inclusion order
	Pool           []simTxJSON                `json:"pool"`     // acceptance order
	Log            []broadcastJSON            `json:"broadcast_log"`
}

type simAccountJSON struct {
	EnergyLimit int64    `json:"energy_limit"`
	NetLimit    int64    `json:"net_limit"`
	Energy      [2]int64 `json:"energy"` // used, at
	Net         [2]int64 `json:"net"`
	Free        [2]int64 `json:"free"`
}

type simTxJSON struct {
	Raw       []byte        `json:"raw"`
	Signature []byte        `json:"sig"`
	IncludeAt int64         `json:"include_at"`
	Worker    string        `json:"worker,omitempty"`
	Forced    ReceiptResult `json:"forced,omitempty"`
	Dropped   bool          `json:"dropped,omitempty"`
	Block     int64         `json:"block,omitempty"`
	BlockTime int64         `json:"block_time,omitempty"`
	Receipt   ReceiptResult `json:"receipt,omitempty"`
	Message   string        `json:"message,omitempty"`
	Cost      [6]int64      `json:"cost,omitempty"` // energy used, staked, fee; net usage, fee; memo fee
}

type broadcastJSON struct {
	Worker     string        `json:"worker,omitempty"`
	TxID       string        `json:"txid"`
	HeadNumber int64         `json:"head"`
	HeadTime   int64         `json:"head_time"`
	Fault      Fault         `json:"fault,omitempty"`
	Code       BroadcastCode `json:"code,omitempty"`
	TimedOut   bool          `json:"timed_out,omitempty"`
	Accepted   bool          `json:"accepted,omitempty"`
}

// Changes counts the changes of the chain's state so far (blocks,
// broadcasts, funding): a saver compares it with the count at its last
// save to know whether there is anything new to write.
func (s *SimNode) Changes() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changes
}

// MarshalState encodes the chain's state (see the comment above
// SimStateFormat) as JSON. The lock is held only while the state is
// copied; encoding runs outside it.
func (s *SimNode) MarshalState() ([]byte, error) {
	st := s.snapshot()
	return json.Marshal(st)
}

func (s *SimNode) snapshot() *simState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &simState{
		Format: SimStateFormat, StartNumber: s.startNumber, StartMs: s.startMs, Seed: s.seed,
		Token: s.token, EnergyPriceSun: s.energyPrice, Head: s.head,
		BalancesOn: s.balances != nil, TRXOn: s.trx != nil,
		Included: make([]simTxJSON, 0, len(s.included)),
		Pool:     make([]simTxJSON, 0, len(s.pool)),
		Log:      make([]broadcastJSON, 0, len(s.log)),
	}
	if s.balances != nil {
		st.Balances = make(map[Address]string, len(s.balances))
		for a, b := range s.balances {
			st.Balances[a] = b.String()
		}
	}
	if s.trx != nil {
		st.TRX = make(map[Address]int64, len(s.trx))
		for a, sun := range s.trx {
			st.TRX[a] = sun
		}
	}
	for a, ok := range s.held {
		if ok {
			st.Held = append(st.Held, a)
		}
	}
	if len(s.accounts) > 0 {
		st.Accounts = make(map[Address]simAccountJSON, len(s.accounts))
		for a, acct := range s.accounts {
			st.Accounts[a] = simAccountJSON{
				EnergyLimit: acct.energyLimit, NetLimit: acct.netLimit,
				Energy: [2]int64{acct.energy.used, acct.energy.at},
				Net:    [2]int64{acct.net.used, acct.net.at},
				Free:   [2]int64{acct.free.used, acct.free.at},
			}
		}
	}
	// Raw and signature bytes are never modified after acceptance, so the
	// copy can share them.
	for _, tx := range s.included {
		st.Included = append(st.Included, tx.state())
	}
	for _, tx := range s.pool {
		st.Pool = append(st.Pool, tx.state())
	}
	for _, r := range s.log {
		st.Log = append(st.Log, broadcastJSON{
			Worker: r.Worker, TxID: HexID(r.TxID), HeadNumber: r.HeadNumber, HeadTime: r.HeadTime,
			Fault: r.Fault, Code: r.Code, TimedOut: r.TimedOut, Accepted: r.Accepted,
		})
	}
	return st
}

func (tx *simTx) state() simTxJSON {
	c := tx.cost
	return simTxJSON{
		Raw: tx.signed.Raw, Signature: tx.signed.Signature, IncludeAt: tx.includeAt, Worker: tx.worker,
		Forced: tx.forced, Dropped: tx.dropped, Block: tx.block, BlockTime: tx.blockTime,
		Receipt: tx.receipt, Message: tx.message,
		Cost: [6]int64{c.energyUsed, c.energyStaked, c.energyFee, c.netUsage, c.netFee, c.memoFee},
	}
}

// LoadSimNode rebuilds a chain saved by MarshalState. The chain's identity
// (start, seed, token, energy price) and everything on it come from data;
// cfg gives the rest, as for NewSimNode (solidity lag, inclusion delay,
// verifiers, fault rates and seed of the fault draws). Data that is not a
// consistent saved chain is refused, never half loaded.
func LoadSimNode(data []byte, cfg SimConfig) (*SimNode, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var st simState
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("tron sim: saved state: %w", err)
	}
	if st.Format != SimStateFormat {
		return nil, fmt.Errorf("tron sim: saved state has format %d, this weir reads format %d", st.Format, SimStateFormat)
	}
	if st.StartNumber < 1 || st.Head < st.StartNumber || st.EnergyPriceSun <= 0 || st.Token.IsZero() {
		return nil, fmt.Errorf("tron sim: saved state: start block %d, head %d, energy price %d, token %q: not a saved chain",
			st.StartNumber, st.Head, st.EnergyPriceSun, st.Token)
	}
	c := cfg
	c.Start, c.StartNumber, c.Balances, c.TRX, c.Token, c.EnergyPriceSun = DefaultSimStart, st.StartNumber, nil, nil, st.Token, st.EnergyPriceSun
	s := NewSimNode(c)
	s.startMs, s.seed, s.head = st.StartMs, st.Seed, st.Head
	// The fault draws follow the configuration's seed, as on a new chain.
	s.rng = rand.New(rand.NewPCG(uint64(cfg.Seed), 0x7765697273696d))
	if st.BalancesOn {
		s.balances = make(map[Address]*big.Int, len(st.Balances))
		for a, v := range st.Balances {
			b, ok := new(big.Int).SetString(v, 10)
			if !ok || b.Sign() < 0 {
				return nil, fmt.Errorf("tron sim: saved state: balance %q of %s is not a non-negative integer", v, a)
			}
			s.balances[a] = b
		}
	}
	if st.TRXOn {
		s.trx = make(map[Address]int64, len(st.TRX))
		for a, sun := range st.TRX {
			if sun < 0 {
				return nil, fmt.Errorf("tron sim: saved state: TRX of %s is negative", a)
			}
			s.trx[a] = sun
		}
	}
	for _, a := range st.Held {
		s.held[a] = true
	}
	for a, j := range st.Accounts {
		s.accounts[a] = &simAccount{
			energyLimit: j.EnergyLimit, netLimit: j.NetLimit,
			energy: usage{j.Energy[0], j.Energy[1]}, net: usage{j.Net[0], j.Net[1]}, free: usage{j.Free[0], j.Free[1]},
		}
	}
	lastBlock := int64(0)
	for i, j := range st.Included {
		tx, err := j.restore()
		if err != nil {
			return nil, fmt.Errorf("tron sim: saved state: included transaction %d: %w", i, err)
		}
		switch {
		case j.Block < s.startNumber || j.Block > s.head || j.Block < lastBlock:
			return nil, fmt.Errorf("tron sim: saved state: transaction %s in block %d (head %d, previous in block %d)", HexID(tx.txid), j.Block, s.head, lastBlock)
		case j.BlockTime != s.blockTime(j.Block):
			return nil, fmt.Errorf("tron sim: saved state: transaction %s: block %d's time is %d, not %d", HexID(tx.txid), j.Block, s.blockTime(j.Block), j.BlockTime)
		case j.Receipt == "":
			return nil, fmt.Errorf("tron sim: saved state: transaction %s in block %d has no receipt", HexID(tx.txid), j.Block)
		}
		if _, dup := s.known[tx.txid]; dup {
			return nil, fmt.Errorf("tron sim: saved state: transaction %s appears twice", HexID(tx.txid))
		}
		lastBlock = j.Block
		s.known[tx.txid] = tx
		s.included = append(s.included, tx)
		s.byBlock[tx.block] = append(s.byBlock[tx.block], tx)
	}
	for i, j := range st.Pool {
		tx, err := j.restore()
		if err != nil {
			return nil, fmt.Errorf("tron sim: saved state: pending transaction %d: %w", i, err)
		}
		if j.Block != 0 || j.Receipt != "" {
			return nil, fmt.Errorf("tron sim: saved state: pending transaction %s has a block or a receipt", HexID(tx.txid))
		}
		if _, dup := s.known[tx.txid]; dup {
			return nil, fmt.Errorf("tron sim: saved state: transaction %s appears twice", HexID(tx.txid))
		}
		tx.inPool = true
		s.known[tx.txid] = tx
		s.pool = append(s.pool, tx)
	}
	s.log = make([]BroadcastRecord, 0, len(st.Log))
	for i, j := range st.Log {
		id, err := ParseTxID(j.TxID)
		if err != nil {
			return nil, fmt.Errorf("tron sim: saved state: broadcast %d: %w", i+1, err)
		}
		s.log = append(s.log, BroadcastRecord{
			Seq: i + 1, Worker: j.Worker, TxID: id, HeadNumber: j.HeadNumber, HeadTime: j.HeadTime,
			Fault: j.Fault, Code: j.Code, TimedOut: j.TimedOut, Accepted: j.Accepted,
		})
	}
	return s, nil
}

// restore rebuilds a transaction from its signed bytes: what the node
// derives from them (txid, transfer, expiration, fee limit, size) is
// derived again rather than trusted from the file. The signature is not
// verified again: it was when the node accepted the transaction.
func (j simTxJSON) restore() (*simTx, error) {
	signed := SignedTx{Raw: j.Raw, Signature: j.Signature}
	raw, err := DecodeRaw(j.Raw)
	if err != nil {
		return nil, err
	}
	tr, err := raw.TokenTransfer()
	if err != nil {
		return nil, err
	}
	tx := &simTx{
		txid: TxID(j.Raw), signed: signed, transfer: tr, expiration: raw.Expiration,
		includeAt: j.IncludeAt, worker: j.Worker, forced: j.Forced, dropped: j.Dropped,
		feeLimit: raw.FeeLimit, memo: len(raw.Data) > 0, bandwidth: int64(len(signed.Marshal()) + resultAllowance),
		block: j.Block, blockTime: j.BlockTime, receipt: j.Receipt, message: j.Message,
		cost: simCost{energyUsed: j.Cost[0], energyStaked: j.Cost[1], energyFee: j.Cost[2],
			netUsage: j.Cost[3], netFee: j.Cost[4], memoFee: j.Cost[5]},
	}
	return tx, nil
}

// SaveFile writes the chain's state to path atomically: a temporary file
// in the same directory (mode 0600), fsynced, renamed over path, and the
// directory fsynced, so a crash leaves either the old state or the new one.
func (s *SimNode) SaveFile(path string) error {
	data, err := s.MarshalState()
	if err != nil {
		return fmt.Errorf("tron sim: saving %s: %w", path, err)
	}
	return writeFileAtomic(path, data)
}

func writeFileAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("tron sim: saving %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if err = f.Chmod(0o600); err != nil {
		return fmt.Errorf("tron sim: saving %s: %w", path, err)
	}
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("tron sim: saving %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("tron sim: saving %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("tron sim: saving %s: %w", path, err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("tron sim: saving %s: %w", path, err)
	}
	if d, derr := os.Open(dir); derr == nil {
		err = d.Sync()
		_ = d.Close()
		if err != nil {
			return fmt.Errorf("tron sim: saving %s: syncing its directory: %w", path, err)
		}
	}
	return nil
}

// ErrSimStateUnreadable wraps every failure to load a saved chain.
var ErrSimStateUnreadable = errors.New("tron sim: saved chain unreadable")

// LoadSimNodeFile is LoadSimNode on the file at path. A file that does not
// exist is an error wrapping os.ErrNotExist; one that cannot be read or is
// not a consistent saved chain is an error naming path and wrapping
// ErrSimStateUnreadable.
func LoadSimNodeFile(path string, cfg SimConfig) (*SimNode, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrSimStateUnreadable, path, err)
	}
	s, err := LoadSimNode(data, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrSimStateUnreadable, path, err)
	}
	return s, nil
}
