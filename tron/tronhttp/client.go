package tronhttp

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/weir-payouts/weir/tron"
)

// maxResponseBody bounds what the client reads from a node.
const maxResponseBody = 8 << 20

// DefaultTimeout is the per-request timeout of the client NewHTTPNode
// creates when given none.
const DefaultTimeout = 10 * time.Second

// Client is a tron.Node over java-tron's HTTP API.
type Client struct {
	full, solid string
	apiKey      string
	sendWorker  bool
	hc          *http.Client
	now         func() time.Time

	mu        sync.Mutex
	notBefore map[string]time.Time // base URL → the node asked us to wait until then
}

var _ tron.Node = (*Client)(nil)

// APIKeyHeader carries Config.APIKey (TronGrid's name for it).
const APIKeyHeader = "TRON-PRO-API-KEY"

// MaxRetryAfter caps how long a node's Retry-After can keep the client quiet.
const MaxRetryAfter = 5 * time.Minute

// Config says how to reach a java-tron node.
type Config struct {
	// URL is the full node's HTTP API, serving /wallet/* (e.g.
	// "https://api.trongrid.io" or a local node's "http://127.0.0.1:8090").
	URL string
	// SolidityURL serves /walletsolidity/*; empty means URL. TronGrid serves
	// both on one URL; a self-hosted java-tron serves the solidity view on
	// its own port (usually 8091).
	SolidityURL string
	// APIKey, when set, is sent as TRON-PRO-API-KEY on every request. It
	// never appears in an error or a log line.
	APIKey string
	// SendWorker sends tron.WithWorker's id in WorkerHeader. Only for the
	// simulated node's façade (NewHandler): internal headers never go to a
	// third-party node.
	SendWorker bool
	// HTTPClient nil means a client with DefaultTimeout.
	HTTPClient *http.Client
	// Now is the clock Retry-After waits are measured on; nil: time.Now.
	Now func() time.Time
}

// New returns a Node talking to the java-tron HTTP API cfg names.
func New(cfg Config) *Client {
	c := &Client{
		full:       strings.TrimRight(cfg.URL, "/"),
		solid:      strings.TrimRight(cmp.Or(cfg.SolidityURL, cfg.URL), "/"),
		apiKey:     cfg.APIKey,
		sendWorker: cfg.SendWorker,
		hc:         cfg.HTTPClient,
		now:        cfg.Now,
		notBefore:  map[string]time.Time{},
	}
	if c.hc == nil {
		c.hc = &http.Client{Timeout: DefaultTimeout}
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c
}

// NewHTTPNode returns a Node talking to the java-tron HTTP API at baseURL
// for both views, with no API key and no internal headers. hc nil means a
// client with DefaultTimeout.
func NewHTTPNode(baseURL string, hc *http.Client) *Client {
	return New(Config{URL: baseURL, HTTPClient: hc})
}

// base is the URL that serves path.
func (c *Client) base(path string) string {
	if strings.HasPrefix(path, "/walletsolidity/") {
		return c.solid
	}
	return c.full
}

// wait reports until when the node at base asked to be left alone.
func (c *Client) wait(base string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.notBefore[base]
	if ok && !c.now().Before(until) {
		delete(c.notBefore, base)
		return time.Time{}, false
	}
	return until, ok
}

func (c *Client) backOff(base string, d time.Duration) {
	d = min(d, MaxRetryAfter)
	if d <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if until := c.now().Add(d); until.After(c.notBefore[base]) {
		c.notBefore[base] = until
	}
}

// suspendedFor reads TronGrid's "... the query server is suspended for 30s".
var suspendedFor = regexp.MustCompile(`suspended for (\d+)\s*s`)

// retryAfter reads a Retry-After header (seconds or an HTTP date), or
// failing that TronGrid's suspension text in body.
func (c *Client) retryAfter(h http.Header, body []byte) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.Atoi(v); err == nil {
			return time.Duration(s) * time.Second
		}
		if t, err := http.ParseTime(v); err == nil {
			return t.Sub(c.now())
		}
	}
	if m := suspendedFor.FindSubmatch(body); m != nil {
		if s, err := strconv.Atoi(string(m[1])); err == nil {
			return time.Duration(s) * time.Second
		}
	}
	return 0
}

