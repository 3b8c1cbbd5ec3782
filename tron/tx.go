package tron

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/big"
	"time"
)

// Chain constants (java-tron mainnet).
const (
	// BlockInterval is the chain-time distance between consecutive blocks.
	BlockInterval = 3 * time.Second
	// DefaultSolidityLag is how many blocks behind the head the latest solid
	// (irreversible) block is, roughly.
	DefaultSolidityLag = 19
	// DefaultExpiration is java-tron's default: head time + 60 s.
	DefaultExpiration = 60 * time.Second
	// MaxExpiration is the furthest java-tron accepts an expiration beyond
	// the head block time.
	MaxExpiration = 24 * time.Hour
	// DefaultFeeLimit (sun) caps the TRX burnt for energy: 100 TRX.
	DefaultFeeLimit = 100_000_000
	// MaxTransactionSize is java-tron's limit on a serialised transaction.
	MaxTransactionSize = 500 * 1024
)

// BlockHeader is what weir needs to know of a block.
type BlockHeader struct {
	Number    int64
	Timestamp int64 // ms since epoch, chain time
	ID        [32]byte
}

// Time returns the block timestamp as a time.Time.
func (b BlockHeader) Time() time.Time { return time.UnixMilli(b.Timestamp).UTC() }

// IDHex returns the block id as hex.
func (b BlockHeader) IDHex() string { return hex.EncodeToString(b.ID[:]) }

// RefBlockBytes is the TAPoS ref_block_bytes of this block: bytes 6..8 of the
// big-endian 8-byte block number.
func (b BlockHeader) RefBlockBytes() [2]byte {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(b.Number))
	return [2]byte{n[6], n[7]}
}

// RefBlockHash is the TAPoS ref_block_hash of this block: bytes 8..16 of the
// block id.
func (b BlockHeader) RefBlockHash() [8]byte {
	var h [8]byte
	copy(h[:], b.ID[8:16])
	return h
}

// TransferParams are the inputs of a TRC-20 transfer transaction. Times are
// chain times in ms since epoch; pass them explicitly (derived from the
// node's head block), never from this process's clock alone.
type TransferParams struct {
	Owner    Address  // the sender; must be the signer's address
	Contract Address  // the TRC-20 contract; zero means USDTContract
	To       Address  // recipient
	Amount   *big.Int // token base units, 1 ≤ Amount < 2^256
	// RefBlock is the TAPoS reference, normally Node.RefBlock (a solid block).
	RefBlock BlockHeader
	// Timestamp is the creation time written into raw_data (required).
	Timestamp int64
	// Expiration is when the transaction dies: no block with a timestamp
	// ≥ Expiration can include it. Zero means Timestamp + DefaultExpiration.
	// It must be after Timestamp and at most MaxExpiration (plus
	// UniqueTimestampSpan, see UniqueTimestamp) after it.
	Expiration int64
	// FeeLimit in sun; zero means DefaultFeeLimit.
	FeeLimit int64
	// Memo goes into raw_data.data (optional). Since committee proposal #80
	// (2022-12-16) a transaction carrying one burns an extra 1 TRX
	// (getMemoFee): to keep equal transfers apart use UniqueTimestamp
	// instead.
	Memo []byte
}

// UniqueTimestampSpan is the range of the offsets UniqueTimestamp takes
// off a creation time: 2^20 ms, about 17½ minutes.
const UniqueTimestampSpan = 1 << 20

// UniqueTimestamp is the creation timestamp for a transfer built against a
// head block at headMs: headMs − (n mod UniqueTimestampSpan) ms.
//
// Two transfers with the same payer, payee, amount, reference block and
// expiration would otherwise be the same bytes, hence one txid, and the
// chain would pay once for both. The timestamp is covered by the txid and
// java-tron does not validate it (only the expiration and the TAPoS
// reference are), so giving every transfer its own n — the caller's unique
// number for it, e.g. the log position it is built after — keeps their
// txids apart with no memo and no memo fee: any two transfers whose n
// differ by less than UniqueTimestampSpan get different timestamps. The
// result is deterministic, so rebuilding from the same inputs gives the
// same bytes, and never after the head, so the expiration window is
// unchanged.
func UniqueTimestamp(headMs int64, n uint64) int64 {
	return headMs - int64(n%UniqueTimestampSpan)
}

