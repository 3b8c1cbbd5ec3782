package tron

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"sync"
	"time"
)

// DefaultSimStart is the chain time of a simulated chain's first block when
// SimConfig.Start is zero (a fixed instant, so runs are reproducible).
var DefaultSimStart = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// SimConfig configures a SimNode. The zero value is a usable chain: real
// signatures only, 19-block solidity lag, inclusion in the next block, no
// faults, no balance checks.
type SimConfig struct {
	// Start is the timestamp of block StartNumber (truncated to ms).
	Start time.Time
	// StartNumber is the first block's number; zero means 1.
	StartNumber int64
	// SolidityLag: a block is solid once the head is this many blocks past
	// it. Zero means DefaultSolidityLag.
	SolidityLag int
	// InclusionDelay: an accepted transaction is included in the block this
	// many blocks after the head at acceptance. Zero means 1 (the next block).
	InclusionDelay int
	// Instant includes in the next block and makes every block solid at
	// once (for benchmarks); it overrides SolidityLag and InclusionDelay.
	Instant bool

	// Seed and FaultRates drive seeded fault injection: on every call of a
	// channel, each of the channel's faults happens with its rate (rates of
	// a channel sum to ≤ 1). Deterministic for a given seed and call order.
	// Scripted faults (SimNode.Script) are consumed first.
	Seed       int64
	FaultRates map[Fault]float64

	// Balances, when non-nil, models the token balances of Token (zero means
	// USDTContract): an included transfer larger than the sender's balance
	// gets receipt REVERT. Nil means unlimited balances.
	Balances map[Address]*big.Int
	Token    Address

	// TRX, when non-nil, models TRX balances (sun): fees are burnt from
	// them and a sender short of TRX gets OUT_OF_ENERGY (see sim_wallet.go).
	// Nil means every address holds unlimited TRX; fees are still computed
	// and reported on receipts.
	TRX map[Address]int64
	// EnergyPriceSun is the burn price of one energy unit; zero means
	// SimEnergyPriceSun.
	EnergyPriceSun int64

	// Verifiers are accepted in addition to real secp256k1 signatures (for
	// example an *HMACSigner used by tests).
	Verifiers []SignatureVerifier
}

// Validate reports a configuration NewSimNode would refuse.
func (c SimConfig) Validate() error {
	if c.SolidityLag < 0 {
		return fmt.Errorf("tron sim: negative solidity lag %d", c.SolidityLag)
	}
	if c.InclusionDelay < 0 {
		return fmt.Errorf("tron sim: negative inclusion delay %d", c.InclusionDelay)
	}
	if c.StartNumber < 0 {
		return fmt.Errorf("tron sim: negative start number %d", c.StartNumber)
	}
	for a, b := range c.Balances {
		if b == nil || b.Sign() < 0 {
			return fmt.Errorf("tron sim: balance of %s must be a non-negative amount", a)
		}
	}
	for a, sun := range c.TRX {
		if sun < 0 {
			return fmt.Errorf("tron sim: TRX of %s must be non-negative", a)
		}
	}
	if c.EnergyPriceSun < 0 {
		return fmt.Errorf("tron sim: negative energy price %d", c.EnergyPriceSun)
	}
	return validateRates(c.FaultRates)
}

// SimNode is an in-process TRON node on a controllable chain clock: a block
// every 3 s of chain time, strictly rising timestamps, a solidity lag, an
// inclusion delay, TAPoS and expiration checks, dedup by txid, signature
// verification against the owner, and scripted or seeded faults. It keeps a
// ledger of included TRC-20 transfers and a log of every broadcast (with the
// worker id from WithWorker) for conservation and at-most-once checks.
//
// Chain time moves only through Advance, AdvanceTo or Run. All methods are
// safe for concurrent use.
type SimNode struct {
	mu sync.Mutex

	startNumber  int64
	startMs      int64
	lag          int64
	delay        int64
	seed         int64
	token        Address
	verifiers    []SignatureVerifier
	rates        map[Fault]float64
	rng          *rand.Rand
	scripts      map[Channel][]Fault
	faultCounts  map[Fault]int
	balances     map[Address]*big.Int // nil: not modelled
	trx          map[Address]int64    // sun; nil: not modelled (unlimited)
	accounts     map[Address]*simAccount
	held         map[Address]bool // received the token (when balances are not modelled)
	energyPrice  int64
	head         int64
	pool         []*simTx // accepted, not yet included, in acceptance order
	known        map[[32]byte]*simTx
	included     []*simTx           // in inclusion order
	byBlock      map[int64][]*simTx // included, by block number, in inclusion order
	log          []BroadcastRecord
	blockChanged chan struct{} // closed and replaced at every new block
	changes      uint64        // state changes so far (Changes)
}

