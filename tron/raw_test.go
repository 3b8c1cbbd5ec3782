package tron

import (
	"bytes"
	"errors"
	"math/big"
	"testing"
)

func testRefBlock() BlockHeader {
	b := BlockHeader{Number: 0x0102030405, Timestamp: 1_700_000_000_000}
	for i := range b.ID {
		b.ID[i] = byte(i)
	}
	return b
}

func testParams() TransferParams {
	return TransferParams{
		Owner:     MustParseAddress("TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC"),
		To:        MustParseAddress("41088a2bfcb1c7271029fd69a66859d55560895884"),
		Amount:    big.NewInt(12_500_000),
		RefBlock:  testRefBlock(),
		Timestamp: 1_700_000_030_000,
	}
}

func TestTAPoSFieldsComeFromBlockNumberAndID(t *testing.T) {
	b := testRefBlock()
	if got := b.RefBlockBytes(); got != [2]byte{0x04, 0x05} {
		t.Errorf("ref_block_bytes = %x, want 0405 (bytes 6..8 of the number)", got)
	}
	if got := b.RefBlockHash(); got != [8]byte{8, 9, 10, 11, 12, 13, 14, 15} {
		t.Errorf("ref_block_hash = %x, want bytes 8..16 of the id", got)
	}
}

func TestBuildTransferDefaultsAndDecodesBack(t *testing.T) {
	env, err := BuildTransfer(testParams())
	if err != nil {
		t.Fatal(err)
	}
	if env.Contract != USDTContract || env.FeeLimit != DefaultFeeLimit ||
		env.Expiration != env.Timestamp+DefaultExpiration.Milliseconds() || env.RefBlockNumber != testRefBlock().Number {
		t.Fatalf("defaults not applied: %+v", env)
	}
	if err := env.Verify(); err != nil {
		t.Fatal(err)
	}
	r, err := DecodeRaw(env.Raw)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := r.TokenTransfer()
	if err != nil {
		t.Fatal(err)
	}
	if tr.Owner != env.Owner || tr.To != env.To || tr.Contract != USDTContract || tr.Amount.Cmp(env.Amount) != 0 {
		t.Fatalf("decoded %+v from %+v", tr, env)
	}
	if !bytes.Equal(EncodeRaw(r), env.Raw) {
		t.Fatal("re-encoding a built transaction changed its bytes")
	}
	env.Raw[len(env.Raw)-1] ^= 1
	if err := env.Verify(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Verify after tampering: %v", err)
	}
}

func TestBuildTransferCarries256BitAmounts(t *testing.T) {
	p := testParams()
	p.Amount = new(big.Int).Set(maxUint256)
	env, err := BuildTransfer(p)
	if err != nil {
		t.Fatal(err)
	}
	back, err := EnvelopeFromRaw(env.Raw)
	if err != nil || back.Amount.Cmp(maxUint256) != 0 {
		t.Fatalf("amount %v, %v", back.Amount, err)
	}
	p.Amount = new(big.Int).Add(maxUint256, big.NewInt(1))
	if _, err := BuildTransfer(p); !errors.Is(err, ErrInvalidTransfer) {
		t.Fatalf("2^256 accepted: %v", err)
	}
}

func TestBuildTransferRefusesUnusableParameters(t *testing.T) {
	tests := map[string]func(*TransferParams){
		"no owner":             func(p *TransferParams) { p.Owner = Address{} },
		"no recipient":         func(p *TransferParams) { p.To = Address{} },
		"nil amount":           func(p *TransferParams) { p.Amount = nil },
		"zero amount":          func(p *TransferParams) { p.Amount = new(big.Int) },
		"negative amount":      func(p *TransferParams) { p.Amount = big.NewInt(-1) },
		"no ref block":         func(p *TransferParams) { p.RefBlock = BlockHeader{} },
		"no timestamp":         func(p *TransferParams) { p.Timestamp = 0 },
		"expiration before ts": func(p *TransferParams) { p.Expiration = p.Timestamp - 1 },
		"expiration beyond 24h": func(p *TransferParams) {
			p.Expiration = p.Timestamp + MaxExpiration.Milliseconds() + UniqueTimestampSpan + 1
		},
		"expiration before ref": func(p *TransferParams) {
			p.Timestamp = p.RefBlock.Timestamp - 10_000
			p.Expiration = p.RefBlock.Timestamp
		},
		"negative fee limit": func(p *TransferParams) { p.FeeLimit = -1 },
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			p := testParams()
			mutate(&p)
			if _, err := BuildTransfer(p); !errors.Is(err, ErrInvalidTransfer) {
				t.Fatalf("err = %v, want ErrInvalidTransfer", err)
			}
		})
	}
}

