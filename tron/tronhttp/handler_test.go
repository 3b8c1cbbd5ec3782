package tronhttp_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/weir-payouts/weir/tron"
	"github.com/weir-payouts/weir/tron/tronhttp"
)

func signedTransfer(t *testing.T, sim *tron.SimNode, label string) tron.SignedTx {
	t.Helper()
	k := sha256.Sum256([]byte(label))
	s, err := tron.NewKeySigner(k[:])
	if err != nil {
		t.Fatal(err)
	}
	env, err := tron.BuildTransfer(tron.TransferParams{
		Owner: s.Address(), To: tron.USDTContract, Amount: big.NewInt(42),
		RefBlock: sim.CurrentSolidHead(), Timestamp: sim.CurrentHead().Timestamp,
	})
	if err != nil {
		t.Fatal(err)
	}
	sig, _ := s.Sign(context.Background(), env.TxID)
	return tron.SignedTx{Raw: env.Raw, Signature: sig}
}

func postJSON(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %q is not JSON: %v", url, b, err)
	}
	return resp.StatusCode, out
}

func TestHandlerSpeaksJavaTronShapes(t *testing.T) {
	sim := tron.NewSimNode(tron.SimConfig{})
	srv := httptest.NewServer(tronhttp.NewHandler(sim))
	defer srv.Close()
	tx := signedTransfer(t, sim, "shapes")
	txid := tron.HexID(tx.TxID())

	_, out := postJSON(t, srv.URL+"/wallet/gettransactioninfobyid", `{"value":"`+txid+`"}`)
	if len(out) != 0 {
		t.Fatalf("unknown txid: %v, want {}", out)
	}

	bad := tron.SignedTx{Raw: tx.Raw, Signature: make([]byte, 65)}
	_, out = postJSON(t, srv.URL+"/wallet/broadcasthex", `{"transaction":"`+hex.EncodeToString(bad.Marshal())+`"}`)
	if out["code"] != "SIGERROR" || out["result"] != nil || !strings.Contains(out["message"].(string), "signature") {
		t.Fatalf("SIGERROR answer %v, want a plain-text message naming the signature", out)
	}

	_, out = postJSON(t, srv.URL+"/wallet/broadcasthex", `{"transaction":"`+hex.EncodeToString(tx.Marshal())+`"}`)
	if out["result"] != true || out["txid"] != txid {
		t.Fatalf("SUCCESS answer %v", out)
	}
	_, out = postJSON(t, srv.URL+"/wallet/gettransactionfrompending", `{"value":"`+txid+`"}`)
	if out["txID"] != txid || out["raw_data_hex"] != hex.EncodeToString(tx.Raw) {
		t.Fatalf("pending transaction %v", out)
	}

	sim.Advance(1)
	_, out = postJSON(t, srv.URL+"/wallet/gettransactioninfobyid", `{"value":"`+txid+`"}`)
	receipt, _ := out["receipt"].(map[string]any)
	if out["id"] != txid || out["blockNumber"] != float64(sim.CurrentHead().Number) || receipt["result"] != "SUCCESS" {
		t.Fatalf("info %v", out)
	}
	if logs, _ := out["log"].([]any); len(logs) != 1 {
		t.Fatalf("want one Transfer event log: %v", out["log"])
	}
	_, out = postJSON(t, srv.URL+"/walletsolidity/gettransactioninfobyid", `{"value":"`+txid+`"}`)
	if len(out) != 0 {
		t.Fatalf("not yet solid: %v", out)
	}
	resp, err := http.Get(srv.URL + "/wallet/gettransactionbyid?value=" + txid)
	if err != nil {
		t.Fatal(err)
	}
	var tj map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&tj)
	resp.Body.Close()
	if tj["txID"] != txid || tj["ret"] == nil {
		t.Fatalf("gettransactionbyid %v", tj)
	}

	_, out = postJSON(t, srv.URL+"/wallet/getnowblock", `{}`)
	header := out["block_header"].(map[string]any)["raw_data"].(map[string]any)
	head := sim.CurrentHead()
	if out["blockID"] != head.IDHex() || header["number"] != float64(head.Number) || header["timestamp"] != float64(head.Timestamp) {
		t.Fatalf("getnowblock %v", out)
	}

	_, out = postJSON(t, srv.URL+"/wallet/gettransactioninfobyid", `{"value":"nothex"}`)
	if out["Error"] == nil {
		t.Fatalf("bad value: %v, want {\"Error\":...}", out)
	}
	status, out := postJSON(t, srv.URL+"/wallet/broadcasthex", `{"transaction":"zz"}`)
	if status != http.StatusOK || out["code"] != "OTHER_ERROR" {
		t.Fatalf("garbage transaction: %d %v", status, out)
	}
	sim.Script(tron.ChannelHead, tron.FaultHeadTimeout)
	if status, _ := postJSON(t, srv.URL+"/walletsolidity/getnowblock", `{}`); status != http.StatusGatewayTimeout {
		t.Fatalf("simulated timeout answered %d, want 504", status)
	}
}

