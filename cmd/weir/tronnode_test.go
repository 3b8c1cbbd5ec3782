package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-payouts/weir/tron"
	"github.com/weir-payouts/weir/tron/tronhttp"
)

// fakeNode answers every request with a 500 whose page echoes the API key
// — except block 0 (mainnet's genesis: serve reads it before it starts) —
// and reports each request's path and headers.
func fakeNode(t *testing.T, seen chan<- *http.Request) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case seen <- r.Clone(context.Background()):
		default:
		}
		if b, _ := io.ReadAll(r.Body); r.URL.Path == "/walletsolidity/getblockbynum" && strings.ReplaceAll(string(b), " ", "") == `{"num":0}` {
			_, _ = io.WriteString(w, `{"blockID":"`+tron.MainnetGenesisID+`","block_header":{"raw_data":{}}}`)
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "upstream failed for key "+r.Header.Get(tronhttp.APIKeyHeader))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// weir serve against a real node: /walletsolidity/* goes to
// --tron-solidity-node, every request carries --tron-api-key as
// TRON-PRO-API-KEY and no internal header, and the key is in no log line —
// not even when the node echoes it back in the errors the worker logs.
func TestServeSendsTheAPIKeyToBothNodesButNeverLogsIt(t *testing.T) {
	const key = "b7c4e1d2-never-log-me"
	fullSeen, solidSeen := make(chan *http.Request, 64), make(chan *http.Request, 64)
	full, solid := fakeNode(t, fullSeen), fakeNode(t, solidSeen)
	keyFile := filepath.Join(t.TempDir(), "hot.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(devSigningKey[:])), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := serveConfig{
		Data: t.TempDir(), HTTP: "127.0.0.1:0", Sync: "lazy", Workers: 1, memory: true, DailyLimit: "0", LogLevel: "debug",
		TronNode: full, TronSolidityNode: solid, TronAPIKey: key, SigningKey: keyFile,
	}
	cfg.Principals, cfg.Custody = devFlagFiles(t) // a real node: no dev mode
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eng, err := startEngine(ctx, cfg, log, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c := httpClient{t: t, base: "http://" + eng.httpAddr}
	if code, _, body := c.do("POST", "/v1/accounts/ops/credits", "dev-olivia-token", `{"credit_id":"c1","amount":"100"}`); code != 201 {
		t.Fatalf("credit: %d %v", code, body)
	}
	body := `{"operation_id":"5e0b7c1a-1111-4222-8333-0000000000aa","account":"ops","to_address":"TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZY","amount":"30"}`
	if code, _, w := c.do("POST", "/v1/withdrawals", "dev-alice-token", body); code != 201 {
		t.Fatalf("request: %d %v", code, w)
	}
	if code, _, w := c.do("POST", "/v1/withdrawals/5e0b7c1a-1111-4222-8333-0000000000aa/approve", "dev-bob-token", ""); code != 200 {
		t.Fatalf("approve: %d %v", code, w)
	}
	// The worker's first node call is the head, on the full node.
	var fullReq *http.Request
	select {
	case fullReq = <-fullSeen:
	case <-ctx.Done():
		t.Fatalf("the worker never asked the node; log:\n%s", logs.String())
	}
	// The worker logs the failure before it asks again: a second request
	// means the log holds the node's error (with the echoed key, unless
	// it is redacted).
	select {
	case <-fullSeen:
	case <-ctx.Done():
		t.Fatalf("the worker never retried; log:\n%s", logs.String())
	}
	// The second request may come from another of the worker's reads than
	// the one that failed first: follow the log until the node's error is
	// in it (it is written asynchronously, by the worker).
	for !strings.Contains(logs.String(), "HTTP 500") {
		select {
		case <-fullSeen:
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			t.Fatalf("the node's error never reached the log:\n%s", logs.String())
		}
	}
	_, _ = eng.node.SolidHead(ctx)
	solidReq := <-solidSeen
	for name, r := range map[string]*http.Request{"solidity": solidReq, "full": fullReq} {
		if r.Header.Get(tronhttp.APIKeyHeader) != key || r.Header.Get(tronhttp.WorkerHeader) != "" {
			t.Fatalf("%s node got key %q, worker header %q", name, r.Header.Get(tronhttp.APIKeyHeader), r.Header.Get(tronhttp.WorkerHeader))
		}
	}
	if !strings.HasPrefix(solidReq.URL.Path, "/walletsolidity/") || !strings.HasPrefix(fullReq.URL.Path, "/wallet/") {
		t.Fatalf("solidity node asked %s, full node asked %s", solidReq.URL.Path, fullReq.URL.Path)
	}
	if err := eng.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if strings.Contains(out, key) {
		t.Fatalf("the API key is in the log:\n%s", out)
	}
	if !strings.Contains(out, "solidity_url="+solid) || !strings.Contains(out, "HTTP 500") {
		t.Fatalf("want the node set-up and the node's errors logged (so this grep means something):\n%s", out)
	}
}

func TestServeRefusesNodeFlagsWithoutANode(t *testing.T) {
	for _, flag := range [][]string{{"--tron-api-key", "k"}, {"--tron-solidity-node", "http://127.0.0.1:8091"}} {
		var stderr bytes.Buffer
		args := append([]string{"serve", "--data", t.TempDir(), "--http", "127.0.0.1:0", "--nats-addr", "", "--tron-http", ""}, flag...)
		if code := runMain(context.Background(), args, io.Discard, &stderr); code == 0 || !strings.Contains(stderr.String(), "need --tron-node") {
			t.Fatalf("%v: exit %d, stderr %q", flag, code, stderr.String())
		}
	}
}

// weir audit takes the same node flags: the key reaches both endpoints and
// is printed nowhere, even when the node is unreachable.
func TestAuditSendsTheAPIKeyToBothNodesButNeverPrintsIt(t *testing.T) {
	const key = "audit-key-4c2f-never-print"
	s := newStack(t, false)
	sim := tron.NewSimNode(tron.SimConfig{})
	sim.Advance(30)
	var mu sync.Mutex
	seen := map[string][]string{} // server → paths with the key
	serve := func(name string) string {
		h := tronhttp.NewHandler(sim)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(tronhttp.APIKeyHeader) != key || r.Header.Get(tronhttp.WorkerHeader) != "" {
				w.WriteHeader(http.StatusForbidden)
				return
			}
			mu.Lock()
			seen[name] = append(seen[name], r.URL.Path)
			mu.Unlock()
			h.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	full, solid := serve("full"), serve("solid")
	code, out, errOut := s.weir(t, "audit", "--all", "--tron-node", full, "--tron-solidity-node", solid, "--tron-api-key", key)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "audit with a key", out, "OK: every check holds")
	if strings.Contains(out+errOut, key) {
		t.Fatalf("the key was printed:\n%s\n%s", out, errOut)
	}
	mu.Lock()
	if len(seen["solid"]) == 0 {
		t.Fatalf("the audit never asked the solidity node (full node asked %v)", seen["full"])
	}
	for _, p := range seen["solid"] {
		if !strings.HasPrefix(p, "/walletsolidity/") {
			t.Fatalf("solidity node asked %s", p)
		}
	}
	for _, p := range seen["full"] {
		if strings.HasPrefix(p, "/walletsolidity/") {
			t.Fatalf("full node asked %s", p)
		}
	}
	mu.Unlock()
	code, out, errOut = s.weir(t, "audit", "--all", "--tron-node", "http://127.0.0.1:1", "--tron-api-key", key)
	if strings.Contains(out+errOut, key) {
		t.Fatalf("exit %d; the key was printed:\n%s\n%s", code, out, errOut)
	}
}
