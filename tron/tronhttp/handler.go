package tronhttp

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strconv"
	"strings"

	"github.com/weir-payouts/weir/tron"
)

// maxRequestBody bounds request bodies: a maximal transaction (500 KiB) as
// hex plus JSON framing.
const maxRequestBody = 2*tron.MaxTransactionSize + 4096

// simWitness is the block producer the simulated blocks name.
var simWitness = tron.MustParseAddress("TLyqzVGLV1srkB7dToTAEqgDSfPtXRJZYH")

// NewHandler serves sim with java-tron's HTTP paths and JSON shapes:
//
//	POST /wallet/broadcasthex                 {"transaction": hex} → {"result","code","message" (plain text),"txid"}
//	POST /wallet/gettransactioninfobyid       {"value": txid}     → {} or {"id","blockNumber","blockTimeStamp","receipt",...}
//	POST /walletsolidity/gettransactioninfobyid                  (same, solid blocks only)
//	POST /wallet/gettransactionbyid           {"value": txid}     → {} or the transaction (in a block)
//	POST /walletsolidity/gettransactionbyid                      (same, solid blocks only)
//	POST /wallet/gettransactionfrompending    {"value": txid}     → {} or the transaction (in the pool)
//	POST /wallet/getnowblock, /walletsolidity/getnowblock         → {"blockID","block_header":{"raw_data":{...}}}
//	POST /walletsolidity/getblockbynum        {"num": n}          → {} or the block with "transactions":[{"txID",...}]
//	POST /walletsolidity/gettransactioninfobyblocknum {"num": n}  → [] or [{"id","blockNumber","fee","receipt",...}]
//	     (/walletsolidity/getblockbynum {"num": 0} is the genesis block)
//	POST /wallet/gettransactioninfobyblocknum {"num": n}          → the same for any block up to the head, solid or not
//	POST /wallet/triggerconstantcontract      {"owner_address","contract_address","function_selector","parameter"}
//	     → {"result":{"result":true},"energy_used","constant_result":[hex]} for balanceOf(address) and
//	       transfer(address,uint256); a transfer the owner cannot cover says "REVERT opcode executed"
//	POST /wallet/getaccount                   {"address"}          → {} or {"address","balance","create_time"}
//	POST /wallet/getaccountresource           {"address"}          → {} or {"freeNetLimit","freeNetUsed","NetLimit","EnergyLimit",...}
//	POST /wallet/getchainparameters                                → {"chainParameter":[{"key":"getEnergyFee","value":210},...]}
//
// and one path no java-tron has, for tests and the demo to refill wallets:
//
//	POST /sim/fund {"address","usdt","trx"} → {"address","usdt","trx"} (the balances after the credit)
//
// GET with ?value= (or ?num=) works too. The fault-injected calls are exactly
// the ones a tron.Node makes once per method (broadcasthex,
// gettransactioninfobyid, getnowblock, getblockbynum,
// gettransactioninfobyblocknum); the secondary lookups the client uses to tell pending from
// unknown are served without consuming faults, so a script means the same
// thing in process and over HTTP. A simulated timeout is answered with 504
// Gateway Timeout, as a proxy in front of a stuck node would.
func NewHandler(sim *tron.SimNode) http.Handler {
	h := &handler{sim: sim}
	mux := http.NewServeMux()
	mux.HandleFunc("/wallet/broadcasthex", h.broadcastHex)
	mux.HandleFunc("/wallet/gettransactioninfobyid", h.txInfo(false))
	mux.HandleFunc("/walletsolidity/gettransactioninfobyid", h.txInfo(true))
	mux.HandleFunc("/wallet/gettransactionbyid", h.txByID(false))
	mux.HandleFunc("/walletsolidity/gettransactionbyid", h.txByID(true))
	mux.HandleFunc("/wallet/gettransactionfrompending", h.txFromPending)
	mux.HandleFunc("/wallet/getnowblock", h.nowBlock(false))
	mux.HandleFunc("/walletsolidity/getnowblock", h.nowBlock(true))
	mux.HandleFunc("/walletsolidity/getblockbynum", h.solidBlockByNum)
	mux.HandleFunc("/walletsolidity/gettransactioninfobyblocknum", h.solidTxInfosByBlockNum)
	mux.HandleFunc("/wallet/gettransactioninfobyblocknum", h.txInfosByBlockNum)
	mux.HandleFunc("/wallet/triggerconstantcontract", h.triggerConstant)
	mux.HandleFunc("/wallet/getaccount", h.getAccount)
	mux.HandleFunc("/wallet/getaccountresource", h.getAccountResource)
	mux.HandleFunc("/wallet/getchainparameters", h.chainParameters)
	mux.HandleFunc("/sim/fund", h.fund)
	return mux
}

