package tronhttp

import "encoding/json"

// JSON shapes of java-tron's HTTP API (the subset weir uses), shared by the
// client and the simulated server so the two cannot drift apart.

// WorkerHeader carries tron.WithWorker's id from the client to the simulated
// node, so its broadcast log can say which worker sent what. Sent only with
// Config.SendWorker (weir's own façade): never to a third-party node.
const WorkerHeader = "X-Weir-Worker"

// valueRequest is the body of the *byid endpoints: {"value": "<txid hex>"}.
type valueRequest struct {
	Value   string `json:"value"`
	Visible bool   `json:"visible,omitempty"`
}

// numRequest is the body of the *byblocknum endpoints: {"num": 123}.
type numRequest struct {
	Num int64 `json:"num"`
}

// broadcastHexRequest is /wallet/broadcasthex's body: the serialised
// protocol.Transaction (raw_data + signatures) as hex.
type broadcastHexRequest struct {
	Transaction string `json:"transaction"`
}

// broadcastResponse is java-tron's api.Return rendered as JSON, plus txid.
// message is hex-encoded bytes in /wallet/broadcasttransaction and plain
// text in /wallet/broadcasthex (BroadcastHexServlet); readers accept both.
type broadcastResponse struct {
	Result  bool   `json:"result,omitempty"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	TxID    string `json:"txid,omitempty"`
}

// errorResponse is how java-tron servlets report a request they could not
// process: HTTP 200 with {"Error": "..."}.
type errorResponse struct {
	Error string `json:"Error"`
}

type blockResponse struct {
	BlockID     string `json:"blockID"`
	BlockHeader struct {
		RawData struct {
			Number         int64  `json:"number,omitempty"`
			TxTrieRoot     string `json:"txTrieRoot,omitempty"`
			WitnessAddress string `json:"witness_address,omitempty"`
			ParentHash     string `json:"parentHash,omitempty"`
			Version        int32  `json:"version,omitempty"`
			Timestamp      int64  `json:"timestamp,omitempty"`
		} `json:"raw_data"`
		WitnessSignature string `json:"witness_signature,omitempty"`
	} `json:"block_header"`
	// Transactions: getblockbynum lists the block's transactions; java-tron
	// omits the field for an empty block.
	Transactions []transactionJSON `json:"transactions,omitempty"`
}

// receiptJSON is protocol.ResourceReceipt: energy_usage is staked energy,
// energy_fee the sun burnt for the rest, energy_usage_total both (plus the
// contract owner's share); net_usage the bandwidth covered, net_fee the sun
// burnt when it was not.
type receiptJSON struct {
	EnergyUsage      int64  `json:"energy_usage,omitempty"`
	EnergyFee        int64  `json:"energy_fee,omitempty"`
	EnergyUsageTotal int64  `json:"energy_usage_total,omitempty"`
	NetUsage         int64  `json:"net_usage,omitempty"`
	NetFee           int64  `json:"net_fee,omitempty"`
	Result           string `json:"result,omitempty"`
}

type logJSON struct {
	Address string   `json:"address"`
	Topics  []string `json:"topics"`
	Data    string   `json:"data"`
}

// transactionInfo is /wallet(solidity)/gettransactioninfobyid's answer; {}
// when the node has no info (not in a block, or not yet solid).
// /walletsolidity/gettransactioninfobyblocknum answers a JSON array of
// them, [] for an empty block and for a block the node does not have.
type transactionInfo struct {
	ID              string      `json:"id,omitempty"`
	Fee             int64       `json:"fee,omitempty"`
	BlockNumber     int64       `json:"blockNumber,omitempty"`
	BlockTimeStamp  int64       `json:"blockTimeStamp,omitempty"`
	ContractResult  []string    `json:"contractResult,omitempty"`
	ContractAddress string      `json:"contract_address,omitempty"`
	Receipt         receiptJSON `json:"receipt"`
	Log             []logJSON   `json:"log,omitempty"`
	Result          string      `json:"result,omitempty"` // "FAILED" when the call failed
	ResMessage      string      `json:"resMessage,omitempty"`
}

type contractRet struct {
	ContractRet string `json:"contractRet,omitempty"`
}

type triggerValue struct {
	Data            string `json:"data,omitempty"`
	OwnerAddress    string `json:"owner_address,omitempty"`
	ContractAddress string `json:"contract_address,omitempty"`
	CallValue       int64  `json:"call_value,omitempty"`
}

type contractJSON struct {
	Parameter struct {
		Value   triggerValue `json:"value"`
		TypeURL string       `json:"type_url"`
	} `json:"parameter"`
	Type string `json:"type"`
}

type rawDataJSON struct {
	Contract      []contractJSON `json:"contract"`
	RefBlockBytes string         `json:"ref_block_bytes"`
	RefBlockHash  string         `json:"ref_block_hash"`
	Expiration    int64          `json:"expiration"`
	Data          string         `json:"data,omitempty"` // memo, hex
	FeeLimit      int64          `json:"fee_limit,omitempty"`
	Timestamp     int64          `json:"timestamp,omitempty"`
}

// transactionJSON is a protocol.Transaction as gettransactionbyid and
// gettransactionfrompending render it; {} when unknown.
type transactionJSON struct {
	Ret        []contractRet `json:"ret,omitempty"`
	Signature  []string      `json:"signature,omitempty"`
	TxID       string        `json:"txID,omitempty"`
	RawData    *rawDataJSON  `json:"raw_data,omitempty"`
	RawDataHex string        `json:"raw_data_hex,omitempty"`
}

// addressRequest is the body of /wallet/getaccount and
// /wallet/getaccountresource: {"address": "41…"} (hex; base58 with
// "visible": true).
type addressRequest struct {
	Address string `json:"address"`
	Visible bool   `json:"visible,omitempty"`
}

// triggerConstantRequest is /wallet/triggerconstantcontract's body: a
// read-only contract call (protocol.TriggerSmartContract). parameter is the
// ABI-encoded arguments after the selector, as hex.
type triggerConstantRequest struct {
	OwnerAddress     string `json:"owner_address"`
	ContractAddress  string `json:"contract_address"`
	FunctionSelector string `json:"function_selector,omitempty"`
	Parameter        string `json:"parameter,omitempty"`
	Data             string `json:"data,omitempty"`
	Visible          bool   `json:"visible,omitempty"`
}

// returnJSON is api.Return: result, code and message (hex bytes).
type returnJSON struct {
	Result  bool   `json:"result,omitempty"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// triggerConstantResponse is api.TransactionExtention as
// triggerconstantcontract answers it. A call that reverted or ran out of
// energy still has result.result true; it says so in result.message and
// in transaction.ret[0].ret = "FAILED".
type triggerConstantResponse struct {
	Result         returnJSON `json:"result"`
	EnergyUsed     int64      `json:"energy_used,omitempty"`
	EnergyPenalty  int64      `json:"energy_penalty,omitempty"`
	ConstantResult []string   `json:"constant_result,omitempty"`
	Transaction    *struct {
		Ret []struct {
			Ret string `json:"ret,omitempty"`
		} `json:"ret,omitempty"`
		TxID string `json:"txID,omitempty"`
	} `json:"transaction,omitempty"`
}

// accountJSON is the part of /wallet/getaccount's protocol.Account weir
// reads; {} for an address the chain does not know.
type accountJSON struct {
	Address    string `json:"address,omitempty"`
	Balance    int64  `json:"balance,omitempty"`
	CreateTime int64  `json:"create_time,omitempty"`
}

// accountResourceJSON is /wallet/getaccountresource's
// api.AccountResourceMessage (java-tron's own capitalisation); {} for an
// address the chain does not know. Zero fields are omitted.
type accountResourceJSON struct {
	FreeNetUsed       int64 `json:"freeNetUsed,omitempty"`
	FreeNetLimit      int64 `json:"freeNetLimit,omitempty"`
	NetUsed           int64 `json:"NetUsed,omitempty"`
	NetLimit          int64 `json:"NetLimit,omitempty"`
	TotalNetLimit     int64 `json:"TotalNetLimit,omitempty"`
	TotalNetWeight    int64 `json:"TotalNetWeight,omitempty"`
	EnergyUsed        int64 `json:"EnergyUsed,omitempty"`
	EnergyLimit       int64 `json:"EnergyLimit,omitempty"`
	TotalEnergyLimit  int64 `json:"TotalEnergyLimit,omitempty"`
	TotalEnergyWeight int64 `json:"TotalEnergyWeight,omitempty"`
}

// chainParametersJSON is /wallet/getchainparameters' protocol.ChainParameters.
type chainParametersJSON struct {
	ChainParameter []struct {
		Key   string `json:"key"`
		Value int64  `json:"value,omitempty"`
	} `json:"chainParameter"`
}

// simFundRequest is POST /sim/fund's body (the simulated node only):
// amounts are decimal USDT and TRX, as strings or numbers.
type simFundRequest struct {
	Address string      `json:"address"`
	USDT    json.Number `json:"usdt,omitempty"`
	TRX     json.Number `json:"trx,omitempty"`
}

// simFundResponse is the funded address's balances after the credit.
type simFundResponse struct {
	Address string `json:"address"`
	USDT    string `json:"usdt"`
	TRX     string `json:"trx"`
}
