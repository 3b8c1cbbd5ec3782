package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/weir-payouts/weir/tron"
)

// `weir tx` answers an operator's "what is this transaction, and who signed
// it?" offline, from bytes alone: no node, no store.

func init() {
	register(command{
		name:    "tx",
		summary: "offline TRON transaction tools: decode raw_data, recover a signer",
		run:     runTx,
	})
}

func txUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage: weir tx <subcommand> [flags]")
	fmt.Fprintln(w, "\nSubcommands:")
	fmt.Fprintln(w, "  decode RAW_DATA_HEX             print the transaction's fields as JSON")
	fmt.Fprintln(w, "  recover --txid HEX --sig HEX    print the base58 address that made the signature")
}

func runTx(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		txUsage(stderr)
		return errUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		txUsage(stdout)
		return nil
	case "decode":
		return runTxDecode(ctx, args[1:], stdout, stderr)
	case "recover":
		return runTxRecover(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "weir tx: unknown subcommand %q\n\n", args[0])
	txUsage(stderr)
	return errUsage
}

// txDecodeOutput is CONTRACT.md's `weir tx decode` JSON. Absent values are
// null (e.g. "contract" of a plain TRX transfer).
type txDecodeOutput struct {
	TxID          string  `json:"txid"`
	Owner         *string `json:"owner"`
	Contract      *string `json:"contract"`
	To            *string `json:"to"`
	AmountUnits   *string `json:"amount_units"`
	Expiration    int64   `json:"expiration"`
	Timestamp     int64   `json:"timestamp"`
	FeeLimit      int64   `json:"fee_limit"`
	RefBlockBytes string  `json:"ref_block_bytes"`
	RefBlockHash  string  `json:"ref_block_hash"`
	// Additions beyond the contract's minimum.
	ContractType string `json:"contract_type"`
	Transfer     string `json:"transfer"` // "trc20", "trx" or "none"
}

func strPtr(s string) *string { return &s }

func runTxDecode(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tx decode", "tx decode RAW_DATA_HEX", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: weir tx decode RAW_DATA_HEX")
		fmt.Fprintln(stderr, "\nDecodes a transaction's raw_data bytes (java-tron's raw_data_hex; an optional 0x is")
		fmt.Fprintln(stderr, "accepted) and prints its txid and fields as JSON: addresses in base58, times in ms")
		fmt.Fprintln(stderr, "since epoch, amount_units as a string. It takes no flags.")
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	raw, err := hex.DecodeString(strings.TrimPrefix(strings.TrimSpace(fs.Arg(0)), "0x"))
	if err != nil {
		return fmt.Errorf("RAW_DATA_HEX is not hex: %w", err)
	}
	out, err := decodeTx(raw)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func decodeTx(raw []byte) (txDecodeOutput, error) {
	r, err := tron.DecodeRaw(raw)
	if err != nil {
		return txDecodeOutput{}, err
	}
	out := txDecodeOutput{
		TxID:          tron.HexID(r.TxID()),
		Expiration:    r.Expiration,
		Timestamp:     r.Timestamp,
		FeeLimit:      r.FeeLimit,
		RefBlockBytes: hex.EncodeToString(r.RefBlockBytes),
		RefBlockHash:  hex.EncodeToString(r.RefBlockHash),
		ContractType:  "none",
		Transfer:      "none",
	}
	if len(r.Contracts) == 0 {
		return out, nil
	}
	c := r.Contracts[0]
	out.ContractType = c.Type.String()
	if owner, err := r.Owner(); err == nil {
		out.Owner = strPtr(owner.String())
	}
	switch c.Type {
	case tron.TriggerSmartContractType:
		trig, err := tron.DecodeTriggerSmartContract(c.Value)
		if err != nil {
			return txDecodeOutput{}, err
		}
		out.Contract = strPtr(trig.Contract.String())
		if t, err := r.TokenTransfer(); err == nil {
			out.To, out.AmountUnits, out.Transfer = strPtr(t.To.String()), strPtr(t.Amount.String()), "trc20"
		}
	case tron.TransferContractType:
		t, err := tron.DecodeTransferContract(c.Value)
		if err != nil {
			return txDecodeOutput{}, err
		}
		out.To, out.AmountUnits, out.Transfer = strPtr(t.To.String()), strPtr(fmt.Sprint(t.Amount)), "trx"
	}
	return out, nil
}

func runTxRecover(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tx recover", "tx recover --txid HEX --sig HEX", stderr)
	txidHex := fs.String("txid", "", "transaction id (64 hex digits)")
	sigHex := fs.String("sig", "", "signature r‖s‖v (130 hex digits; v may be 0, 1, 27 or 28)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *txidHex == "" || *sigHex == "" || fs.NArg() != 0 {
		fs.Usage()
		return errUsage
	}
	txid, err := tron.ParseTxID(*txidHex)
	if err != nil {
		return fmt.Errorf("--txid: %w", err)
	}
	sig, err := hex.DecodeString(strings.TrimPrefix(strings.TrimSpace(*sigHex), "0x"))
	if err != nil {
		return fmt.Errorf("--sig is not hex: %w", err)
	}
	addr, err := tron.RecoverSigner(txid, sig)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, addr.String())
	return err
}
