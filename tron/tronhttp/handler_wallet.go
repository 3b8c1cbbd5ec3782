package tronhttp

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/big"
	"net/http"
	"strings"

	"github.com/weir-payouts/weir/tron"
)

// Function selectors the façade's triggerconstantcontract understands.
var (
	balanceOfSelector = [4]byte{0x70, 0xa0, 0x82, 0x31} // balanceOf(address)
	selectors         = map[string][4]byte{
		"balanceOf(address)":        balanceOfSelector,
		"transfer(address,uint256)": tron.TransferSelector,
	}
)

// callData is the ABI call a triggerconstantcontract request makes: data,
// or function_selector's selector followed by parameter.
func callData(req triggerConstantRequest) ([]byte, bool) {
	if req.Data != "" {
		b, err := hex.DecodeString(req.Data)
		return b, err == nil
	}
	sel, ok := selectors[strings.ReplaceAll(req.FunctionSelector, " ", "")]
	if !ok {
		return nil, req.FunctionSelector == "" // an unknown function reverts; no function is a bad request
	}
	param, err := hex.DecodeString(req.Parameter)
	if err != nil {
		return nil, false
	}
	return append(sel[:], param...), true
}

// reverted answers a constant call that failed the way java-tron does:
// result.result true, the reason in result.message (hex) and
// transaction.ret FAILED.
func reverted(w http.ResponseWriter, energy int64, msg string) {
	out := triggerConstantResponse{Result: returnJSON{Result: true, Message: hexText(msg)}, EnergyUsed: energy}
	out.Transaction = &struct {
		Ret []struct {
			Ret string `json:"ret,omitempty"`
		} `json:"ret,omitempty"`
		TxID string `json:"txID,omitempty"`
	}{Ret: []struct {
		Ret string `json:"ret,omitempty"`
	}{{Ret: "FAILED"}}}
	writeJSON(w, http.StatusOK, out)
}

func (h *handler) triggerConstant(w http.ResponseWriter, r *http.Request) {
	var req triggerConstantRequest
	if err := readParams(w, r, &req); err != nil {
		badRequest(w, "class org.tron.json.JSONException : %v", err)
		return
	}
	owner, err1 := tron.ParseAddress(req.OwnerAddress)
	contract, err2 := tron.ParseAddress(req.ContractAddress)
	if err1 != nil || err2 != nil {
		badRequest(w, "class java.lang.IllegalArgumentException : invalid address")
		return
	}
	data, ok := callData(req)
	if !ok {
		badRequest(w, "class java.lang.IllegalArgumentException : invalid function_selector, parameter or data")
		return
	}
	ctx := workerContext(r)
	switch {
	case len(data) == 4+32 && bytes.Equal(data[:4], balanceOfSelector[:]):
		var who tron.Address
		who[0] = tron.AddressPrefix
		copy(who[1:], data[4+12:])
		bal, err := h.sim.TokenBalance(ctx, contract, who)
		if err != nil {
			writeNodeError(w, err)
			return
		}
		word := make([]byte, 32)
		bal.FillBytes(word)
		writeJSON(w, http.StatusOK, triggerConstantResponse{
			Result: returnJSON{Result: true}, EnergyUsed: 535, ConstantResult: []string{hex.EncodeToString(word)},
		})
	case len(data) > 4 && bytes.Equal(data[:4], tron.TransferSelector[:]):
		to, amount, err := tron.DecodeTransferCall(data)
		if err != nil || amount.Sign() <= 0 {
			reverted(w, 0, "REVERT opcode executed")
			return
		}
		energy, err := h.sim.EstimateTransferEnergy(ctx, owner, contract, to, amount)
		switch {
		case errors.Is(err, tron.ErrCallFailed):
			reverted(w, 0, "REVERT opcode executed")
			return
		case err != nil:
			writeNodeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, triggerConstantResponse{
			Result: returnJSON{Result: true}, EnergyUsed: energy, ConstantResult: []string{strings.Repeat("0", 63) + "1"},
		})
	default:
		reverted(w, 0, "REVERT opcode executed")
	}
}

