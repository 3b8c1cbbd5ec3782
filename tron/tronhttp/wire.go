package tronhttp

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

type receiptJSON struct {
	EnergyUsageTotal int64  `json:"energy_usage_total,omitempty"`
	NetUsage         int64  `json:"net_usage,omitempty"`
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
