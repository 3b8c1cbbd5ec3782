package tron

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
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
	head         int64
	pool         []*simTx // accepted, not yet included, in acceptance order
	known        map[[32]byte]*simTx
	included     []*simTx // in inclusion order
	log          []BroadcastRecord
	blockChanged chan struct{} // closed and replaced at every new block
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

	block     int64 // > 0 once included
	blockTime int64
	receipt   ReceiptResult
	message   string
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
	s.head = s.startNumber
	return s
}

// ---- chain clock -------------------------------------------------------

func (s *SimNode) blockTime(n int64) int64 {
	return s.startMs + (n-s.startNumber)*BlockInterval.Milliseconds()
}

func (s *SimNode) header(n int64) BlockHeader {
	h := BlockHeader{Number: n, Timestamp: s.blockTime(n)}
	// java-tron block ids start with the 8-byte block number; the rest is a
	// hash. Derive it from the seed so TAPoS references are checkable.
	var seedNum [16]byte
	binary.BigEndian.PutUint64(seedNum[:8], uint64(s.seed))
	binary.BigEndian.PutUint64(seedNum[8:], uint64(n))
	sum := sha256.Sum256(append([]byte("weir-sim-block"), seedNum[:]...))
	binary.BigEndian.PutUint64(h.ID[:8], uint64(n))
	copy(h.ID[8:], sum[8:])
	return h
}

func (s *SimNode) solidNumber() int64 { return max(s.startNumber, s.head-s.lag) }

// Advance produces n blocks and returns the new head.
func (s *SimNode) Advance(n int) BlockHeader {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.produce()
	}
	return s.header(s.head)
}

// AdvanceTo produces blocks until the next block would be later than t, and
// returns the head. It never goes back in time.
func (s *SimNode) AdvanceTo(t time.Time) BlockHeader {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.blockTime(s.head+1) <= t.UnixMilli() {
		s.produce()
	}
	return s.header(s.head)
}

// Run produces one block every interval of wall time until ctx ends (chain
// time still moves 3 s per block). It is how `weir serve` drives the
// simulated chain. It returns nil when ctx is cancelled.
func (s *SimNode) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		return fmt.Errorf("tron sim: block interval must be positive, got %v", interval)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			s.Advance(1)
		}
	}
}

// WaitHead blocks until the head is at least block n (or ctx ends).
func (s *SimNode) WaitHead(ctx context.Context, n int64) (BlockHeader, error) {
	for {
		s.mu.Lock()
		h, ch := s.head, s.blockChanged
		s.mu.Unlock()
		if h >= n {
			return s.CurrentHead(), nil
		}
		select {
		case <-ctx.Done():
			return BlockHeader{}, ctx.Err()
		case <-ch:
		}
	}
}

// produce appends one block: pool transactions whose time has come are
// included unless expired; dropped and expired ones leave the pool.
// Caller holds s.mu.
func (s *SimNode) produce() {
	n := s.head + 1
	t := s.blockTime(n)
	kept := s.pool[:0]
	for _, tx := range s.pool {
		switch {
		case tx.dropped:
			s.forget(tx)
		case tx.expiration <= t:
			// A block never includes a transaction whose expiration is not
			// after the block time; java-tron evicts it from the pool.
			s.forget(tx)
		case tx.includeAt <= n:
			s.include(tx, n, t)
		default:
			kept = append(kept, tx)
		}
	}
	clear(s.pool[len(kept):])
	s.pool = kept
	s.head = n
	close(s.blockChanged)
	s.blockChanged = make(chan struct{})
}

func (s *SimNode) forget(tx *simTx) {
	tx.inPool = false
	delete(s.known, tx.txid)
}