func (h *handler) address(w http.ResponseWriter, r *http.Request) (tron.Address, bool) {
	var req addressRequest
	if err := readParams(w, r, &req); err != nil {
		badRequest(w, "class org.tron.json.JSONException : %v", err)
		return tron.Address{}, false
	}
	a, err := tron.ParseAddress(req.Address)
	if err != nil {
		badRequest(w, "class java.lang.IllegalArgumentException : invalid address")
		return tron.Address{}, false
	}
	return a, true
}

// getAccount serves the account's TRX; it never consumes a fault (the
// client reads it together with getaccountresource, which does).
func (h *handler) getAccount(w http.ResponseWriter, r *http.Request) {
	a, ok := h.address(w, r)
	if !ok {
		return
	}
	acct := h.sim.AccountState(a)
	if !acct.Exists {
		writeJSON(w, http.StatusOK, struct{}{})
		return
	}
	writeJSON(w, http.StatusOK, accountJSON{Address: a.Hex(), Balance: acct.BalanceSun, CreateTime: tron.DefaultSimStart.UnixMilli()})
}

func (h *handler) getAccountResource(w http.ResponseWriter, r *http.Request) {
	a, ok := h.address(w, r)
	if !ok {
		return
	}
	acct, err := h.sim.Account(workerContext(r), a)
	if err != nil {
		writeNodeError(w, err)
		return
	}
	if !acct.Exists {
		writeJSON(w, http.StatusOK, struct{}{})
		return
	}
	writeJSON(w, http.StatusOK, accountResourceJSON{
		FreeNetUsed: acct.FreeNetUsed, FreeNetLimit: acct.FreeNetLimit,
		NetUsed: acct.NetUsed, NetLimit: acct.NetLimit,
		EnergyUsed: acct.EnergyUsed, EnergyLimit: acct.EnergyLimit,
		TotalNetLimit: 43_200_000_000, TotalEnergyLimit: 180_000_000_000,
	})
}

func (h *handler) chainParameters(w http.ResponseWriter, r *http.Request) {
	p, err := h.sim.ChainPrices(workerContext(r))
	if err != nil {
		writeNodeError(w, err)
		return
	}
	var out chainParametersJSON
	for _, kv := range []struct {
		k string
		v int64
	}{
		{"getMaintenanceTimeInterval", 21_600_000},
		{"getTransactionFee", p.BandwidthSun},
		{"getEnergyFee", p.EnergySun},
		{"getFreeNetLimit", tron.SimFreeBandwidth},
		{"getMemoFee", p.MemoSun},
	} {
		out.ChainParameter = append(out.ChainParameter, struct {
			Key   string `json:"key"`
			Value int64  `json:"value,omitempty"`
		}{kv.k, kv.v})
	}
	writeJSON(w, http.StatusOK, out)
}

// fund credits an address on the simulated chain. It exists only here:
// no java-tron node has it, and the client never calls it.
func (h *handler) fund(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, errorResponse{Error: "POST only"})
		return
	}
	var req simFundRequest
	if err := readParams(w, r, &req); err != nil {
		writeJSON(w, http.StatusBadRequest, errorResponse{Error: "body: " + err.Error()})
		return
	}
	a, err := tron.ParseAddress(req.Address)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorResponse{Error: "address: " + err.Error()})
		return
	}
	usdt, err := amount(req.USDT, tron.USDTDecimals)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorResponse{Error: "usdt: " + err.Error()})
		return
	}
	trx, err := amount(req.TRX, tron.TRXDecimals)
	if err != nil || !trx.IsInt64() {
		writeJSON(w, http.StatusBadRequest, errorResponse{Error: "trx: not a TRX amount"})
		return
	}
	if err := h.sim.Fund(a, usdt, trx.Int64()); err != nil {
		writeJSON(w, http.StatusBadRequest, errorResponse{Error: err.Error()})
		return
	}
	out := simFundResponse{Address: a.String(), TRX: tron.FormatUnits(big.NewInt(h.sim.TRX(a)), tron.TRXDecimals)}
	out.USDT = tron.FormatUnits(h.sim.Balance(a), tron.USDTDecimals)
	writeJSON(w, http.StatusOK, out)
}

func amount(n interface{ String() string }, decimals int) (*big.Int, error) {
	if n.String() == "" {
		return new(big.Int), nil
	}
	return tron.ParseUnits(n.String(), decimals)
}