// Envelope is one built, unsigned transaction: the raw_data bytes and their
// txid, plus the decoded facts the saga records. Raw is the only
// authoritative form: it is what was hashed, what gets signed (via TxID) and
// what is sent.
type Envelope struct {
	TxID [32]byte
	Raw  []byte

	Owner    Address
	Contract Address
	To       Address
	Amount   *big.Int

	Expiration int64 // ms
	Timestamp  int64 // ms
	FeeLimit   int64 // sun

	RefBlockBytes [2]byte
	RefBlockHash  [8]byte
	// RefBlockNumber is the number of the TAPoS block, when known (it is not
	// in the raw bytes, only its low 16 bits are; EnvelopeFromRaw leaves it 0).
	RefBlockNumber int64
}

// TxIDHex returns the txid as 64 hex digits.
func (e Envelope) TxIDHex() string { return HexID(e.TxID) }

// RawHex returns the raw_data bytes as hex (java-tron's raw_data_hex).
func (e Envelope) RawHex() string { return hex.EncodeToString(e.Raw) }

// Verify checks that TxID is sha256(Raw), e.g. after loading an envelope
// from storage.
func (e Envelope) Verify() error {
	if TxID(e.Raw) != e.TxID {
		return fmt.Errorf("%w: txid %s is not sha256 of the raw bytes", ErrMalformed, e.TxIDHex())
	}
	return nil
}

// BuildTransfer encodes a TRC-20 transfer(to, amount) as a
// TriggerSmartContract transaction, field by field in java-tron's order, and
// computes its txid. The returned Raw bytes are final: sign TxID, send Raw.
func BuildTransfer(p TransferParams) (Envelope, error) {
	contract := p.Contract
	if contract.IsZero() {
		contract = USDTContract
	}
	if p.Owner.IsZero() || p.Owner[0] != AddressPrefix {
		return Envelope{}, fmt.Errorf("%w: owner is not a TRON address", ErrInvalidTransfer)
	}
	if contract[0] != AddressPrefix {
		return Envelope{}, fmt.Errorf("%w: contract is not a TRON address", ErrInvalidTransfer)
	}
	if p.RefBlock.ID == ([32]byte{}) || p.RefBlock.Number <= 0 {
		return Envelope{}, fmt.Errorf("%w: reference block is missing", ErrInvalidTransfer)
	}
	if p.Timestamp <= 0 {
		return Envelope{}, fmt.Errorf("%w: timestamp is required", ErrInvalidTransfer)
	}
	exp := p.Expiration
	if exp == 0 {
		exp = p.Timestamp + DefaultExpiration.Milliseconds()
	}
	if exp <= p.Timestamp {
		return Envelope{}, fmt.Errorf("%w: expiration %d is not after timestamp %d", ErrInvalidTransfer, exp, p.Timestamp)
	}
	// java-tron bounds the expiration by the head's time + MaxExpiration;
	// the timestamp may lie up to UniqueTimestampSpan before the head.
	if exp-p.Timestamp > MaxExpiration.Milliseconds()+UniqueTimestampSpan {
		return Envelope{}, fmt.Errorf("%w: expiration is more than %v after timestamp", ErrInvalidTransfer, MaxExpiration)
	}
	if exp <= p.RefBlock.Timestamp {
		return Envelope{}, fmt.Errorf("%w: expiration is not after the reference block", ErrInvalidTransfer)
	}
	fee := p.FeeLimit
	if fee == 0 {
		fee = DefaultFeeLimit
	}
	if fee < 0 {
		return Envelope{}, fmt.Errorf("%w: negative fee limit", ErrInvalidTransfer)
	}
	data, err := EncodeTransferCall(p.To, p.Amount)
	if err != nil {
		return Envelope{}, err
	}
	trigger := TriggerSmartContract{Owner: p.Owner, Contract: contract, Data: data}
	refBytes, refHash := p.RefBlock.RefBlockBytes(), p.RefBlock.RefBlockHash()
	raw := EncodeRaw(RawData{
		RefBlockBytes: refBytes[:],
		RefBlockHash:  refHash[:],
		Expiration:    exp,
		Data:          p.Memo,
		Contracts: []Contract{{
			Type:    TriggerSmartContractType,
			TypeURL: TriggerSmartContractURL,
			Value:   trigger.Marshal(),
		}},
		Timestamp: p.Timestamp,
		FeeLimit:  fee,
	})
	return Envelope{
		TxID:           TxID(raw),
		Raw:            raw,
		Owner:          p.Owner,
		Contract:       contract,
		To:             p.To,
		Amount:         new(big.Int).Set(p.Amount),
		Expiration:     exp,
		Timestamp:      p.Timestamp,
		FeeLimit:       fee,
		RefBlockBytes:  refBytes,
		RefBlockHash:   refHash,
		RefBlockNumber: p.RefBlock.Number,
	}, nil
}