func (s *SimNode) include(tx *simTx, n, t int64) {
	tx.inPool = false
	tx.block, tx.blockTime = n, t
	tx.receipt = ReceiptSuccess
	switch tx.forced {
	case ReceiptRevert:
		tx.receipt, tx.message = ReceiptRevert, "REVERT opcode executed"
	case ReceiptOutOfEnergy:
		tx.receipt, tx.message = ReceiptOutOfEnergy, "Not enough energy for 'SSTORE' operation executing"
	}
	if tx.receipt == ReceiptSuccess && s.balances != nil && tx.transfer.Contract == s.token {
		from := s.balanceOf(tx.transfer.Owner)
		if from.Cmp(tx.transfer.Amount) < 0 {
			tx.receipt, tx.message = ReceiptRevert, "REVERT opcode executed: balance is not sufficient"
		} else {
			from.Sub(from, tx.transfer.Amount)
			to := s.balanceOf(tx.transfer.To)
			to.Add(to, tx.transfer.Amount)
		}
	}
	s.included = append(s.included, tx)
}

func (s *SimNode) balanceOf(a Address) *big.Int {
	b, ok := s.balances[a]
	if !ok {
		b = new(big.Int)
		s.balances[a] = b
	}
	return b
}

// ---- faults ------------------------------------------------------------

// Script queues faults for the next calls of a channel, consumed one per
// call in order before any seeded fault. It panics if a fault belongs to
// another channel (FaultNone fits every channel).
func (s *SimNode) Script(ch Channel, faults ...Fault) {
	for _, f := range faults {
		if f != FaultNone && f.Channel() != ch {
			panic(fmt.Sprintf("tron sim: fault %q does not belong to channel %q", f, ch))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scripts[ch] = append(s.scripts[ch], faults...)
}

// ScriptRemaining returns how many scripted faults of ch are not consumed yet.
func (s *SimNode) ScriptRemaining(ch Channel) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.scripts[ch])
}

// FaultCounts returns how many times each fault was injected.
func (s *SimNode) FaultCounts() map[Fault]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[Fault]int, len(s.faultCounts))
	for f, n := range s.faultCounts {
		out[f] = n
	}
	return out
}

// nextFault picks the fault for one call of ch. Caller holds s.mu.
func (s *SimNode) nextFault(ch Channel) Fault {
	f := FaultNone
	if q := s.scripts[ch]; len(q) > 0 {
		f, s.scripts[ch] = q[0], q[1:]
	} else if s.channelHasRates(ch) {
		r := s.rng.Float64()
		for _, cand := range faultOrder {
			if faultChannels[cand] != ch {
				continue
			}
			if r < s.rates[cand] {
				f = cand
				break
			}
			r -= s.rates[cand]
		}
	}
	if f != FaultNone {
		s.faultCounts[f]++
	}
	return f
}

func (s *SimNode) channelHasRates(ch Channel) bool {
	for f, p := range s.rates {
		if p > 0 && faultChannels[f] == ch {
			return true
		}
	}
	return false
}

func simTimeout(call string) error {
	return fmt.Errorf("tron sim: %s: %w", call, ErrTimeout)
}

// ctxErr maps a finished context to the package's error vocabulary: a
// deadline is a timeout (ambiguous), a cancellation is passed through.
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	}
	return err
}

// ---- Node --------------------------------------------------------------

var _ Node = (*SimNode)(nil)

