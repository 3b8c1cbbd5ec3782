package aggregate

import (
	"encoding/binary"
	"encoding/hex"
	"strings"
)

// Evidence recorded by the broadcast saga before money is released or a
// new txid is made: the proof of death of an envelope (Rebuilt, and Failed
// with attempts_exhausted or node_rejected) and the failing receipt of an
// included transaction (Failed with reverted, out_of_energy, …). Decide
// checks what the values themselves can show; what only the chain can show
// (the blocks' ids and that the txid is in none of them) is recorded so an
// audit can ask a node again (sagas.VerifyExpiryProof).

// LookupNotFound is the only lookup result that lets a rebuild proceed: the
// txid is in none of the scanned solid blocks.
const LookupNotFound = "not_found"

// MaxScanBlocks bounds a proof's block range: TRON's longest expiration
// (24 h) is 28 800 blocks, plus the reference block's lag and the margin.
const MaxScanBlocks = 40_000

// Evidence is the chain-time proof that an envelope can never be included.
//
// Scan is the proof: every solid block from the envelope's reference block
// up to the first solid block whose time is at or past expiration + margin,
// fetched by number and scanned for the txid. A transaction is included
// only in a block after its reference block and no later than its
// expiration; block times rise strictly and solid blocks are final; so a
// txid absent from all of them can never be included. A node (or a
// load-balanced backend) that lacks one of these blocks cannot vouch for
// it, so absence is never taken from a lookup or from a head read on
// another request.
//
// SolidBlockNumber/SolidBlockTime repeat the last scanned block (To/ToTime);
// Lookup is LookupNotFound. They are the fields older events carried.
type Evidence struct {
	SolidBlockNumber int64     `json:"solid_block_number"`
	SolidBlockTime   int64     `json:"solid_block_time"` // ms, chain time
	Expiration       int64     `json:"expiration"`       // ms, of the retired envelope
	Margin           int64     `json:"margin_ms"`
	Lookup           string    `json:"lookup"`
	Scan             BlockScan `json:"scan"`
}

// IsZero reports whether no proof of death is recorded (a rebuild proven
// by a failing receipt instead).
func (ev Evidence) IsZero() bool { return ev == Evidence{} }

// BlockScan is the range of solid blocks a proof scanned, From..To
// inclusive, each fetched by number, each one's parent id the id of the
// block before it. IDsSHA256 is sha256 over the 32-byte ids of From..To in
// order (hex): an audit that fetches the same blocks must get the same
// digest, and must find the txid in none of them.
type BlockScan struct {
	From      int64  `json:"from"`
	To        int64  `json:"to"`
	FromID    string `json:"from_id"`
	FromTime  int64  `json:"from_time"`
	ToID      string `json:"to_id"`
	ToTime    int64  `json:"to_time"`
	IDsSHA256 string `json:"ids_sha256"`
}

// IsZero reports whether no scan is recorded.
func (s BlockScan) IsZero() bool { return s == BlockScan{} }

// Blocks is the number of blocks scanned.
func (s BlockScan) Blocks() int64 { return s.To - s.From + 1 }

// Proves checks the evidence against an envelope expiring at expiration:
// the scan reaches a block at or past expiration + margin, and its fields
// are consistent. ProvesFor also ties the scan to the envelope's reference
// block; Decide and Audit call that on every Rebuilt and proven Failed.
func (ev Evidence) Proves(expiration int64) error {
	s := ev.Scan
	switch {
	case ev.Expiration != expiration:
		return newError(CodeInvalidEvidence, "evidence.expiration", "is %d, the retired envelope expires at %d", ev.Expiration, expiration)
	case ev.Margin < 0:
		return newError(CodeInvalidEvidence, "evidence.margin_ms", "negative")
	case ev.Lookup != LookupNotFound:
		return newError(CodeInvalidEvidence, "evidence.lookup", "the txid must be in none of the scanned blocks (lookup %q, need %q)", ev.Lookup, LookupNotFound)
	case s.IsZero():
		return newError(CodeInvalidEvidence, "evidence.scan", "required: absence is shown on the solid blocks, not by a lookup")
	case s.From <= 0 || s.To < s.From:
		return newError(CodeInvalidEvidence, "evidence.scan", "block range %d..%d is empty", s.From, s.To)
	case s.Blocks() > MaxScanBlocks:
		return newError(CodeInvalidEvidence, "evidence.scan", "%d blocks, more than %d", s.Blocks(), MaxScanBlocks)
	}
	if err := checkBlockID("evidence.scan.from_id", s.FromID, s.From); err != nil {
		return err
	}
	if err := checkBlockID("evidence.scan.to_id", s.ToID, s.To); err != nil {
		return err
	}
	if len(s.IDsSHA256) != 64 || !isHex(s.IDsSHA256) {
		return newError(CodeInvalidEvidence, "evidence.scan.ids_sha256", "must be 64 hex digits")
	}
	switch {
	case s.FromTime <= 0 || s.ToTime < s.FromTime || (s.To > s.From && s.ToTime == s.FromTime):
		return newError(CodeInvalidEvidence, "evidence.scan.to_time", "block times %d..%d do not rise", s.FromTime, s.ToTime)
	case s.To == s.From && s.ToID != s.FromID:
		return newError(CodeInvalidEvidence, "evidence.scan.to_id", "one block with two ids")
	case s.ToTime < ev.Expiration+ev.Margin:
		return newError(CodeInvalidEvidence, "evidence.scan.to_time", "the last scanned block's time %d is before expiration %d + margin %d", s.ToTime, ev.Expiration, ev.Margin)
	case ev.SolidBlockNumber != s.To || ev.SolidBlockTime != s.ToTime:
		return newError(CodeInvalidEvidence, "evidence.solid_block_number", "block %d at %d is not the last scanned block %d at %d", ev.SolidBlockNumber, ev.SolidBlockTime, s.To, s.ToTime)
	}
	return nil
}

