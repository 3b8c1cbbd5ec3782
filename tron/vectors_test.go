package tron

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"os"
	"testing"
)

// vector is one real transaction from testdata/tron/transactions.json.
type vector struct {
	Name          string `json:"name"`
	Source        string `json:"source"`
	TxID          string `json:"txid"`
	RawDataHex    string `json:"raw_data_hex"`
	Signature     string `json:"signature"`
	ContractType  string `json:"contract_type"`
	Owner         string `json:"owner"`
	Contract      string `json:"contract"`
	To            string `json:"to"`
	AmountUnits   string `json:"amount_units"`
	RefBlockBytes string `json:"ref_block_bytes"`
	RefBlockHash  string `json:"ref_block_hash"`
	Expiration    int64  `json:"expiration"`
	Timestamp     int64  `json:"timestamp"`
	FeeLimit      int64  `json:"fee_limit"`
}

func loadVectors(t *testing.T) []vector {
	t.Helper()
	b, err := os.ReadFile("../testdata/tron/transactions.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Transactions []vector `json:"transactions"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Transactions) < 2 {
		t.Fatalf("want at least two real transactions, have %d", len(f.Transactions))
	}
	return f.Transactions
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRealTransactionsDecodeReencodeToSameBytesAndTxID(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			raw := mustHex(t, v.RawDataHex)
			if got := HexID(TxID(raw)); got != v.TxID {
				t.Fatalf("sha256(raw) = %s, published txID %s", got, v.TxID)
			}
			r, err := DecodeRaw(raw)
			if err != nil {
				t.Fatal(err)
			}
			again := EncodeRaw(r)
			if !bytes.Equal(again, raw) {
				t.Fatalf("re-encoded bytes differ:\n got %x\nwant %x", again, raw)
			}
			if got := HexID(TxID(again)); got != v.TxID {
				t.Fatalf("re-encoded txid %s, want %s", got, v.TxID)
			}
			if hex.EncodeToString(r.RefBlockBytes) != v.RefBlockBytes || hex.EncodeToString(r.RefBlockHash) != v.RefBlockHash {
				t.Errorf("ref block %x/%x, want %s/%s", r.RefBlockBytes, r.RefBlockHash, v.RefBlockBytes, v.RefBlockHash)
			}
			if r.Expiration != v.Expiration || r.Timestamp != v.Timestamp || r.FeeLimit != v.FeeLimit {
				t.Errorf("times/fee = %d/%d/%d, want %d/%d/%d", r.Expiration, r.Timestamp, r.FeeLimit, v.Expiration, v.Timestamp, v.FeeLimit)
			}
			if len(r.Contracts) != 1 || r.Contracts[0].Type.String() != v.ContractType {
				t.Fatalf("contracts = %+v, want one %s", r.Contracts, v.ContractType)
			}
			owner, err := r.Owner()
			if err != nil || owner.Hex() != v.Owner {
				t.Errorf("owner = %s (%v), want %s", owner.Hex(), err, v.Owner)
			}
			switch r.Contracts[0].Type {
			case TriggerSmartContractType:
				tr, err := r.TokenTransfer()
				if err != nil {
					t.Fatal(err)
				}
				if tr.Contract.Hex() != v.Contract || tr.To.Hex() != v.To || tr.Amount.String() != v.AmountUnits {
					t.Errorf("transfer = %s %s %s, want %s %s %s", tr.Contract.Hex(), tr.To.Hex(), tr.Amount, v.Contract, v.To, v.AmountUnits)
				}
				trig, err := DecodeTriggerSmartContract(r.Contracts[0].Value)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(trig.Marshal(), r.Contracts[0].Value) {
					t.Errorf("TriggerSmartContract re-marshal differs")
				}
			case TransferContractType:
				tc, err := DecodeTransferContract(r.Contracts[0].Value)
				if err != nil {
					t.Fatal(err)
				}
				if tc.To.Hex() != v.To || big.NewInt(tc.Amount).String() != v.AmountUnits {
					t.Errorf("TRX transfer to %s amount %d, want %s %s", tc.To.Hex(), tc.Amount, v.To, v.AmountUnits)
				}
				if _, err := r.TokenTransfer(); err == nil {
					t.Errorf("a TRX transfer must not read as a TRC-20 transfer")
				}
			}
			if v.Signature != "" {
				signer, err := RecoverSigner(TxID(raw), mustHex(t, v.Signature))
				if err != nil {
					t.Fatal(err)
				}
				if signer.Hex() != v.Owner {
					t.Errorf("recovered signer %s, want owner %s", signer.Hex(), v.Owner)
				}
			}
		})
	}
}

// The docs vector is a TRC-20 transfer with a zero-padded recipient word, the
// form BuildTransfer writes: building it from its decoded inputs must give
// the published bytes exactly.
func TestBuildTransferReproducesPublishedTransaction(t *testing.T) {
	var v vector
	for _, c := range loadVectors(t) {
		if c.Name == "tron-docs-triggersmartcontract-nile" {
			v = c
		}
	}
	if v.Name == "" {
		t.Fatal("docs vector missing")
	}
	ref := BlockHeader{Number: 0x28c3, Timestamp: v.Timestamp - 3000}
	copy(ref.ID[8:16], mustHex(t, v.RefBlockHash))
	amount, _ := new(big.Int).SetString(v.AmountUnits, 10)
	env, err := BuildTransfer(TransferParams{
		Owner:      mustParseHex(t, v.Owner),
		Contract:   mustParseHex(t, v.Contract),
		To:         mustParseHex(t, v.To),
		Amount:     amount,
		RefBlock:   ref,
		Timestamp:  v.Timestamp,
		Expiration: v.Expiration,
		FeeLimit:   v.FeeLimit,
	})
	if err != nil {
		t.Fatal(err)
	}
	if env.RawHex() != v.RawDataHex {
		t.Fatalf("built\n %s\nwant\n %s", env.RawHex(), v.RawDataHex)
	}
	if env.TxIDHex() != v.TxID {
		t.Fatalf("txid %s, want %s", env.TxIDHex(), v.TxID)
	}
	back, err := EnvelopeFromRaw(env.Raw)
	if err != nil {
		t.Fatal(err)
	}
	if back.TxID != env.TxID || back.To != env.To || back.Amount.Cmp(env.Amount) != 0 || back.RefBlockHash != env.RefBlockHash {
		t.Fatalf("EnvelopeFromRaw = %+v, want %+v", back, env)
	}
}

func mustParseHex(t *testing.T, s string) Address {
	t.Helper()
	a, err := ParseHexAddress(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