// Broadcast validates and (normally) accepts the transaction into the pool,
// subject to the next broadcast fault.
func (s *SimNode) Broadcast(ctx context.Context, tx SignedTx) (BroadcastResult, error) {
	if err := ctxErr(ctx); err != nil {
		return BroadcastResult{}, err
	}
	// The stateless checks (decoding, signature recovery) run before taking
	// the lock so concurrent workers are not serialised behind secp256k1.
	pre := s.precheck(tx)
	s.mu.Lock()
	defer s.mu.Unlock()
	txid := pre.txid
	fault := s.nextFault(ChannelBroadcast)
	rec := BroadcastRecord{
		Seq:        len(s.log) + 1,
		Worker:     WorkerFrom(ctx),
		TxID:       txid,
		HeadNumber: s.head,
		HeadTime:   s.blockTime(s.head),
	}
	if fault != FaultNone {
		rec.Fault = fault
	}
	res := BroadcastResult{TxID: txid}
	var err error
	switch fault {
	case FaultTimeoutBeforeAccept:
		err = simTimeout("broadcast " + HexID(txid))
	case FaultBusy:
		res.Code, res.Message = CodeServerBusy, "Server busy."
	case FaultUnknownCode:
		res.Code, res.Message = SimUnknownCode, "simulated unlisted response code"
	case FaultDupNotAccepted:
		res.Code, res.Message = CodeDupTransactionError, "Dup transaction."
	default:
		res, rec.Accepted = s.accept(tx, pre, fault, rec.Worker)
		switch fault {
		case FaultAcceptThenTimeout:
			res, err = BroadcastResult{TxID: txid}, simTimeout("broadcast "+HexID(txid))
		case FaultFalseExpired:
			res.Code, res.Message = CodeTransactionExpirationError, "Transaction expired"
		case FaultConnectionAfterAccept:
			res.Code, res.Message = CodeNotEnoughEffectiveConnection, "Not enough effective connection."
		}
	}
	rec.Code, rec.TimedOut = res.Code, err != nil
	s.log = append(s.log, rec)
	return res, err
}

// precheckResult holds the checks that need no chain state.
type precheckResult struct {
	txid        [32]byte
	size        int
	raw         RawData
	decodeErr   error
	transfer    TokenTransfer
	transferErr error
	sigOK       bool
}

func (s *SimNode) precheck(tx SignedTx) precheckResult {
	p := precheckResult{txid: TxID(tx.Raw), size: len(tx.Marshal())}
	if p.raw, p.decodeErr = DecodeRaw(tx.Raw); p.decodeErr != nil {
		return p
	}
	if p.transfer, p.transferErr = p.raw.TokenTransfer(); p.transferErr != nil {
		return p
	}
	if len(tx.Signature) > 0 {
		for _, v := range s.verifiers { // immutable after NewSimNode
			if v.VerifySignature(p.txid, tx.Signature, p.transfer.Owner) {
				p.sigOK = true
				break
			}
		}
	}
	return p
}

// accept runs java-tron's checks, in java-tron's order, and adds the
// transaction to the pool. Caller holds s.mu.
func (s *SimNode) accept(tx SignedTx, pre precheckResult, fault Fault, worker string) (BroadcastResult, bool) {
	txid := pre.txid
	reject := func(code BroadcastCode, format string, args ...any) (BroadcastResult, bool) {
		return BroadcastResult{Code: code, Message: fmt.Sprintf(format, args...), TxID: txid}, false
	}
	if pre.size > MaxTransactionSize {
		return reject(CodeTooBigTransactionError, "Too big transaction, the size is %d bytes", pre.size)
	}
	if old, ok := s.known[txid]; ok {
		if old.block > 0 || (old.inPool && !old.dropped) {
			return reject(CodeDupTransactionError, "Dup transaction.")
		}
	}
	if pre.decodeErr != nil {
		return reject(CodeOtherError, "%v", pre.decodeErr)
	}
	if !s.taposOK(pre.raw) {
		return reject(CodeTaposError, "Tapos check error")
	}
	headTime := s.blockTime(s.head)
	if pre.raw.Expiration <= headTime {
		return reject(CodeTransactionExpirationError, "Transaction expired")
	}
	if pre.raw.Expiration > headTime+MaxExpiration.Milliseconds() {
		return reject(CodeTransactionExpirationError, "Transaction expiration time is %d, but maximum valid time is %d",
			pre.raw.Expiration, headTime+MaxExpiration.Milliseconds())
	}
	if pre.transferErr != nil {
		return reject(CodeContractValidateError, "simulated node accepts only TRC-20 transfers: %v", pre.transferErr)
	}
	if len(tx.Signature) == 0 {
		return reject(CodeSigError, "Validate signature error: miss sig")
	}
	if !pre.sigOK {
		return reject(CodeSigError, "Validate signature error: signature is not by the owner %s", pre.transfer.Owner)
	}
	if old, ok := s.known[txid]; ok && old.inPool {
		// Re-sending a transaction the pool is about to drop revives it.
		old.dropped = fault == FaultDropAfterAccept
		return BroadcastResult{Code: CodeSuccess, TxID: txid}, true
	}
	stx := &simTx{
		txid:       txid,
		signed:     SignedTx{Raw: bytes.Clone(tx.Raw), Signature: bytes.Clone(tx.Signature)},
		transfer:   pre.transfer,
		expiration: pre.raw.Expiration,
		includeAt:  s.head + s.delay,
		worker:     worker,
		dropped:    fault == FaultDropAfterAccept,
		inPool:     true,
	}
	switch fault {
	case FaultRevert:
		stx.forced = ReceiptRevert
	case FaultOutOfEnergy:
		stx.forced = ReceiptOutOfEnergy
	}
	s.pool = append(s.pool, stx)
	s.known[txid] = stx
	return BroadcastResult{Code: CodeSuccess, TxID: txid}, true
}

