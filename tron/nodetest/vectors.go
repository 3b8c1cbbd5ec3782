package nodetest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Vector is one real TRON transaction from testdata/tron/transactions.json
// (raw_data_hex and txID as published; addresses in hex).
type Vector struct {
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

// VectorsFile is the vectors' path from the repository root.
const VectorsFile = "testdata/tron/transactions.json"

// LoadVectors reads the real transactions from the repository's
// VectorsFile, found from the test's working directory upwards (the
// directory holding go.mod). It fails the test when there are fewer than two.
func LoadVectors(t testing.TB) []Vector {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("nodetest: no go.mod above the test's directory, cannot find %s", VectorsFile)
		}
		dir = parent
	}
	b, err := os.ReadFile(filepath.Join(dir, VectorsFile))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Transactions []Vector `json:"transactions"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", VectorsFile, err)
	}
	if len(f.Transactions) < 2 {
		t.Fatalf("%s: want at least two real transactions, have %d", VectorsFile, len(f.Transactions))
	}
	return f.Transactions
}
