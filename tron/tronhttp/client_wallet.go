package tronhttp

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"

	"github.com/weir-payouts/weir/tron"
)

var (
	_ tron.WalletReader = (*Client)(nil)
	_ tron.ChainReader  = (*Client)(nil)
)

// addressWord is an address as a 32-byte ABI word (hex): 12 zero bytes
// and the 20 account bytes.
func addressWord(a tron.Address) string { return strings.Repeat("00", 12) + a.Hex()[2:] }

// constantCall posts a read-only call to /wallet/triggerconstantcontract.
// A call that reverted or ran out of energy is an error wrapping
// tron.ErrCallFailed; an answer that is not an api.TransactionExtention
// is tron.ErrBadResponse.
func (c *Client) constantCall(ctx context.Context, req triggerConstantRequest) (triggerConstantResponse, error) {
	const path = "/wallet/triggerconstantcontract"
	var resp triggerConstantResponse
	if err := c.post(ctx, path, req, &resp); err != nil {
		return resp, err
	}
	failed := resp.Transaction != nil && len(resp.Transaction.Ret) > 0 && resp.Transaction.Ret[0].Ret == "FAILED"
	if resp.Result.Code != "" && resp.Result.Code != string(tron.CodeSuccess) {
		return resp, fmt.Errorf("%w: %s: %s %s", tron.ErrCallFailed, path, resp.Result.Code, c.snippet([]byte(decodeMessage(resp.Result.Message))))
	}
	if failed || resp.Result.Message != "" {
		return resp, fmt.Errorf("%w: %s: %s", tron.ErrCallFailed, path, c.snippet([]byte(decodeMessage(resp.Result.Message))))
	}
	if !resp.Result.Result {
		return resp, fmt.Errorf("%w: %s: no result in answer", tron.ErrBadResponse, path)
	}
	return resp, nil
}

// TokenBalance calls balanceOf(owner) on contract.
func (c *Client) TokenBalance(ctx context.Context, contract, owner tron.Address) (*big.Int, error) {
	resp, err := c.constantCall(ctx, triggerConstantRequest{
		OwnerAddress: owner.Hex(), ContractAddress: contract.Hex(),
		FunctionSelector: "balanceOf(address)", Parameter: addressWord(owner),
	})
	if err != nil {
		return nil, err
	}
	if len(resp.ConstantResult) != 1 {
		return nil, fmt.Errorf("%w: balanceOf: %d results, want 1", tron.ErrBadResponse, len(resp.ConstantResult))
	}
	word, err := hex.DecodeString(resp.ConstantResult[0])
	if err != nil || len(word) != 32 {
		return nil, fmt.Errorf("%w: balanceOf: result %q is not a 32-byte word", tron.ErrBadResponse, resp.ConstantResult[0])
	}
	return new(big.Int).SetBytes(word), nil
}

// EstimateTransferEnergy simulates transfer(to, amount) from owner with
// triggerconstantcontract and returns its energy_used (available on every
// node, unlike /wallet/estimateenergy, which nodes serve only with
// vm.estimateEnergy on).
func (c *Client) EstimateTransferEnergy(ctx context.Context, owner, contract, to tron.Address, amount *big.Int) (int64, error) {
	data, err := tron.EncodeTransferCall(to, amount)
	if err != nil {
		return 0, err
	}
	resp, err := c.constantCall(ctx, triggerConstantRequest{
		OwnerAddress: owner.Hex(), ContractAddress: contract.Hex(),
		FunctionSelector: "transfer(address,uint256)", Parameter: hex.EncodeToString(data[4:]),
	})
	if err != nil {
		return 0, err
	}
	if resp.EnergyUsed <= 0 {
		return 0, fmt.Errorf("%w: transfer estimate without energy_used", tron.ErrBadResponse)
	}
	return resp.EnergyUsed, nil
}

// Account reads /wallet/getaccount (TRX) and /wallet/getaccountresource
// (energy, bandwidth). {} from both is an address the chain does not know.
func (c *Client) Account(ctx context.Context, a tron.Address) (tron.Account, error) {
	data, err := c.call(ctx, "/wallet/getaccount", addressRequest{Address: a.Hex()})
	if err != nil {
		return tron.Account{}, err
	}
	out := tron.Account{Address: a}
	if !isEmptyObject(data) {
		var aj accountJSON
		if err := json.Unmarshal(data, &aj); err != nil {
			return tron.Account{}, fmt.Errorf("%w: /wallet/getaccount: %w", tron.ErrBadResponse, err)
		}
		if !strings.EqualFold(aj.Address, a.Hex()) && aj.Address != a.String() {
			return tron.Account{}, fmt.Errorf("%w: /wallet/getaccount: answer for %q, asked %s: %s",
				tron.ErrBadResponse, aj.Address, a.Hex(), c.snippet(data))
		}
		out.Exists, out.BalanceSun = true, aj.Balance
	}
	const path = "/wallet/getaccountresource"
	data, err = c.call(ctx, path, addressRequest{Address: a.Hex()})
	if err != nil {
		return tron.Account{}, err
	}
	var rj accountResourceJSON
	if err := json.Unmarshal(data, &rj); err != nil {
		return tron.Account{}, fmt.Errorf("%w: %s: %w", tron.ErrBadResponse, path, err)
	}
	// java-tron always names the network's totals for an address it knows;
	// an object without them (a gateway's {"statusCode":429}) is no answer,
	// never "no resources".
	if !isEmptyObject(data) && rj.TotalNetLimit == 0 && rj.TotalEnergyLimit == 0 {
		return tron.Account{}, fmt.Errorf("%w: %s: not a resource message: %s", tron.ErrBadResponse, path, c.snippet(data))
	}
	out.FreeNetLimit, out.FreeNetUsed = rj.FreeNetLimit, rj.FreeNetUsed
	out.NetLimit, out.NetUsed = rj.NetLimit, rj.NetUsed
	out.EnergyLimit, out.EnergyUsed = rj.EnergyLimit, rj.EnergyUsed
	return out, nil
}

