package tron

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
)

// ContractType is protocol.Transaction.Contract.ContractType.
type ContractType int32

// The contract types this package names. Others decode fine; they are just
// reported by number.
const (
	TransferContractType     ContractType = 1
	TriggerSmartContractType ContractType = 31
)

func (t ContractType) String() string {
	switch t {
	case TransferContractType:
		return "TransferContract"
	case TriggerSmartContractType:
		return "TriggerSmartContract"
	}
	return fmt.Sprintf("ContractType(%d)", int32(t))
}

// Any type URLs of the contracts this package builds or reads.
const (
	TriggerSmartContractURL = "type.googleapis.com/protocol.TriggerSmartContract"
	TransferContractURL     = "type.googleapis.com/protocol.TransferContract"
)

// Field numbers of protocol.Transaction.raw (java-tron's Tron.proto).
const (
	rawRefBlockBytes = 1
	rawRefBlockNum   = 3
	rawRefBlockHash  = 4
	rawExpiration    = 8
	rawData          = 10
	rawContract      = 11
	rawTimestamp     = 14
	rawFeeLimit      = 18
)

// UnknownField is a field this package does not model, kept verbatim (tag
// included) so that decoding never loses information.
type UnknownField struct {
	Num int
	Raw []byte
}

// RawData is a decoded protocol.Transaction.raw. Bytes is the exact input
// that was decoded: it, not a re-encoding of the fields, is what the txid
// covers and what must be signed and sent.
type RawData struct {
	RefBlockBytes []byte // field 1: bytes 6..8 of the reference block number
	RefBlockNum   int64  // field 3: unused by current clients
	RefBlockHash  []byte // field 4: bytes 8..16 of the reference block id
	Expiration    int64  // field 8: ms since epoch
	Data          []byte // field 10: memo
	Contracts     []Contract
	Timestamp     int64 // field 14: ms since epoch
	FeeLimit      int64 // field 18: sun
	Unknown       []UnknownField

	Bytes []byte
}

// TxID returns sha256 of the decoded bytes.
func (r RawData) TxID() [32]byte { return TxID(r.Bytes) }

// Contract is one protocol.Transaction.Contract with its Any parameter
// unpacked into TypeURL and Value (the contract message bytes).
type Contract struct {
	Type         ContractType // field 1
	TypeURL      string       // parameter (field 2) . type_url
	Value        []byte       // parameter . value
	Provider     []byte       // field 3
	ContractName []byte       // field 4
	PermissionID int32        // field 5
	Unknown      []UnknownField
	ParamUnknown []UnknownField // unknown fields inside the Any
}

// TxID is the transaction id: sha256 of the raw_data bytes. It is fixed
// before signing and does not cover the signature.
func TxID(raw []byte) [32]byte { return sha256.Sum256(raw) }

// HexID formats a txid as java-tron does: 64 lowercase hex digits.
func HexID(id [32]byte) string { return hex.EncodeToString(id[:]) }

// ParseTxID parses 64 hex digits (an optional "0x" is tolerated).
func ParseTxID(s string) ([32]byte, error) {
	var id [32]byte
	b, err := decodeHex(s)
	if err != nil {
		return id, fmt.Errorf("%w: txid: %w", ErrMalformed, err)
	}
	if len(b) != len(id) {
		return id, fmt.Errorf("%w: txid has %d bytes, want 32", ErrMalformed, len(b))
	}
	copy(id[:], b)
	return id, nil
}

// decodeHex accepts hex with an optional 0x prefix and surrounding space.
func decodeHex(s string) ([]byte, error) {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\n' || s[0] == '\t' || s[0] == '\r') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\n' || s[len(s)-1] == '\t' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	if len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		s = s[2:]
	}
	return hex.DecodeString(s)
}

// DecodeRaw decodes raw_data bytes. Unknown fields are kept; malformed input
// is a *DecodeError (wrapping ErrMalformed), never a panic.
func DecodeRaw(raw []byte) (RawData, error) {
	r := RawData{Bytes: raw}
	pr := protoReader{msg: "Transaction.raw", buf: raw}
	for !pr.done() {
		f, err := pr.next()
		if err != nil {
			return RawData{}, err
		}
		switch f.num {
		case rawRefBlockBytes, rawRefBlockHash, rawData:
			if err := pr.expect(f, wireBytes); err != nil {
				return RawData{}, err
			}
			switch f.num {
			case rawRefBlockBytes:
				r.RefBlockBytes = f.data
			case rawRefBlockHash:
				r.RefBlockHash = f.data
			default:
				r.Data = f.data
			}
		case rawRefBlockNum, rawExpiration, rawTimestamp, rawFeeLimit:
			if err := pr.expect(f, wireVarint); err != nil {
				return RawData{}, err
			}
			switch f.num {
			case rawRefBlockNum:
				r.RefBlockNum = int64Val(f)
			case rawExpiration:
				r.Expiration = int64Val(f)
			case rawTimestamp:
				r.Timestamp = int64Val(f)
			default:
				r.FeeLimit = int64Val(f)
			}
		case rawContract:
			if err := pr.expect(f, wireBytes); err != nil {
				return RawData{}, err
			}
			c, err := decodeContract(f.data)
			if err != nil {
				return RawData{}, err
			}
			r.Contracts = append(r.Contracts, c)
		default:
			r.Unknown = append(r.Unknown, UnknownField{Num: f.num, Raw: f.raw})
		}
	}
	return r, nil
}