// ProvesFor is Proves for env, and ties the scan to env's TAPoS reference:
// it starts at env's reference block, whose id matches the reference hash
// the signed bytes carry, so no block that could include the transaction
// was left out.
func (ev Evidence) ProvesFor(env Envelope) error {
	if err := ev.Proves(env.Expiration); err != nil {
		return err
	}
	if env.RefBlockNum <= 0 || env.RefBlockHash == "" {
		return newError(CodeInvalidEvidence, "envelope.ref_block_num", "the envelope records no reference block to scan from")
	}
	if ev.Scan.From != env.RefBlockNum {
		return newError(CodeInvalidEvidence, "evidence.scan.from", "the scan starts at block %d, the envelope's reference block is %d", ev.Scan.From, env.RefBlockNum)
	}
	// TAPoS ref_block_hash is bytes 8..16 of the reference block's id.
	if !strings.EqualFold(ev.Scan.FromID[16:32], env.RefBlockHash) {
		return newError(CodeInvalidEvidence, "evidence.scan.from_id", "block %d's id %s does not carry the envelope's reference hash %s", ev.Scan.From, ev.Scan.FromID, env.RefBlockHash)
	}
	return nil
}

// checkBlockID checks a TRON block id: 32 bytes of hex whose first 8 are
// the block number, big-endian.
func checkBlockID(field, id string, num int64) error {
	b, err := hex.DecodeString(id)
	if err != nil || len(b) != 32 {
		return newError(CodeInvalidEvidence, field, "must be 64 hex digits")
	}
	if n := binary.BigEndian.Uint64(b[:8]); n != uint64(num) {
		return newError(CodeInvalidEvidence, field, "id %s is of block %d, not %d", id, n, num)
	}
	return nil
}

// FailureReceipt is the solid block and the receipt that show an included
// transaction failed (the fee is burnt, the txid spent, no token moved).
// Fee is what it burnt (nil in events written before it was recorded).
type FailureReceipt struct {
	BlockNumber int64     `json:"block_number"`
	BlockTime   int64     `json:"block_time"` // ms, chain time
	Result      string    `json:"result"`     // java-tron contractResult, e.g. REVERT
	Fee         *ChainFee `json:"fee,omitempty"`
}

// Equal reports whether two receipts record the same facts.
func (r FailureReceipt) Equal(o FailureReceipt) bool {
	return r.BlockNumber == o.BlockNumber && r.BlockTime == o.BlockTime && r.Result == o.Result && r.Fee.Equal(o.Fee)
}

// check is what the values of a failing receipt can show: the result
// proves a failure (never SUCCESS, DEFAULT or empty) and the solid block
// is given. It returns the failure reason the result names.
func (r FailureReceipt) check() (string, error) {
	reason, ok := FailureReasonOf(r.Result)
	switch {
	case !ok:
		return "", newError(CodeInvalidEvidence, "receipt.result", "%q does not prove a failure", r.Result)
	case r.BlockNumber <= 0 || r.BlockTime <= 0:
		return "", newError(CodeInvalidEvidence, "receipt.block_number", "the failing receipt's solid block is required")
	case r.Fee != nil && (r.Fee.Sun < 0 || r.Fee.EnergyUsed < 0):
		return "", newError(CodeInvalidEvidence, "receipt.fee", "negative")
	}
	return reason, nil
}