type handler struct {
	sim *tron.SimNode
}

func workerContext(r *http.Request) context.Context {
	ctx := r.Context()
	if w := r.Header.Get(WorkerHeader); w != "" {
		ctx = tron.WithWorker(ctx, w)
	}
	return ctx
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeNodeError answers a failed simulated call: 504 for a timeout (the
// client maps it to tron.ErrTimeout), a gateway's HTTP 200 non-answer for
// FaultLookupNonAnswer, 500 otherwise.
func writeNodeError(w http.ResponseWriter, err error) {
	if errors.Is(err, tron.ErrBadResponse) { // FaultLookupNonAnswer: a gateway's 200 non-answer
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, tron.SimNonAnswer)
		return
	}
	status := http.StatusInternalServerError
	if errors.Is(err, tron.ErrTimeout) {
		status = http.StatusGatewayTimeout
	}
	writeJSON(w, status, errorResponse{Error: err.Error()})
}

// badRequest mirrors java-tron: HTTP 200 with {"Error": "..."}.
func badRequest(w http.ResponseWriter, format string, args ...any) {
	writeJSON(w, http.StatusOK, errorResponse{Error: fmt.Sprintf(format, args...)})
}

// readParams decodes a JSON body (POST) or the query string (GET).
func readParams(w http.ResponseWriter, r *http.Request, into any) error {
	if r.Method == http.MethodGet {
		v := r.URL.Query()
		switch req := into.(type) {
		case *valueRequest:
			req.Value = v.Get("value")
		case *numRequest:
			if s := v.Get("num"); s != "" {
				n, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					return err
				}
				req.Num = n
			}
		}
		return nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(body)) == "" {
		return nil
	}
	return json.Unmarshal(body, into)
}

func (h *handler) txid(w http.ResponseWriter, r *http.Request) ([32]byte, bool) {
	var req valueRequest
	if err := readParams(w, r, &req); err != nil {
		badRequest(w, "class org.tron.json.JSONException : %v", err)
		return [32]byte{}, false
	}
	id, err := tron.ParseTxID(req.Value)
	if err != nil {
		badRequest(w, "class java.lang.IllegalArgumentException : invalid value %q", req.Value)
		return [32]byte{}, false
	}
	return id, true
}

// broadcastHex answers as java-tron's BroadcastHexServlet does: the
// message is plain text (Return.message as UTF-8), unlike
// /wallet/broadcasttransaction, which prints it as hex.
func (h *handler) broadcastHex(w http.ResponseWriter, r *http.Request) {
	var req broadcastHexRequest
	if err := readParams(w, r, &req); err != nil {
		badRequest(w, "class org.tron.json.JSONException : %v", err)
		return
	}
	b, err := hex.DecodeString(req.Transaction)
	if err != nil {
		writeJSON(w, http.StatusOK, broadcastResponse{Code: string(tron.CodeOtherError), Message: "transaction is not hex"})
		return
	}
	tx, err := tron.DecodeTransaction(b)
	if err != nil {
		writeJSON(w, http.StatusOK, broadcastResponse{Code: string(tron.CodeOtherError), Message: err.Error()})
		return
	}
	res, err := h.sim.Broadcast(workerContext(r), tx.Signed())
	if err != nil {
		writeNodeError(w, err)
		return
	}
	out := broadcastResponse{
		Result: res.Code == tron.CodeSuccess,
		Code:   string(res.Code),
		TxID:   tron.HexID(res.TxID),
	}
	if res.Message != "" {
		out.Message = res.Message
	}
	writeJSON(w, http.StatusOK, out)
}

// hexText encodes text as java-tron renders a bytes field in JSON (resMessage: hex).
func hexText(s string) string { return hex.EncodeToString([]byte(s)) }