func TestDecodeRawPreservesUnknownFieldsInFieldOrder(t *testing.T) {
	env, err := BuildTransfer(testParams())
	if err != nil {
		t.Fatal(err)
	}
	// Splice in fields this package does not model: raw.auths (9, bytes)
	// between expiration (8) and contract (11), raw.scripts (12) after the
	// contract, and an unknown varint field 99 at the end — as a newer
	// java-tron could write them.
	r, _ := DecodeRaw(env.Raw)
	var withUnknown []byte
	for _, p := range []part{
		bytesPart(rawRefBlockBytes, r.RefBlockBytes),
		bytesPart(rawRefBlockHash, r.RefBlockHash),
		varintPart(rawExpiration, r.Expiration),
		bytesPart(9, []byte("auth")),
		{rawContract, appendBytesField(nil, rawContract, encodeContract(r.Contracts[0]))},
		bytesPart(12, []byte("script")),
		varintPart(rawTimestamp, r.Timestamp),
		varintPart(rawFeeLimit, r.FeeLimit),
		{99, appendTag(nil, 99, wireFixed32)},
	} {
		withUnknown = append(withUnknown, p.b...)
	}
	withUnknown = append(withUnknown, 1, 2, 3, 4) // the fixed32 payload
	d, err := DecodeRaw(withUnknown)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Unknown) != 3 {
		t.Fatalf("unknown fields = %+v", d.Unknown)
	}
	if got := EncodeRaw(d); !bytes.Equal(got, withUnknown) {
		t.Fatalf("unknown fields lost or moved:\n got %x\nwant %x", got, withUnknown)
	}
	if _, err := d.TokenTransfer(); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeRawRefusesMalformedBytesWithoutPanicking(t *testing.T) {
	env, _ := BuildTransfer(testParams())
	tests := map[string][]byte{
		"truncated":              env.Raw[:len(env.Raw)-1],
		"length past the end":    {0x0a, 0x05, 0x01},
		"field number zero":      {0x00, 0x01},
		"group wire type":        {0x0b},
		"overlong varint":        {0x40, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"varint overflow":        {0x40, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
		"expiration as bytes":    {0x42, 0x01, 0x00},
		"contract as varint":     {0x58, 0x01},
		"bad contract inside":    {0x5a, 0x02, 0x08, 0x80},
		"truncated fixed64":      {0x09, 1, 2, 3},
		"unterminated tag":       {0x80},
		"owner not an address":   append([]byte{0x5a, 0x0b, 0x08, 0x1f, 0x12, 0x07, 0x12, 0x05}, []byte{0x0a, 0x03, 0x41, 1, 2}...),
		"any with wire mismatch": {0x5a, 0x04, 0x12, 0x02, 0x08, 0x01},
	}
	for name, b := range tests {
		t.Run(name, func(t *testing.T) {
			r, err := DecodeRaw(b)
			if err == nil {
				// Some inputs are well-formed raw_data but not transfers.
				_, err = r.TokenTransfer()
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrNotTransfer) {
				t.Fatalf("err = %v", err)
			}
			var de *DecodeError
			if errors.Is(err, ErrMalformed) && !errors.As(err, &de) {
				t.Fatalf("want a *DecodeError locating the fault, got %T", err)
			}
		})
	}
}

func TestTokenTransferRefusesCallsThatAreNotPlainTransfers(t *testing.T) {
	p := testParams()
	env, _ := BuildTransfer(p)
	r, _ := DecodeRaw(env.Raw)
	trig, _ := DecodeTriggerSmartContract(r.Contracts[0].Value)

	withValue := trig
	withValue.CallValue = 1
	approve := trig
	approve.Data = append([]byte{0x09, 0x5e, 0xa7, 0xb3}, trig.Data[4:]...)
	for name, tc := range map[string]TriggerSmartContract{"call value": withValue, "approve": approve} {
		rr := r
		rr.Contracts = []Contract{{Type: TriggerSmartContractType, TypeURL: TriggerSmartContractURL, Value: tc.Marshal()}}
		if _, err := rr.TokenTransfer(); !errors.Is(err, ErrNotTransfer) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	two := r
	two.Contracts = append(two.Contracts, r.Contracts[0])
	if _, err := two.TokenTransfer(); !errors.Is(err, ErrNotTransfer) {
		t.Errorf("two contracts: %v", err)
	}
}

func TestSignedTxMarshalEmbedsRawBytesVerbatim(t *testing.T) {
	env, _ := BuildTransfer(testParams())
	sig := bytes.Repeat([]byte{7}, SignatureSize)
	wire := SignedTx{Raw: env.Raw, Signature: sig}.Marshal()
	tx, err := DecodeTransaction(wire)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tx.Raw, env.Raw) || len(tx.Signatures) != 1 || !bytes.Equal(tx.Signatures[0], sig) {
		t.Fatalf("decoded %+v", tx)
	}
	if tx.Signed().TxID() != env.TxID {
		t.Fatal("txid changed in transit")
	}
	dup := append(append([]byte(nil), wire...), appendBytesField(nil, 1, env.Raw)...)
	if _, err := DecodeTransaction(dup); !errors.Is(err, ErrMalformed) {
		t.Fatalf("two raw_data fields accepted: %v", err)
	}
	if _, err := DecodeTransaction(appendBytesField(nil, 2, sig)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("missing raw_data accepted: %v", err)
	}
}

func TestBuildTransferMemoMakesDistinctTransactions(t *testing.T) {
	to := MustParseAddress("TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZY")
	p := TransferParams{Owner: USDTContract, To: to, Amount: big.NewInt(1_000_000),
		RefBlock: BlockHeader{Number: 1000, Timestamp: 1_700_000_000_000, ID: [32]byte{0, 0, 0, 0, 0, 0, 3, 0xe8, 9}}, Timestamp: 1_700_000_000_000}
	plain, err := BuildTransfer(p)
	if err != nil {
		t.Fatal(err)
	}
	p.Memo = []byte("weir:a:1")
	a, err := BuildTransfer(p)
	if err != nil {
		t.Fatal(err)
	}
	p.Memo = []byte("weir:b:1")
	b, err := BuildTransfer(p)
	if err != nil {
		t.Fatal(err)
	}
	if a.TxID == b.TxID || a.TxID == plain.TxID {
		t.Fatal("memo did not change the txid")
	}
	r, err := DecodeRaw(a.Raw)
	if err != nil || string(r.Data) != "weir:a:1" {
		t.Fatalf("decoded memo %q, %v", r.Data, err)
	}
	if TxID(a.Raw) != a.TxID {
		t.Fatal("txid is not sha256 of the stored bytes")
	}
}

// Two equal transfers (payer, payee, amount, reference block, head) built
// with different numbers get distinct txids with no memo, decode back to
// the same bytes, and the same number rebuilds the same bytes.
func TestUniqueTimestampKeepsEqualTransfersApartWithoutAMemo(t *testing.T) {
	head := int64(1_700_000_030_000)
	build := func(n uint64) Envelope {
		t.Helper()
		p := testParams()
		p.Timestamp = UniqueTimestamp(head, n)
		p.Expiration = head + DefaultExpiration.Milliseconds()
		env, err := BuildTransfer(p)
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	seen := map[[32]byte]uint64{}
	for n := uint64(1_000); n < 1_000+2_000; n++ {
		env := build(n)
		if prev, dup := seen[env.TxID]; dup {
			t.Fatalf("n=%d and n=%d share txid %s", prev, n, env.TxIDHex())
		}
		seen[env.TxID] = n
		if env.Timestamp > head || head-env.Timestamp >= UniqueTimestampSpan || env.Expiration != head+DefaultExpiration.Milliseconds() {
			t.Fatalf("n=%d: timestamp %d expiration %d for head %d", n, env.Timestamp, env.Expiration, head)
		}
		r, err := DecodeRaw(env.Raw)
		if err != nil || len(r.Data) != 0 || r.Timestamp != env.Timestamp || !bytes.Equal(EncodeRaw(r), env.Raw) {
			t.Fatalf("n=%d: decoded %+v, %v: want no memo and the same bytes back", n, r, err)
		}
		back, err := EnvelopeFromRaw(env.Raw)
		if err != nil || back.TxID != env.TxID || back.Timestamp != env.Timestamp || back.Amount.Cmp(env.Amount) != 0 {
			t.Fatalf("n=%d: envelope from raw %+v, %v", n, back, err)
		}
	}
	if a, b := build(42), build(42); !bytes.Equal(a.Raw, b.Raw) {
		t.Fatal("the same number built different bytes")
	}
	// The longest window java-tron allows (24 h from the head) still builds
	// with the largest offset.
	p := testParams()
	p.Timestamp, p.Expiration = UniqueTimestamp(head, UniqueTimestampSpan-1), head+MaxExpiration.Milliseconds()
	if _, err := BuildTransfer(p); err != nil {
		t.Fatalf("24 h window with the largest offset: %v", err)
	}
	// The guarantee's bound: numbers a whole span apart coincide.
	if build(42).TxID != build(42+UniqueTimestampSpan).TxID {
		t.Fatal("the span is not what UniqueTimestamp documents")
	}
}