// clone copies r (nil stays nil), so an event never shares a caller's value.
func (r *FailureReceipt) clone() *FailureReceipt {
	if r == nil {
		return nil
	}
	c := *r
	c.Fee = r.Fee.clone()
	return &c
}

func sameReceipt(a, b *FailureReceipt) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// ChainFee is what an included transaction burnt, from its receipt:
// Sun is all the TRX burnt (java-tron's info.fee: energy not covered by
// staking, bandwidth not covered by staking or the free allowance),
// EnergyUsed its receipt's energy_usage_total. A failed receipt burns its
// fee too.
type ChainFee struct {
	Sun        int64 `json:"sun"`
	EnergyUsed int64 `json:"energy_used"`
}

func (f *ChainFee) clone() *ChainFee {
	if f == nil {
		return nil
	}
	c := *f
	return &c
}

// Equal reports whether f and o are both nil or hold the same figures.
func (f *ChainFee) Equal(o *ChainFee) bool {
	if f == nil || o == nil {
		return f == o
	}
	return *f == *o
}

// FailureReasonOf names the failure a receipt result proves: java-tron's
// contractResult values that end a call without effect. ok is false for
// SUCCESS and for results that prove nothing (empty, DEFAULT, or a value
// this code does not know). UNKNOWN is java-tron's name for a VM exception
// it has no name for, and the call is rolled back, so it is a failure.
func FailureReasonOf(result string) (reason string, ok bool) {
	switch result {
	case "REVERT":
		return ReasonReverted, true
	case "OUT_OF_ENERGY":
		return ReasonOutOfEnergy, true
	case "OUT_OF_TIME", "BAD_JUMP_DESTINATION", "OUT_OF_MEMORY", "ILLEGAL_OPERATION",
		"STACK_OVERFLOW", "TRANSFER_FAILED", "PRECOMPILED_CONTRACT", "STACK_TOO_SMALL",
		"STACK_TOO_LARGE", "JVM_STACK_OVER_FLOW", "INVALID_CODE", "UNKNOWN":
		return strings.ToLower(result), true
	}
	return "", false
}

// checkFailureProof is what a Failed must carry once a signature exists
// (the bytes may be out there): a failing receipt in a solid block, or the
// proof of death of the current envelope. Before a signature, nothing can
// land, so no proof is needed.
func checkFailureProof(w Withdrawal, ev Failed) error {
	if w.Signature == "" {
		if ev.Receipt != nil || ev.Evidence != nil {
			return newError(CodeInvalidEvidence, "evidence", "an envelope that was never signed needs no proof; none may be recorded")
		}
		return nil
	}
	switch {
	case ev.Receipt != nil && ev.Evidence != nil:
		return newError(CodeInvalidEvidence, "evidence", "a failure is proven by a receipt or by a proof of death, not both")
	case ev.Receipt != nil:
		r := *ev.Receipt
		reason, err := r.check()
		switch {
		case err != nil:
			return err
		case reason != ev.Reason && ev.Reason != ReasonAttemptsExhausted:
			// attempts_exhausted: the last attempt's receipt failed too.
			return newError(CodeInvalidEvidence, "reason", "receipt %s proves %s, not %s", r.Result, reason, ev.Reason)
		case ev.TxID != w.Envelope.TxID:
			return newError(CodeInvalidEvidence, "txid", "the receipt must be the current envelope's")
		}
		return nil
	case ev.Evidence != nil:
		return ev.Evidence.ProvesFor(w.Envelope)
	}
	return newError(CodeInvalidEvidence, "evidence", "a signed envelope fails only with a failing receipt or a proof of death (reason %s)", ev.Reason)
}

// checkRebuildProof is the proof a Rebuilt must carry: exactly one of the
// proof of death of the current envelope and its failing receipt in a
// solid block. A failing receipt proves the transaction was included and
// moved nothing, and a txid is included at most once, so the envelope can
// never pay; a SUCCESS receipt never allows a rebuild. It returns the
// chain time (ms) the proof stands at: a new envelope must outlive it.
func checkRebuildProof(w Withdrawal, ev Rebuilt) (int64, error) {
	if ev.Receipt == nil {
		return ev.Evidence.SolidBlockTime, ev.Evidence.ProvesFor(w.Envelope)
	}
	if !ev.Evidence.IsZero() {
		return 0, newError(CodeInvalidEvidence, "evidence", "a rebuild is proven by a failing receipt or by a proof of death, not both")
	}
	if w.Signature == "" {
		return 0, newError(CodeInvalidEvidence, "receipt", "an envelope that was never signed has no receipt")
	}
	_, err := ev.Receipt.check()
	return ev.Receipt.BlockTime, err
}
