package tron

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
)

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
	s.changes++
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
	bandwidth, memo := int64(pre.size+resultAllowance), len(pre.raw.Data) > 0
	if !s.bandwidthPayable(pre.transfer.Owner, bandwidth, memo) {
		return reject(CodeBandwidthError, "account resource insufficient error.")
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
		feeLimit:   pre.raw.FeeLimit,
		memo:       memo,
		bandwidth:  bandwidth,
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
		return TxStatus{State: TxIncluded, BlockNumber: tx.block, BlockTime: tx.blockTime, Receipt: tx.receipt, Message: tx.message,
			FeeSun: tx.cost.total(), EnergyUsed: tx.cost.energyUsed}
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
	if err := s.lookupFault("lookup " + HexID(txid)); err != nil {
		return TxStatus{}, err
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

// SolidBlockByNum returns solid block num and its transactions' ids, in
// inclusion order; ErrBlockNotSolid past the solid head (or between the
// genesis, block 0, and the first block).
func (s *SimNode) SolidBlockByNum(ctx context.Context, num int64) (Block, error) {
	if err := ctxErr(ctx); err != nil {
		return Block{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.lookupFault(fmt.Sprintf("solid block %d", num)); err != nil {
		return Block{}, err
	}
	if err := s.solidCheck(num); err != nil {
		return Block{}, err
	}
	return s.block(num), nil
}

// SolidTxInfosByBlockNum returns the receipts of solid block num's
// transactions, in inclusion order; ErrBlockNotSolid past the solid head.
func (s *SimNode) SolidTxInfosByBlockNum(ctx context.Context, num int64) ([]TxInfo, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.lookupFault(fmt.Sprintf("tx infos of block %d", num)); err != nil {
		return nil, err
	}
	if err := s.solidCheck(num); err != nil {
		return nil, err
	}
	return s.infos(num), nil
}

// infos lists the receipts of block num, in inclusion order ([] for none).
// Caller holds s.mu.
func (s *SimNode) infos(num int64) []TxInfo {
	txs := s.byBlock[num]
	out := make([]TxInfo, 0, len(txs))
	for _, tx := range txs {
		out = append(out, tx.info())
	}
	return out
}

// TxInfosByBlockNum returns the receipts of block num's transactions, in
// inclusion order, whether the block is solid or not; [] for a block past
// the head or before the first (java-tron's answer for a block it does
// not have). The simulated chain never forks, but a real head block can.
func (s *SimNode) TxInfosByBlockNum(ctx context.Context, num int64) ([]TxInfo, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.lookupFault(fmt.Sprintf("tx infos of head block %d", num)); err != nil {
		return nil, err
	}
	if num < s.startNumber || num > s.head {
		return []TxInfo{}, nil
	}
	return s.infos(num), nil
}

// solidCheck refuses a block that is not solid. Block 0 (the genesis) is
// always solid; the blocks between it and StartNumber are not modelled.
// Caller holds s.mu.
func (s *SimNode) solidCheck(num int64) error {
	if num != 0 && (num < s.startNumber || num > s.solidNumber()) {
		return fmt.Errorf("tron sim: block %d (solid head %d): %w", num, s.solidNumber(), ErrBlockNotSolid)
	}
	return nil
}

// block renders block num. Caller holds s.mu.
func (s *SimNode) block(num int64) Block {
	b := Block{Header: s.header(num)}
	if num > s.startNumber {
		b.ParentID = s.header(num - 1).ID
	}
	for _, tx := range s.byBlock[num] {
		b.TxIDs = append(b.TxIDs, tx.txid)
	}
	return b
}

// lookupFault draws the next lookup-channel fault for call. Caller holds s.mu.
func (s *SimNode) lookupFault(call string) error {
	switch s.nextFault(ChannelLookup) {
	case FaultLookupTimeout:
		return simTimeout(call)
	case FaultLookupNonAnswer:
		return fmt.Errorf("tron sim: %s: a gateway answered %s: %w", call, SimNonAnswer, ErrBadResponse)
	}
	return nil
}

// SimNonAnswer is the body FaultLookupNonAnswer stands for (HTTP 200).
const SimNonAnswer = `{"statusCode":429,"message":"Too Many Requests"}`