// taposOK checks the reference names one of the last 65536 blocks.
func (s *SimNode) taposOK(raw RawData) bool {
	if len(raw.RefBlockBytes) != 2 || len(raw.RefBlockHash) != 8 {
		return false
	}
	low := int64(binary.BigEndian.Uint16(raw.RefBlockBytes))
	n := s.head - ((s.head-low)%65536+65536)%65536
	if n < s.startNumber {
		return false
	}
	h := s.header(n).RefBlockHash()
	return bytes.Equal(h[:], raw.RefBlockHash)
}

// status is the honest answer for txid. Caller holds s.mu.
func (s *SimNode) status(txid [32]byte, solid bool) TxStatus {
	tx, ok := s.known[txid]
	switch {
	case !ok:
		return TxStatus{State: TxUnknown}
	case tx.block > 0:
		if solid && tx.block > s.solidNumber() {
			return TxStatus{State: TxUnknown}
		}
		return TxStatus{State: TxIncluded, BlockNumber: tx.block, BlockTime: tx.blockTime, Receipt: tx.receipt, Message: tx.message}
	case solid:
		return TxStatus{State: TxUnknown}
	default:
		return TxStatus{State: TxPending}
	}
}

// Lookup reports included (any block), pending or unknown.
func (s *SimNode) Lookup(ctx context.Context, txid [32]byte) (TxStatus, error) {
	return s.lookup(ctx, txid, false)
}

// SolidLookup reports included only once the block is solid.
func (s *SimNode) SolidLookup(ctx context.Context, txid [32]byte) (TxStatus, error) {
	return s.lookup(ctx, txid, true)
}