func (h *handler) txInfo(solid bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := h.txid(w, r)
		if !ok {
			return
		}
		ctx := workerContext(r)
		var st tron.TxStatus
		var err error
		if solid {
			st, err = h.sim.SolidLookup(ctx, id)
		} else {
			st, err = h.sim.Lookup(ctx, id)
		}
		if err != nil {
			writeNodeError(w, err)
			return
		}
		if st.State != tron.TxIncluded {
			writeJSON(w, http.StatusOK, struct{}{})
			return
		}
		ti, ok := h.sim.TxInfo(id)
		if !ok {
			writeJSON(w, http.StatusOK, struct{}{})
			return
		}
		writeJSON(w, http.StatusOK, h.info(ti))
	}
}

func (h *handler) info(ti tron.TxInfo) transactionInfo {
	info := transactionInfo{
		ID:             tron.HexID(ti.TxID),
		BlockNumber:    ti.BlockNumber,
		BlockTimeStamp: ti.BlockTime,
		Receipt: receiptJSON{
			Result: string(ti.Receipt), EnergyUsage: ti.EnergyFromStake, EnergyFee: ti.EnergyFeeSun,
			EnergyUsageTotal: ti.EnergyUsed, NetUsage: ti.NetUsage, NetFee: ti.NetFeeSun,
		},
		Fee: ti.FeeSun,
	}
	st := tron.TxStatus{Receipt: ti.Receipt, Message: ti.Message}
	if tr, ok := h.sim.TransferByTxID(ti.TxID); ok {
		info.ContractAddress = tr.Contract.Hex()
		if st.Receipt == tron.ReceiptSuccess {
			info.ContractResult = []string{strings.Repeat("0", 63) + "1"}
			info.Log = []logJSON{transferLog(tr)}
		} else {
			info.ContractResult = []string{""}
		}
	}
	if st.Receipt != tron.ReceiptSuccess {
		info.Result = "FAILED"
		info.ResMessage = hexText(st.Message)
	}
	return info
}

// transferSig is keccak256("Transfer(address,address,uint256)"), topic 0
// of a TRC-20 Transfer event.
const transferSig = "ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"

func transferLog(tr tron.Transfer) logJSON {
	word := func(a tron.Address) string { return strings.Repeat("0", 24) + a.Hex()[2:] }
	amount := make([]byte, 32)
	new(big.Int).Set(tr.Amount).FillBytes(amount)
	return logJSON{
		Address: tr.Contract.Hex()[2:], // java-tron prints log addresses without 0x41
		Topics:  []string{transferSig, word(tr.From), word(tr.To)},
		Data:    hex.EncodeToString(amount),
	}
}

func (h *handler) txByID(solid bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := h.txid(w, r)
		if !ok {
			return
		}
		signed, _, known := h.sim.Transaction(id)
		st := h.sim.Status(id, solid)
		if !known || st.State != tron.TxIncluded {
			writeJSON(w, http.StatusOK, struct{}{})
			return
		}
		tj := renderTransaction(signed)
		tj.Ret = []contractRet{{ContractRet: string(st.Receipt)}}
		writeJSON(w, http.StatusOK, tj)
	}
}

func (h *handler) txFromPending(w http.ResponseWriter, r *http.Request) {
	id, ok := h.txid(w, r)
	if !ok {
		return
	}
	signed, st, known := h.sim.Transaction(id)
	if !known || st.State != tron.TxPending {
		writeJSON(w, http.StatusOK, struct{}{})
		return
	}
	writeJSON(w, http.StatusOK, renderTransaction(signed))
}

// renderTransaction prints a transaction the way java-tron does with
// visible=false (addresses in hex).
func renderTransaction(s tron.SignedTx) transactionJSON {
	tj := transactionJSON{
		TxID:       tron.HexID(s.TxID()),
		RawDataHex: hex.EncodeToString(s.Raw),
	}
	if len(s.Signature) > 0 {
		tj.Signature = []string{hex.EncodeToString(s.Signature)}
	}
	raw, err := tron.DecodeRaw(s.Raw)
	if err != nil {
		return tj
	}
	rd := &rawDataJSON{
		RefBlockBytes: hex.EncodeToString(raw.RefBlockBytes),
		RefBlockHash:  hex.EncodeToString(raw.RefBlockHash),
		Expiration:    raw.Expiration,
		Data:          hex.EncodeToString(raw.Data),
		FeeLimit:      raw.FeeLimit,
		Timestamp:     raw.Timestamp,
	}
	for _, c := range raw.Contracts {
		var cj contractJSON
		cj.Type = c.Type.String()
		cj.Parameter.TypeURL = c.TypeURL
		if c.Type == tron.TriggerSmartContractType {
			if t, err := tron.DecodeTriggerSmartContract(c.Value); err == nil {
				cj.Parameter.Value = triggerValue{
					Data:            hex.EncodeToString(t.Data),
					OwnerAddress:    t.Owner.Hex(),
					ContractAddress: t.Contract.Hex(),
					CallValue:       t.CallValue,
				}
			}
		}
		rd.Contract = append(rd.Contract, cj)
	}
	tj.RawData = rd
	return tj
}