// ChainPrices reads getEnergyFee, getTransactionFee and getMemoFee from
// /wallet/getchainparameters (a missing memo fee is zero: the chain
// predates proposal #80).
func (c *Client) ChainPrices(ctx context.Context) (tron.ChainPrices, error) {
	var cp chainParametersJSON
	if err := c.post(ctx, "/wallet/getchainparameters", struct{}{}, &cp); err != nil {
		return tron.ChainPrices{}, err
	}
	var p tron.ChainPrices
	for _, kv := range cp.ChainParameter {
		switch kv.Key {
		case "getEnergyFee":
			p.EnergySun = kv.Value
		case "getTransactionFee":
			p.BandwidthSun = kv.Value
		case "getMemoFee":
			p.MemoSun = kv.Value
		}
	}
	if p.EnergySun <= 0 || p.BandwidthSun <= 0 {
		return tron.ChainPrices{}, fmt.Errorf("%w: /wallet/getchainparameters: no getEnergyFee or getTransactionFee", tron.ErrBadResponse)
	}
	return p, nil
}

// Genesis reads block 0 from /walletsolidity/getblockbynum. Its header may
// carry no timestamp (mainnet's is 0); its id must start with eight zero
// bytes, as every block id starts with its number.
func (c *Client) Genesis(ctx context.Context) (tron.BlockHeader, error) {
	const path = "/walletsolidity/getblockbynum"
	var br blockResponse
	if err := c.post(ctx, path, numRequest{Num: 0}, &br); err != nil {
		return tron.BlockHeader{}, err
	}
	var h tron.BlockHeader
	if err := decodeID(br.BlockID, &h.ID); err != nil || binary.BigEndian.Uint64(h.ID[:8]) != 0 || br.BlockHeader.RawData.Number != 0 {
		return tron.BlockHeader{}, fmt.Errorf("%w: %s: block 0 answered with id %q, number %d",
			tron.ErrBadResponse, path, br.BlockID, br.BlockHeader.RawData.Number)
	}
	h.Timestamp = br.BlockHeader.RawData.Timestamp
	return h, nil
}

// SolidBlockTransfers reads solid block num and decodes each transaction
// that is a TRC-20 transfer(to, amount): from raw_data_hex when the node
// sends it (checked against the txID), otherwise from raw_data's contract
// fields. Other transactions are skipped.
func (c *Client) SolidBlockTransfers(ctx context.Context, num int64) ([]tron.ChainTransfer, error) {
	const path = "/walletsolidity/getblockbynum"
	b, br, err := c.solidBlock(ctx, num)
	if err != nil {
		return nil, err
	}
	var out []tron.ChainTransfer
	for i, tj := range br.Transactions {
		tt, ok, err := transferOf(tj)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: block %d tx %s: %w", tron.ErrBadResponse, path, num, tj.TxID, err)
		}
		if !ok {
			continue
		}
		ct := tron.ChainTransfer{
			TxID: b.TxIDs[i], BlockNumber: num, BlockTime: b.Header.Timestamp,
			Contract: tt.Contract, From: tt.Owner, To: tt.To, Amount: tt.Amount,
		}
		if len(tj.Ret) > 0 {
			ct.Receipt = tron.ReceiptResult(tj.Ret[0].ContractRet)
		}
		out = append(out, ct)
	}
	return out, nil
}

// transferOf decodes a block transaction as a TRC-20 transfer; ok false
// when it is some other transaction.
func transferOf(tj transactionJSON) (tron.TokenTransfer, bool, error) {
	if tj.RawDataHex != "" {
		raw, err := hex.DecodeString(tj.RawDataHex)
		if err != nil {
			return tron.TokenTransfer{}, false, err
		}
		rd, err := tron.DecodeRaw(raw)
		if err != nil {
			return tron.TokenTransfer{}, false, err
		}
		tt, err := rd.TokenTransfer()
		return tt, err == nil, nil
	}
	if tj.RawData == nil || len(tj.RawData.Contract) != 1 || tj.RawData.Contract[0].Type != tron.TriggerSmartContractType.String() {
		return tron.TokenTransfer{}, false, nil
	}
	v := tj.RawData.Contract[0].Parameter.Value
	data, err := hex.DecodeString(v.Data)
	if err != nil || v.CallValue != 0 {
		return tron.TokenTransfer{}, false, nil
	}
	to, amount, err := tron.DecodeTransferCall(data)
	if err != nil {
		return tron.TokenTransfer{}, false, nil
	}
	owner, err1 := tron.ParseAddress(v.OwnerAddress)
	contract, err2 := tron.ParseAddress(v.ContractAddress)
	if err1 != nil || err2 != nil {
		return tron.TokenTransfer{}, false, fmt.Errorf("transfer with unreadable addresses %q, %q", v.OwnerAddress, v.ContractAddress)
	}
	return tron.TokenTransfer{Owner: owner, Contract: contract, To: to, Amount: amount}, true, nil
}