// A node that answers with something other than java-tron's shapes.
func stubNode(t *testing.T, status int, body string) *tronhttp.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return tronhttp.NewHTTPNode(srv.URL+"/", srv.Client())
}

func TestClientMapsTransportFailuresToTheErrorCatalogue(t *testing.T) {
	ctx := context.Background()
	sim := tron.NewSimNode(tron.SimConfig{})
	tx := signedTransfer(t, sim, "stub")
	tests := []struct {
		name   string
		status int
		body   string
		want   error
	}{
		{"gateway timeout", http.StatusGatewayTimeout, "", tron.ErrTimeout},
		{"server error", http.StatusInternalServerError, "boom", tron.ErrUnavailable},
		{"rate limited", http.StatusTooManyRequests, "", tron.ErrUnavailable},
		{"not found", http.StatusNotFound, "", tron.ErrBadResponse},
		{"not JSON", http.StatusOK, "<html>", tron.ErrBadResponse},
		{"servlet error", http.StatusOK, `{"Error":"class java.lang.NullPointerException"}`, tron.ErrBadResponse},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := stubNode(t, tc.status, tc.body)
			res, err := c.Broadcast(ctx, tx)
			if !errors.Is(err, tc.want) {
				t.Fatalf("broadcast err = %v, want %v", err, tc.want)
			}
			if tron.ClassifyBroadcast(res, err) != tron.OutcomeAmbiguous {
				t.Fatal("a failed broadcast must be ambiguous")
			}
			if _, err := c.Lookup(ctx, tx.TxID()); !errors.Is(err, tc.want) {
				t.Fatalf("lookup err = %v", err)
			}
			if _, err := c.Head(ctx); !errors.Is(err, tc.want) {
				t.Fatalf("head err = %v", err)
			}
		})
	}
}

func TestClientReadsAnswersDefensively(t *testing.T) {
	ctx := context.Background()
	sim := tron.NewSimNode(tron.SimConfig{})
	tx := signedTransfer(t, sim, "answers")

	// A code outside the taxonomy is kept and is ambiguous.
	res, err := stubNode(t, 200, `{"code":"SOMETHING_NEW","message":"6e6577"}`).Broadcast(ctx, tx)
	if err != nil || res.Code != "SOMETHING_NEW" || res.Message != "new" || !res.IsAmbiguous() {
		t.Fatalf("unknown code: %+v %v", res, err)
	}
	// Plain-text messages (some broadcasthex versions) pass through.
	res, _ = stubNode(t, 200, `{"code":"SIGERROR","message":"Validate signature error"}`).Broadcast(ctx, tx)
	if res.Message != "Validate signature error" || !res.IsHardReject() {
		t.Fatalf("plain message: %+v", res)
	}
	// SUCCESS for bytes the node hashed differently is not trusted.
	_, err = stubNode(t, 200, `{"result":true,"txid":"`+strings.Repeat("ab", 32)+`"}`).Broadcast(ctx, tx)
	if !errors.Is(err, tron.ErrBadResponse) {
		t.Fatalf("txid mismatch: %v", err)
	}
	// Info about another transaction is not taken as ours.
	_, err = stubNode(t, 200, `{"id":"`+strings.Repeat("cd", 32)+`","blockNumber":5}`).Lookup(ctx, tx.TxID())
	if !errors.Is(err, tron.ErrBadResponse) {
		t.Fatalf("foreign info: %v", err)
	}
	// A block whose id does not start with its number cannot serve TAPoS.
	_, err = stubNode(t, 200, `{"blockID":"`+strings.Repeat("00", 32)+`","block_header":{"raw_data":{"number":7,"timestamp":1}}}`).RefBlock(ctx)
	if !errors.Is(err, tron.ErrBadResponse) {
		t.Fatalf("inconsistent block: %v", err)
	}
}

func TestClientTimeoutIsErrTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select { // hold the request until the client gives up
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c := tronhttp.NewHTTPNode(srv.URL, srv.Client())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Head(ctx); !errors.Is(err, tron.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	unreachable := tronhttp.NewHTTPNode("http://127.0.0.1:1", nil)
	if _, err := unreachable.Head(context.Background()); !errors.Is(err, tron.ErrUnavailable) {
		t.Fatalf("unreachable: %v", err)
	}
}
