package tron_test

import (
	"bytes"
	"encoding/hex"
	"math/big"
	"testing"

	"github.com/weir-payouts/weir/tron"
	"github.com/weir-payouts/weir/tron/nodetest"
)

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRealTransactionsDecodeReencodeToSameBytesAndTxID(t *testing.T) {
	for _, v := range nodetest.LoadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			raw := mustHex(t, v.RawDataHex)
			if got := tron.HexID(tron.TxID(raw)); got != v.TxID {
				t.Fatalf("sha256(raw) = %s, published txID %s", got, v.TxID)
			}
			r, err := tron.DecodeRaw(raw)
			if err != nil {
				t.Fatal(err)
			}
			again := tron.EncodeRaw(r)
			if !bytes.Equal(again, raw) {
				t.Fatalf("re-encoded bytes differ:\n got %x\nwant %x", again, raw)
			}
			if got := tron.HexID(tron.TxID(again)); got != v.TxID {
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
			case tron.TriggerSmartContractType:
				tr, err := r.TokenTransfer()
				if err != nil {
					t.Fatal(err)
				}
				if tr.Contract.Hex() != v.Contract || tr.To.Hex() != v.To || tr.Amount.String() != v.AmountUnits {
					t.Errorf("transfer = %s %s %s, want %s %s %s", tr.Contract.Hex(), tr.To.Hex(), tr.Amount, v.Contract, v.To, v.AmountUnits)
				}
				trig, err := tron.DecodeTriggerSmartContract(r.Contracts[0].Value)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(trig.Marshal(), r.Contracts[0].Value) {
					t.Errorf("TriggerSmartContract re-marshal differs")
				}
			case tron.TransferContractType:
				tc, err := tron.DecodeTransferContract(r.Contracts[0].Value)
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
				signer, err := tron.RecoverSigner(tron.TxID(raw), mustHex(t, v.Signature))
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
	var v nodetest.Vector
	for _, c := range nodetest.LoadVectors(t) {
		if c.Name == "tron-docs-triggersmartcontract-nile" {
			v = c
		}
	}
	if v.Name == "" {
		t.Fatal("docs vector missing")
	}
	ref := tron.BlockHeader{Number: 0x28c3, Timestamp: v.Timestamp - 3000}
	copy(ref.ID[8:16], mustHex(t, v.RefBlockHash))
	amount, _ := new(big.Int).SetString(v.AmountUnits, 10)
	env, err := tron.BuildTransfer(tron.TransferParams{
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
	back, err := tron.EnvelopeFromRaw(env.Raw)
	if err != nil {
		t.Fatal(err)
	}
	if back.TxID != env.TxID || back.To != env.To || back.Amount.Cmp(env.Amount) != 0 || back.RefBlockHash != env.RefBlockHash {
		t.Fatalf("EnvelopeFromRaw = %+v, want %+v", back, env)
	}
}

func mustParseHex(t *testing.T, s string) tron.Address {
	t.Helper()
	a, err := tron.ParseHexAddress(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