func decodeContract(b []byte) (Contract, error) {
	var c Contract
	pr := protoReader{msg: "Transaction.Contract", buf: b}
	for !pr.done() {
		f, err := pr.next()
		if err != nil {
			return Contract{}, err
		}
		switch f.num {
		case 1, 5:
			if err := pr.expect(f, wireVarint); err != nil {
				return Contract{}, err
			}
			if f.num == 1 {
				c.Type = ContractType(int32Val(f))
			} else {
				c.PermissionID = int32Val(f)
			}
		case 2:
			if err := pr.expect(f, wireBytes); err != nil {
				return Contract{}, err
			}
			if err := decodeAny(f.data, &c); err != nil {
				return Contract{}, err
			}
		case 3, 4:
			if err := pr.expect(f, wireBytes); err != nil {
				return Contract{}, err
			}
			if f.num == 3 {
				c.Provider = f.data
			} else {
				c.ContractName = f.data
			}
		default:
			c.Unknown = append(c.Unknown, UnknownField{Num: f.num, Raw: f.raw})
		}
	}
	return c, nil
}

func decodeAny(b []byte, c *Contract) error {
	pr := protoReader{msg: "google.protobuf.Any", buf: b}
	for !pr.done() {
		f, err := pr.next()
		if err != nil {
			return err
		}
		switch f.num {
		case 1, 2:
			if err := pr.expect(f, wireBytes); err != nil {
				return err
			}
			if f.num == 1 {
				c.TypeURL = string(f.data)
			} else {
				c.Value = f.data
			}
		default:
			c.ParamUnknown = append(c.ParamUnknown, UnknownField{Num: f.num, Raw: f.raw})
		}
	}
	return nil
}

// part is one serialised field, tagged with its number so that known and
// unknown fields can be merged back into field-number order, which is the
// order java-tron (protobuf-java) writes them in.
type part struct {
	num int
	b   []byte
}

func assemble(parts []part, unknown []UnknownField) []byte {
	for _, u := range unknown {
		parts = append(parts, part{u.Num, u.Raw})
	}
	slices.SortStableFunc(parts, func(a, b part) int { return a.num - b.num })
	n := 0
	for _, p := range parts {
		n += len(p.b)
	}
	out := make([]byte, 0, n)
	for _, p := range parts {
		out = append(out, p.b...)
	}
	return out
}

func bytesPart(num int, data []byte) part { return part{num, appendBytesField(nil, num, data)} }
func varintPart(num int, v int64) part    { return part{num, appendVarintField(nil, num, v)} }

// EncodeRaw serialises r's fields in field-number order, proto3 style (zero
// values omitted). It exists to prove that this package's encoding matches
// java-tron byte for byte (decode → encode → same bytes → same txid); code
// that sends or signs must use the original bytes (RawData.Bytes,
// Envelope.Raw), never a re-encoding.
func EncodeRaw(r RawData) []byte {
	parts := []part{
		bytesPart(rawRefBlockBytes, r.RefBlockBytes),
		varintPart(rawRefBlockNum, r.RefBlockNum),
		bytesPart(rawRefBlockHash, r.RefBlockHash),
		varintPart(rawExpiration, r.Expiration),
		bytesPart(rawData, r.Data),
	}
	for _, c := range r.Contracts {
		// A repeated message field is written even when empty.
		b := appendTag(nil, rawContract, wireBytes)
		enc := encodeContract(c)
		b = appendVarint(b, uint64(len(enc)))
		parts = append(parts, part{rawContract, append(b, enc...)})
	}
	parts = append(parts,
		varintPart(rawTimestamp, r.Timestamp),
		varintPart(rawFeeLimit, r.FeeLimit),
	)
	return assemble(parts, r.Unknown)
}

func encodeContract(c Contract) []byte {
	anyParts := []part{
		bytesPart(1, []byte(c.TypeURL)),
		bytesPart(2, c.Value),
	}
	anyBytes := assemble(anyParts, c.ParamUnknown)
	parts := []part{
		varintPart(1, int64(c.Type)),
		bytesPart(2, anyBytes),
		bytesPart(3, c.Provider),
		bytesPart(4, c.ContractName),
		varintPart(5, int64(c.PermissionID)),
	}
	return assemble(parts, c.Unknown)
}