// EnvelopeFromRaw rebuilds an Envelope from stored raw_data bytes (which
// must be a single TRC-20 transfer). Raw keeps the given bytes as they are.
func EnvelopeFromRaw(raw []byte) (Envelope, error) {
	r, err := DecodeRaw(raw)
	if err != nil {
		return Envelope{}, err
	}
	t, err := r.TokenTransfer()
	if err != nil {
		return Envelope{}, err
	}
	e := Envelope{
		TxID:       TxID(raw),
		Raw:        bytes.Clone(raw),
		Owner:      t.Owner,
		Contract:   t.Contract,
		To:         t.To,
		Amount:     t.Amount,
		Expiration: r.Expiration,
		Timestamp:  r.Timestamp,
		FeeLimit:   r.FeeLimit,
	}
	copy(e.RefBlockBytes[:], r.RefBlockBytes)
	copy(e.RefBlockHash[:], r.RefBlockHash)
	return e, nil
}

// SignedTx is a transaction ready to send: the raw_data bytes exactly as
// hashed and one signature over their txid.
type SignedTx struct {
	Raw       []byte
	Signature []byte
}

// TxID returns sha256(Raw).
func (s SignedTx) TxID() [32]byte { return TxID(s.Raw) }

// Marshal serialises the full protocol.Transaction (raw_data = field 1, the
// raw bytes embedded verbatim; signature = field 2) — what
// /wallet/broadcasthex takes as hex.
func (s SignedTx) Marshal() []byte {
	b := make([]byte, 0, len(s.Raw)+len(s.Signature)+16)
	b = appendTag(b, 1, wireBytes)
	b = appendVarint(b, uint64(len(s.Raw)))
	b = append(b, s.Raw...)
	if len(s.Signature) > 0 {
		b = appendTag(b, 2, wireBytes)
		b = appendVarint(b, uint64(len(s.Signature)))
		b = append(b, s.Signature...)
	}
	return b
}

// Transaction is a decoded protocol.Transaction, raw bytes kept verbatim.
type Transaction struct {
	Raw        []byte   // field 1, exactly as embedded
	Signatures [][]byte // field 2 (repeated; multi-signature has several)
	Unknown    []UnknownField
}

// DecodeTransaction decodes a serialised protocol.Transaction.
func DecodeTransaction(b []byte) (Transaction, error) {
	var t Transaction
	pr := protoReader{msg: "Transaction", buf: b}
	seenRaw := false
	for !pr.done() {
		f, err := pr.next()
		if err != nil {
			return Transaction{}, err
		}
		switch f.num {
		case 1:
			if err := pr.expect(f, wireBytes); err != nil {
				return Transaction{}, err
			}
			if seenRaw {
				// protobuf would merge two raw_data fields into one message,
				// whose bytes are then no longer the bytes that were hashed.
				return Transaction{}, pr.fail(f.off, "raw_data appears twice")
			}
			seenRaw = true
			t.Raw = f.data
		case 2:
			if err := pr.expect(f, wireBytes); err != nil {
				return Transaction{}, err
			}
			t.Signatures = append(t.Signatures, f.data)
		default:
			t.Unknown = append(t.Unknown, UnknownField{Num: f.num, Raw: f.raw})
		}
	}
	if !seenRaw {
		return Transaction{}, &DecodeError{Message: "Transaction", Offset: 0, Reason: "no raw_data"}
	}
	return t, nil
}

// Signed returns the transaction as a SignedTx with its first signature
// (nil when unsigned).
func (t Transaction) Signed() SignedTx {
	s := SignedTx{Raw: t.Raw}
	if len(t.Signatures) > 0 {
		s.Signature = t.Signatures[0]
	}
	return s
}
