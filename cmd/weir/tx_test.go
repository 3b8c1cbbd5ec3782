package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/weir-payouts/weir/tron"
	"github.com/weir-payouts/weir/tron/nodetest"
)

func runWeir(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runMain(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func base58(t *testing.T, hexAddr string) any {
	t.Helper()
	if hexAddr == "" {
		return nil
	}
	a, err := tron.ParseHexAddress(hexAddr)
	if err != nil {
		t.Fatal(err)
	}
	return a.String()
}

func TestTxDecodePrintsTheContractFieldsOfRealTransactions(t *testing.T) {
	for _, v := range nodetest.LoadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			code, stdout, stderr := runWeir(t, "tx", "decode", v.RawDataHex)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(stdout), &got); err != nil {
				t.Fatalf("not JSON: %q", stdout)
			}
			want := map[string]any{
				"txid":            v.TxID,
				"owner":           base58(t, v.Owner),
				"contract":        base58(t, v.Contract),
				"to":              base58(t, v.To),
				"amount_units":    v.AmountUnits,
				"expiration":      float64(v.Expiration),
				"timestamp":       float64(v.Timestamp),
				"fee_limit":       float64(v.FeeLimit),
				"ref_block_bytes": v.RefBlockBytes,
				"ref_block_hash":  v.RefBlockHash,
			}
			for k, w := range want {
				if g, ok := got[k]; !ok || g != w {
					t.Errorf("%s = %#v (present %v), want %#v", k, g, ok, w)
				}
			}
		})
	}
}

func TestTxDecodeNamesTheUSDTContractInBase58(t *testing.T) {
	env, err := tron.BuildTransfer(tron.TransferParams{
		Owner:     tron.MustParseAddress("TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC"),
		To:        tron.MustParseAddress("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"),
		Amount:    mustBig(t, "12500000"),
		RefBlock:  tron.BlockHeader{Number: 77, Timestamp: 1_700_000_000_000, ID: [32]byte{7: 77, 8: 1, 9: 2}},
		Timestamp: 1_700_000_003_000,
	})
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runWeir(t, "tx", "decode", "0x"+env.RawHex())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{`"contract": "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"`, `"amount_units": "12500000"`, `"txid": "` + env.TxIDHex() + `"`, `"ref_block_bytes": "004d"`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %s:\n%s", want, stdout)
		}
	}
}

func mustBig(t *testing.T, s string) *big.Int {
	t.Helper()
	n, ok := new(big.Int).SetString(s, 10)
	if !ok {
		t.Fatalf("bad number %q", s)
	}
	return n
}

func TestTxRecoverPrintsTheSignerOfRealSignatures(t *testing.T) {
	n := 0
	for _, v := range nodetest.LoadVectors(t) {
		if v.Signature == "" {
			continue
		}
		n++
		owner := base58(t, v.Owner).(string)
		code, stdout, stderr := runWeir(t, "tx", "recover", "--txid", v.TxID, "--sig", v.Signature)
		if code != 0 || stdout != owner+"\n" {
			t.Fatalf("%s: exit %d, %q %s; want %s", v.Name, code, stdout, stderr, owner)
		}
		// v = 27/28 is accepted as well as 0/1.
		sig := []byte(v.Signature)
		last := v.Signature[128:]
		copy(sig[128:], map[string]string{"00": "1b", "01": "1c"}[last])
		if code, stdout, _ := runWeir(t, "tx", "recover", "--txid", v.TxID, "--sig", string(sig)); code != 0 || stdout != owner+"\n" {
			t.Fatalf("%s with v+27: exit %d %q", v.Name, code, stdout)
		}
	}
	if n == 0 {
		t.Fatal("no signed vectors")
	}
}

func TestTxRecoverReadsFlagsFromTheEnvironment(t *testing.T) {
	for _, v := range nodetest.LoadVectors(t) {
		if v.Signature == "" {
			continue
		}
		t.Setenv("WEIR_TXID", v.TxID)
		t.Setenv("WEIR_SIG", v.Signature)
		code, stdout, stderr := runWeir(t, "tx", "recover")
		if code != 0 || stdout != base58(t, v.Owner).(string)+"\n" {
			t.Fatalf("exit %d %q %s", code, stdout, stderr)
		}
		return
	}
}

func TestTxCommandsRefuseBadInput(t *testing.T) {
	v := nodetest.LoadVectors(t)[1]
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"tx without subcommand", []string{"tx"}, 2},
		{"unknown subcommand", []string{"tx", "explode"}, 2},
		{"decode without argument", []string{"tx", "decode"}, 2},
		{"decode two arguments", []string{"tx", "decode", "0a", "0b"}, 2},
		{"decode non-hex", []string{"tx", "decode", "xyz"}, 1},
		{"decode truncated bytes", []string{"tx", "decode", v.RawDataHex[:40]}, 1},
		{"recover without flags", []string{"tx", "recover"}, 2},
		{"recover short signature", []string{"tx", "recover", "--txid", v.TxID, "--sig", v.Signature[:128]}, 1},
		{"recover bad v", []string{"tx", "recover", "--txid", v.TxID, "--sig", v.Signature[:128] + "05"}, 1},
		{"recover short txid", []string{"tx", "recover", "--txid", "abcd", "--sig", v.Signature}, 1},
		{"help", []string{"tx", "--help"}, 0},
		{"decode help", []string{"tx", "decode", "--help"}, 0},
		{"recover help", []string{"tx", "recover", "--help"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("WEIR_TXID", "")
			t.Setenv("WEIR_SIG", "")
			code, stdout, stderr := runWeir(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", code, tc.code, stdout, stderr)
			}
			if tc.code == 1 && !strings.Contains(stderr, "weir tx:") {
				t.Fatalf("error not reported: %q", stderr)
			}
		})
	}
}