// isRateLimit: HTTP 429, or TronGrid's 403 for a key over its frequency
// limit. Both mean "not now", never "bad request".
func isRateLimit(status int, body []byte) bool {
	if status == http.StatusTooManyRequests {
		return true
	}
	return status == http.StatusForbidden && bytes.Contains(bytes.ToLower(body), []byte("frequency limit"))
}

// post sends body as JSON to path and decodes the answer into out. Every
// failure is mapped to the tron catalogue: timeouts (the caller's deadline,
// the client's timeout, a 504/408) wrap tron.ErrTimeout; other transport
// failures and server errors wrap tron.ErrUnavailable; an answer that cannot
// be read wraps tron.ErrBadResponse.
func (c *Client) post(ctx context.Context, path string, body, out any) error {
	data, err := c.call(ctx, path, body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%w: %s: %w", tron.ErrBadResponse, path, err)
	}
	return nil
}

// call sends body as JSON to path and returns the answer's bytes, mapping
// failures as post does (a java-tron {"Error": "..."} is ErrBadResponse).
func (c *Client) call(ctx context.Context, path string, body any) ([]byte, error) {
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("tronhttp: %s: %w", path, err)
	}
	base := c.base(path)
	if until, ok := c.wait(base); ok {
		return nil, fmt.Errorf("%w: %s: not sent: the node asked to wait until %s (Retry-After)",
			tron.ErrUnavailable, path, until.UTC().Format(time.RFC3339))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", tron.ErrUnavailable, path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.apiKey != "" {
		req.Header.Set(APIKeyHeader, c.apiKey)
	}
	if w := tron.WorkerFrom(ctx); w != "" && c.sendWorker {
		req.Header.Set(WorkerHeader, w)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if isTimeout(ctx, err) {
			return nil, fmt.Errorf("%w: %s: %w", tron.ErrTimeout, path, err)
		}
		return nil, fmt.Errorf("%w: %s: %w", tron.ErrUnavailable, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	if err != nil {
		if isTimeout(ctx, err) {
			return nil, fmt.Errorf("%w: %s: reading answer: %w", tron.ErrTimeout, path, err)
		}
		return nil, fmt.Errorf("%w: %s: reading answer: %w", tron.ErrUnavailable, path, err)
	}
	switch {
	case resp.StatusCode == http.StatusGatewayTimeout || resp.StatusCode == http.StatusRequestTimeout:
		return nil, fmt.Errorf("%w: %s: HTTP %d: %s", tron.ErrTimeout, path, resp.StatusCode, c.snippet(data))
	case isRateLimit(resp.StatusCode, data) || resp.StatusCode == http.StatusServiceUnavailable:
		wait := c.retryAfter(resp.Header, data)
		c.backOff(base, wait)
		return nil, fmt.Errorf("%w: %s: HTTP %d (retry after %v): %s", tron.ErrUnavailable, path, resp.StatusCode, wait, c.snippet(data))
	case resp.StatusCode >= 500:
		return nil, fmt.Errorf("%w: %s: HTTP %d: %s", tron.ErrUnavailable, path, resp.StatusCode, c.snippet(data))
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%w: %s: HTTP %d: %s", tron.ErrBadResponse, path, resp.StatusCode, c.snippet(data))
	}
	var e errorResponse
	if json.Unmarshal(data, &e) == nil && e.Error != "" {
		return nil, fmt.Errorf("%w: %s: node error: %s", tron.ErrBadResponse, path, c.snippet([]byte(e.Error)))
	}
	return data, nil
}

func isTimeout(ctx context.Context, err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// snippet is b shortened for an error message, with the API key cut out
// should a node (or a proxy) echo it back.
func (c *Client) snippet(b []byte) string {
	const max = 200
	s := strings.TrimSpace(string(b))
	if c.apiKey != "" {
		s = strings.ReplaceAll(s, c.apiKey, "[api key]")
	}
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

// Broadcast posts the serialised protocol.Transaction to /wallet/broadcasthex,
// so the node receives the exact raw bytes that were hashed and signed.
func (c *Client) Broadcast(ctx context.Context, tx tron.SignedTx) (tron.BroadcastResult, error) {
	txid := tx.TxID()
	var resp broadcastResponse
	err := c.post(ctx, "/wallet/broadcasthex", broadcastHexRequest{Transaction: hex.EncodeToString(tx.Marshal())}, &resp)
	if err != nil {
		return tron.BroadcastResult{TxID: txid}, err
	}
	res := tron.BroadcastResult{TxID: txid, Code: tron.BroadcastCode(resp.Code), Message: decodeMessage(resp.Message)}
	if resp.Result && res.Code == "" {
		res.Code = tron.CodeSuccess
	}
	if res.Code == "" {
		// result:false without a code is not something java-tron sends;
		// leave the code empty, which classifies as ambiguous.
		res.Message = strings.TrimSpace(res.Message + " (no code in answer)")
	}
	if resp.TxID != "" && !strings.EqualFold(resp.TxID, tron.HexID(txid)) {
		// The node hashed different bytes than we did (it re-serialised a
		// non-canonical encoding, or is not talking about our transaction).
		return res, fmt.Errorf("%w: node answered for txid %s, sent %s", tron.ErrBadResponse, resp.TxID, tron.HexID(txid))
	}
	return res, nil
}

// decodeMessage turns java-tron's hex-encoded message bytes into text; a
// message that is not hex (or not text) is returned as it came.
func decodeMessage(m string) string {
	if m == "" || len(m)%2 != 0 {
		return m
	}
	b, err := hex.DecodeString(m)
	if err != nil || !utf8.Valid(b) {
		return m
	}
	return string(b)
}

// Only a body that is exactly {} means "the node has nothing": java-tron's
// answer. Anything else without the asked id (null, {"Error":""}, a
// gateway's {"error":{...}} or {"statusCode":429,...}) is a non-answer,
// tron.ErrBadResponse, so the saga waits instead of reading it as unknown.
//
// Lookup asks /wallet/gettransactioninfobyid; when that has nothing, it
// checks /wallet/gettransactionbyid and /wallet/gettransactionfrompending to
// tell Pending from Unknown. A transaction the node has in a block but
// without info yet is reported Pending (ask again), never Unknown.
func (c *Client) Lookup(ctx context.Context, txid [32]byte) (tron.TxStatus, error) {
	st, found, err := c.info(ctx, "/wallet/gettransactioninfobyid", txid)
	if err != nil || found {
		return st, err
	}
	for _, path := range []string{"/wallet/gettransactionbyid", "/wallet/gettransactionfrompending"} {
		data, err := c.call(ctx, path, valueRequest{Value: tron.HexID(txid)})
		if err != nil {
			return tron.TxStatus{}, err
		}
		if isEmptyObject(data) {
			continue
		}
		var tj transactionJSON
		if err := json.Unmarshal(data, &tj); err != nil {
			return tron.TxStatus{}, fmt.Errorf("%w: %s: %w", tron.ErrBadResponse, path, err)
		}
		if !strings.EqualFold(tj.TxID, tron.HexID(txid)) {
			return tron.TxStatus{}, fmt.Errorf("%w: %s: answer for txID %q, asked %s: %s",
				tron.ErrBadResponse, path, tj.TxID, tron.HexID(txid), c.snippet(data))
		}
		return tron.TxStatus{State: tron.TxPending}, nil
	}
	return tron.TxStatus{State: tron.TxUnknown}, nil
}

// SolidLookup asks /walletsolidity/gettransactioninfobyid: included once
// solid, otherwise unknown.
func (c *Client) SolidLookup(ctx context.Context, txid [32]byte) (tron.TxStatus, error) {
	st, _, err := c.info(ctx, "/walletsolidity/gettransactioninfobyid", txid)
	return st, err
}

func (c *Client) info(ctx context.Context, path string, txid [32]byte) (tron.TxStatus, bool, error) {
	data, err := c.call(ctx, path, valueRequest{Value: tron.HexID(txid)})
	if err != nil {
		return tron.TxStatus{}, false, err
	}
	if isEmptyObject(data) {
		return tron.TxStatus{State: tron.TxUnknown}, false, nil
	}
	var info transactionInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return tron.TxStatus{}, false, fmt.Errorf("%w: %s: %w", tron.ErrBadResponse, path, err)
	}
	if !strings.EqualFold(info.ID, tron.HexID(txid)) || info.BlockNumber <= 0 {
		return tron.TxStatus{}, false, fmt.Errorf("%w: %s: info for %q in block %d, asked %s: %s",
			tron.ErrBadResponse, path, info.ID, info.BlockNumber, tron.HexID(txid), c.snippet(data))
	}
	st := tron.TxStatus{
		State:       tron.TxIncluded,
		BlockNumber: info.BlockNumber,
		BlockTime:   info.BlockTimeStamp,
		Receipt:     tron.ReceiptResult(info.Receipt.Result),
		Message:     decodeMessage(info.ResMessage),
		FeeSun:      info.Fee,
		EnergyUsed:  info.Receipt.EnergyUsageTotal,
	}
	return st, true, nil
}

// Head returns /wallet/getnowblock's header.
func (c *Client) Head(ctx context.Context) (tron.BlockHeader, error) {
	return c.block(ctx, "/wallet/getnowblock")
}

// SolidHead returns /walletsolidity/getnowblock's header.
func (c *Client) SolidHead(ctx context.Context) (tron.BlockHeader, error) {
	return c.block(ctx, "/walletsolidity/getnowblock")
}

// RefBlock is the solid head.
func (c *Client) RefBlock(ctx context.Context) (tron.BlockHeader, error) {
	return c.SolidHead(ctx)
}

func (c *Client) block(ctx context.Context, path string) (tron.BlockHeader, error) {
	var br blockResponse
	if err := c.post(ctx, path, struct{}{}, &br); err != nil {
		return tron.BlockHeader{}, err
	}
	return parseHeader(path, br)
}

// parseHeader reads and checks a block's header fields.
func parseHeader(path string, br blockResponse) (tron.BlockHeader, error) {
	id, err := hex.DecodeString(br.BlockID)
	if err != nil || len(id) != 32 {
		return tron.BlockHeader{}, fmt.Errorf("%w: %s: blockID %q", tron.ErrBadResponse, path, br.BlockID)
	}
	b := tron.BlockHeader{Number: br.BlockHeader.RawData.Number, Timestamp: br.BlockHeader.RawData.Timestamp}
	copy(b.ID[:], id)
	// java-tron block ids begin with the block number: a mismatch means the
	// answer is not a block header we can take TAPoS fields from.
	if int64(binary.BigEndian.Uint64(b.ID[:8])) != b.Number || b.Timestamp <= 0 {
		return tron.BlockHeader{}, fmt.Errorf("%w: %s: block %d (id %s, time %d) is inconsistent",
			tron.ErrBadResponse, path, b.Number, br.BlockID, b.Timestamp)
	}
	return b, nil
}

// SolidBlockByNum asks /walletsolidity/getblockbynum. java-tron answers {}
// for a block its solidity view does not have: that (and only that) is
// tron.ErrBlockNotSolid. A block whose number, id, parent or transaction
// ids do not hold together is tron.ErrBadResponse.
func (c *Client) SolidBlockByNum(ctx context.Context, num int64) (tron.Block, error) {
	b, _, err := c.solidBlock(ctx, num)
	return b, err
}

// solidBlock reads and checks solid block num; the raw answer comes along
// for callers that decode its transactions. TxIDs[i] is Transactions[i]'s.
func (c *Client) solidBlock(ctx context.Context, num int64) (tron.Block, blockResponse, error) {
	const path = "/walletsolidity/getblockbynum"
	var br blockResponse
	data, err := c.call(ctx, path, numRequest{Num: num})
	if err != nil {
		return tron.Block{}, br, err
	}
	if isEmptyObject(data) {
		return tron.Block{}, br, fmt.Errorf("tronhttp: %s: block %d: %w", path, num, tron.ErrBlockNotSolid)
	}
	if err := json.Unmarshal(data, &br); err != nil {
		return tron.Block{}, br, fmt.Errorf("%w: %s: %w", tron.ErrBadResponse, path, err)
	}
	h, err := parseHeader(path, br)
	if err != nil {
		return tron.Block{}, br, err
	}
	if h.Number != num {
		return tron.Block{}, br, fmt.Errorf("%w: %s: asked block %d, got %d", tron.ErrBadResponse, path, num, h.Number)
	}
	b := tron.Block{Header: h}
	if p := br.BlockHeader.RawData.ParentHash; p != "" {
		if err := decodeID(p, &b.ParentID); err != nil {
			return tron.Block{}, br, fmt.Errorf("%w: %s: block %d parentHash %q", tron.ErrBadResponse, path, num, p)
		}
	}
	for _, tj := range br.Transactions {
		var id [32]byte
		if err := decodeID(tj.TxID, &id); err != nil {
			return tron.Block{}, br, fmt.Errorf("%w: %s: block %d txID %q", tron.ErrBadResponse, path, num, tj.TxID)
		}
		// The txid is the hash of the raw bytes: when the node sends them,
		// hold it to that.
		if tj.RawDataHex != "" {
			raw, err := hex.DecodeString(tj.RawDataHex)
			if err != nil || tron.TxID(raw) != id {
				return tron.Block{}, br, fmt.Errorf("%w: %s: block %d: txID %s is not the hash of its raw_data_hex",
					tron.ErrBadResponse, path, num, tj.TxID)
			}
		}
		b.TxIDs = append(b.TxIDs, id)
	}
	return b, br, nil
}

// SolidTxInfosByBlockNum asks /walletsolidity/gettransactioninfobyblocknum.
// java-tron answers [] for a block it does not have as for an empty one, so
// the list proves nothing about absence (see tron.Node).
func (c *Client) SolidTxInfosByBlockNum(ctx context.Context, num int64) ([]tron.TxInfo, error) {
	return c.txInfosByBlockNum(ctx, "/walletsolidity/gettransactioninfobyblocknum", num)
}

// TxInfosByBlockNum asks /wallet/gettransactioninfobyblocknum: the same
// answer for a block of the full node's head view, solid or not. A block
// not solid yet can be replaced in a fork, and [] is also the answer for
// a block the node does not have: a hint, never proof (see tron.Node).
func (c *Client) TxInfosByBlockNum(ctx context.Context, num int64) ([]tron.TxInfo, error) {
	return c.txInfosByBlockNum(ctx, "/wallet/gettransactioninfobyblocknum", num)
}

func (c *Client) txInfosByBlockNum(ctx context.Context, path string, num int64) ([]tron.TxInfo, error) {
	data, err := c.call(ctx, path, numRequest{Num: num})
	if err != nil {
		return nil, err
	}
	var infos []transactionInfo
	if !bytes.HasPrefix(bytes.TrimSpace(data), []byte("[")) {
		return nil, fmt.Errorf("%w: %s: not a list: %s", tron.ErrBadResponse, path, c.snippet(data))
	}
	if err := json.Unmarshal(data, &infos); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", tron.ErrBadResponse, path, err)
	}
	out := make([]tron.TxInfo, 0, len(infos))
	for _, in := range infos {
		ti := tron.TxInfo{
			BlockNumber: in.BlockNumber,
			BlockTime:   in.BlockTimeStamp,
			Receipt:     tron.ReceiptResult(in.Receipt.Result),
			Message:     decodeMessage(in.ResMessage),
			FeeSun:      in.Fee,
			EnergyUsed:  in.Receipt.EnergyUsageTotal, EnergyFromStake: in.Receipt.EnergyUsage, EnergyFeeSun: in.Receipt.EnergyFee,
			NetUsage: in.Receipt.NetUsage, NetFeeSun: in.Receipt.NetFee,
		}
		if err := decodeID(in.ID, &ti.TxID); err != nil || in.BlockNumber != num {
			return nil, fmt.Errorf("%w: %s: info for %q in block %d, asked block %d",
				tron.ErrBadResponse, path, in.ID, in.BlockNumber, num)
		}
		out = append(out, ti)
	}
	return out, nil
}

// isEmptyObject reports whether a body is exactly the JSON object {}
// (whitespace around it allowed): java-tron's "nothing here".
func isEmptyObject(data []byte) bool {
	return string(bytes.TrimSpace(data)) == "{}"
}

func decodeID(s string, into *[32]byte) error {
	b, err := hex.DecodeString(s)
	if err != nil {
		return err
	}
	if len(b) != 32 {
		return fmt.Errorf("%d bytes, want 32", len(b))
	}
	copy(into[:], b)
	return nil
}