type simTx struct {
	txid       [32]byte
	signed     SignedTx
	transfer   TokenTransfer
	expiration int64
	includeAt  int64
	worker     string
	forced     ReceiptResult // receipt imposed by a fault ("" = execute)
	dropped    bool          // vanish from the pool at the next block
	inPool     bool
	feeLimit   int64 // sun
	memo       bool  // raw_data.data is set: the memo fee applies
	bandwidth  int64 // bytes charged: serialised size + java-tron's result allowance

	block     int64 // > 0 once included
	blockTime int64
	receipt   ReceiptResult
	message   string
	cost      simCost
}

// BroadcastRecord is one Broadcast call as the simulated node saw it.
type BroadcastRecord struct {
	Seq        int // 1-based order of arrival
	Worker     string
	TxID       [32]byte
	HeadNumber int64 // head when the call arrived
	HeadTime   int64
	Fault      Fault         // injected fault, "" when none
	Code       BroadcastCode // what the caller was told; "" when it timed out
	TimedOut   bool
	Accepted   bool // this call put the transaction into the pool
}

// Transfer is one TRC-20 transfer included in a simulated block.
type Transfer struct {
	TxID        [32]byte
	Contract    Address
	From        Address
	To          Address
	Amount      *big.Int
	BlockNumber int64
	BlockTime   int64
	Receipt     ReceiptResult // tokens moved only when SUCCESS
	Worker      string        // worker whose broadcast got it into the pool
}

// LedgerSummary totals the included transfers.
type LedgerSummary struct {
	Included  int      // transactions in blocks
	Succeeded int      // of which with receipt SUCCESS
	Failed    int      // of which REVERT, OUT_OF_ENERGY, ...
	Total     *big.Int // amount moved by the succeeded ones
}

// NewSimNode starts a simulated chain whose head is block cfg.StartNumber.
// It panics if cfg.Validate fails (validate user input first).
func NewSimNode(cfg SimConfig) *SimNode {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	start := cfg.Start
	if start.IsZero() {
		start = DefaultSimStart
	}
	s := &SimNode{
		startNumber:  cfg.StartNumber,
		startMs:      start.UnixMilli(),
		lag:          int64(cfg.SolidityLag),
		delay:        int64(cfg.InclusionDelay),
		seed:         cfg.Seed,
		token:        cfg.Token,
		verifiers:    append([]SignatureVerifier{Secp256k1Verifier}, cfg.Verifiers...),
		rates:        map[Fault]float64{},
		rng:          rand.New(rand.NewPCG(uint64(cfg.Seed), 0x7765697273696d)), // "weirsim"
		scripts:      map[Channel][]Fault{},
		faultCounts:  map[Fault]int{},
		known:        map[[32]byte]*simTx{},
		byBlock:      map[int64][]*simTx{},
		accounts:     map[Address]*simAccount{},
		held:         map[Address]bool{},
		energyPrice:  cfg.EnergyPriceSun,
		blockChanged: make(chan struct{}),
	}
	if s.startNumber == 0 {
		s.startNumber = 1
	}
	if s.lag == 0 {
		s.lag = DefaultSolidityLag
	}
	if s.delay == 0 {
		s.delay = 1
	}
	if cfg.Instant {
		s.lag, s.delay = 0, 1
	}
	if s.token.IsZero() {
		s.token = USDTContract
	}
	for f, p := range cfg.FaultRates {
		s.rates[f] = p
	}
	if cfg.Balances != nil {
		s.balances = make(map[Address]*big.Int, len(cfg.Balances))
		for a, b := range cfg.Balances {
			s.balances[a] = new(big.Int).Set(b)
		}
	}
	if cfg.TRX != nil {
		s.trx = make(map[Address]int64, len(cfg.TRX))
		for a, sun := range cfg.TRX {
			s.trx[a] = sun
		}
	}
	if s.energyPrice == 0 {
		s.energyPrice = SimEnergyPriceSun
	}
	s.head = s.startNumber
	return s
}