func (h *handler) nowBlock(solid bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := workerContext(r)
		var b tron.BlockHeader
		var err error
		if solid {
			b, err = h.sim.SolidHead(ctx)
		} else {
			b, err = h.sim.Head(ctx)
		}
		if err != nil {
			writeNodeError(w, err)
			return
		}
		out := renderBlockHeader(b)
		if parent, ok := h.sim.Block(b.Number - 1); ok {
			out.BlockHeader.RawData.ParentHash = parent.IDHex()
		}
		writeJSON(w, http.StatusOK, out)
	}
}

func (h *handler) num(w http.ResponseWriter, r *http.Request) (int64, bool) {
	var req numRequest
	if err := readParams(w, r, &req); err != nil {
		badRequest(w, "class org.tron.json.JSONException : %v", err)
		return 0, false
	}
	return req.Num, true
}

// solidBlockByNum answers {} for a block the solidity view does not have,
// as java-tron does.
func (h *handler) solidBlockByNum(w http.ResponseWriter, r *http.Request) {
	num, ok := h.num(w, r)
	if !ok {
		return
	}
	b, err := h.sim.SolidBlockByNum(workerContext(r), num)
	if errors.Is(err, tron.ErrBlockNotSolid) {
		writeJSON(w, http.StatusOK, struct{}{})
		return
	}
	if err != nil {
		writeNodeError(w, err)
		return
	}
	out := renderBlockHeader(b.Header)
	if b.ParentID != ([32]byte{}) {
		out.BlockHeader.RawData.ParentHash = hex.EncodeToString(b.ParentID[:])
	}
	for _, id := range b.TxIDs {
		signed, st, known := h.sim.Transaction(id)
		if !known {
			continue
		}
		tj := renderTransaction(signed)
		tj.Ret = []contractRet{{ContractRet: string(st.Receipt)}}
		out.Transactions = append(out.Transactions, tj)
	}
	writeJSON(w, http.StatusOK, out)
}

// solidTxInfosByBlockNum answers [] for an empty block and for one the
// solidity view does not have, as java-tron does.
func (h *handler) solidTxInfosByBlockNum(w http.ResponseWriter, r *http.Request) {
	num, ok := h.num(w, r)
	if !ok {
		return
	}
	infos, err := h.sim.SolidTxInfosByBlockNum(workerContext(r), num)
	if err != nil && !errors.Is(err, tron.ErrBlockNotSolid) {
		writeNodeError(w, err)
		return
	}
	h.writeInfos(w, infos)
}

// writeInfos answers a block's receipts as a JSON list ([] for none).
func (h *handler) writeInfos(w http.ResponseWriter, infos []tron.TxInfo) {
	out := make([]transactionInfo, 0, len(infos))
	for _, in := range infos {
		out = append(out, h.info(in))
	}
	writeJSON(w, http.StatusOK, out)
}

// txInfosByBlockNum answers for any block up to the head, solid or not,
// and [] for an empty block and for one past the head, as java-tron does.
func (h *handler) txInfosByBlockNum(w http.ResponseWriter, r *http.Request) {
	num, ok := h.num(w, r)
	if !ok {
		return
	}
	infos, err := h.sim.TxInfosByBlockNum(workerContext(r), num)
	if err != nil {
		writeNodeError(w, err)
		return
	}
	h.writeInfos(w, infos)
}

// renderBlockHeader prints a block header as java-tron does (no parent hash:
// callers add it).
func renderBlockHeader(b tron.BlockHeader) blockResponse {
	var out blockResponse
	out.BlockID = b.IDHex()
	raw := &out.BlockHeader.RawData
	raw.Number = b.Number
	raw.Timestamp = b.Timestamp
	raw.Version = 31
	raw.WitnessAddress = simWitness.Hex()
	raw.TxTrieRoot = strings.Repeat("0", 64)
	return out
}