func (s *SimNode) lookup(ctx context.Context, txid [32]byte, solid bool) (TxStatus, error) {
	if err := ctxErr(ctx); err != nil {
		return TxStatus{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nextFault(ChannelLookup) == FaultLookupTimeout {
		return TxStatus{}, simTimeout("lookup " + HexID(txid))
	}
	return s.status(txid, solid), nil
}

// Head returns the latest block.
func (s *SimNode) Head(ctx context.Context) (BlockHeader, error) {
	return s.headCall(ctx, "head", false)
}

// SolidHead returns the latest solid block.
func (s *SimNode) SolidHead(ctx context.Context) (BlockHeader, error) {
	return s.headCall(ctx, "solid head", true)
}

// RefBlock returns the solid head, the TAPoS reference.
func (s *SimNode) RefBlock(ctx context.Context) (BlockHeader, error) {
	return s.headCall(ctx, "ref block", true)
}

func (s *SimNode) headCall(ctx context.Context, call string, solid bool) (BlockHeader, error) {
	if err := ctxErr(ctx); err != nil {
		return BlockHeader{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nextFault(ChannelHead) == FaultHeadTimeout {
		return BlockHeader{}, simTimeout(call)
	}
	if solid {
		return s.header(s.solidNumber()), nil
	}
	return s.header(s.head), nil
}

// ---- inspection (never faulted) ----------------------------------------

// CurrentHead returns the head without consuming faults.
func (s *SimNode) CurrentHead() BlockHeader {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.header(s.head)
}

// CurrentSolidHead returns the solid head without consuming faults.
func (s *SimNode) CurrentSolidHead() BlockHeader {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.header(s.solidNumber())
}

// Block returns the header of block n if it exists.
func (s *SimNode) Block(n int64) (BlockHeader, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n < s.startNumber || n > s.head {
		return BlockHeader{}, false
	}
	return s.header(n), true
}

// Status is Lookup (solid=false) or SolidLookup (solid=true) without faults.
func (s *SimNode) Status(txid [32]byte, solid bool) TxStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status(txid, solid)
}

// Transaction returns the signed bytes the node holds for txid (pending or
// included) and its status, without consuming faults.
func (s *SimNode) Transaction(txid [32]byte) (SignedTx, TxStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, ok := s.known[txid]
	if !ok {
		return SignedTx{}, TxStatus{}, false
	}
	signed := SignedTx{Raw: bytes.Clone(tx.signed.Raw), Signature: bytes.Clone(tx.signed.Signature)}
	return signed, s.status(txid, false), true
}

// PendingCount returns the number of transactions in the pool.
func (s *SimNode) PendingCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pool)
}

// BroadcastLog returns every Broadcast call so far, in arrival order.
func (s *SimNode) BroadcastLog() []BroadcastRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]BroadcastRecord(nil), s.log...)
}

func (tx *simTx) asTransfer() Transfer {
	return Transfer{
		TxID:        tx.txid,
		Contract:    tx.transfer.Contract,
		From:        tx.transfer.Owner,
		To:          tx.transfer.To,
		Amount:      new(big.Int).Set(tx.transfer.Amount),
		BlockNumber: tx.block,
		BlockTime:   tx.blockTime,
		Receipt:     tx.receipt,
		Worker:      tx.worker,
	}
}

// Transfers returns every included transfer (whatever its receipt), in
// inclusion order. Each txid appears at most once: the chain deduplicates.
func (s *SimNode) Transfers() []Transfer {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Transfer, 0, len(s.included))
	for _, tx := range s.included {
		out = append(out, tx.asTransfer())
	}
	return out
}

// TransferByTxID returns the included transfer with this txid.
func (s *SimNode) TransferByTxID(txid [32]byte) (Transfer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, ok := s.known[txid]
	if !ok || tx.block == 0 {
		return Transfer{}, false
	}
	return tx.asTransfer(), true
}

// Ledger totals the included transfers.
func (s *SimNode) Ledger() LedgerSummary {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := LedgerSummary{Total: new(big.Int)}
	for _, tx := range s.included {
		sum.Included++
		if tx.receipt == ReceiptSuccess {
			sum.Succeeded++
			sum.Total.Add(sum.Total, tx.transfer.Amount)
		} else {
			sum.Failed++
		}
	}
	return sum
}

// Balance returns the modelled token balance of a (nil when balances are
// not modelled).
func (s *SimNode) Balance(a Address) *big.Int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.balances == nil {
		return nil
	}
	return new(big.Int).Set(s.balanceOf(a))
}

// SetBalance sets a's modelled token balance (nil means zero), turning
// balance modelling on if it was off.
func (s *SimNode) SetBalance(a Address, amount *big.Int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.balances == nil {
		s.balances = map[Address]*big.Int{}
	}
	b := new(big.Int)
	if amount != nil {
		b.Set(amount)
	}
	s.balances[a] = b
}
