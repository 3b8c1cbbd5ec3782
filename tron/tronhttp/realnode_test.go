package tronhttp_test

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-payouts/weir/tron"
	"github.com/weir-payouts/weir/tron/tronhttp"
)

// Bodies real gateways and nodes have answered with HTTP 200 that are not
// java-tron's "nothing here" ({}): each is a non-answer, never "unknown".
var nonAnswers = map[string]string{
	"null":                  `null`,
	"empty Error":           `{"Error":""}`,
	"gateway error object":  `{"error":{"code":429,"message":"rate limited"}}`,
	"statusCode 429":        `{"statusCode":429,"message":"Too Many Requests"}`,
	"other object":          `{"foo":1}`,
	"array":                 `[]`,
	"string":                `""`,
	"empty body":            ``,
	"id empty":              `{"id":""}`,
	"Error with whitespace": `{"Error":" "}`,
}

// A node that answers body to path (every other path: {}).
func stubPaths(t *testing.T, bodies map[string]string) *tronhttp.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := bodies[r.URL.Path]
		if !ok {
			body = "{}\n"
		}
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return tronhttp.NewHTTPNode(srv.URL, srv.Client())
}

func TestOnlyAnEmptyObjectFromGetTransactionInfoByIDMeansNotFound(t *testing.T) {
	ctx := context.Background()
	var txid [32]byte
	txid[0] = 7
	for _, empty := range []string{"{}", "{}\n", " {}\r\n"} {
		c := stubPaths(t, map[string]string{"/wallet/gettransactioninfobyid": empty, "/walletsolidity/gettransactioninfobyid": empty})
		if st, err := c.SolidLookup(ctx, txid); err != nil || st.State != tron.TxUnknown {
			t.Fatalf("%q: solid lookup %v, %v; want unknown", empty, st, err)
		}
		if st, err := c.Lookup(ctx, txid); err != nil || st.State != tron.TxUnknown {
			t.Fatalf("%q: lookup %v, %v; want unknown", empty, st, err)
		}
	}
	for name, body := range nonAnswers {
		t.Run(name, func(t *testing.T) {
			for _, path := range []string{"/wallet/gettransactioninfobyid", "/walletsolidity/gettransactioninfobyid"} {
				c := stubPaths(t, map[string]string{path: body})
				lookup := c.Lookup
				if strings.HasPrefix(path, "/walletsolidity/") {
					lookup = c.SolidLookup
				}
				if st, err := lookup(ctx, txid); !errors.Is(err, tron.ErrBadResponse) {
					t.Fatalf("%s answering %q: %v, %v; want ErrBadResponse (the saga waits), never unknown", path, body, st, err)
				}
			}
		})
	}
}

// Lookup's pending checks read {} as "not there" too, and nothing else.
func TestLookupPendingChecksTakeOnlyAnEmptyObjectAsAbsent(t *testing.T) {
	ctx := context.Background()
	var txid [32]byte
	for name, body := range nonAnswers {
		for _, path := range []string{"/wallet/gettransactionbyid", "/wallet/gettransactionfrompending"} {
			c := stubPaths(t, map[string]string{path: body})
			if st, err := c.Lookup(ctx, txid); !errors.Is(err, tron.ErrBadResponse) {
				t.Fatalf("%s: %s answering %q: %v, %v; want ErrBadResponse", name, path, body, st, err)
			}
		}
	}
}

func TestSolidBlockAndReceiptsRejectNonAnswers(t *testing.T) {
	ctx := context.Background()
	for name, body := range nonAnswers {
		c := stubPaths(t, map[string]string{"/walletsolidity/getblockbynum": body, "/walletsolidity/gettransactioninfobyblocknum": body,
			"/wallet/gettransactioninfobyblocknum": body})
		if b, err := c.SolidBlockByNum(ctx, 5); !errors.Is(err, tron.ErrBadResponse) {
			t.Fatalf("%s: block %+v, %v; want ErrBadResponse (only {} is ErrBlockNotSolid)", name, b, err)
		}
		if body == `[]` {
			continue // java-tron's answer for an empty block
		}
		if infos, err := c.SolidTxInfosByBlockNum(ctx, 5); !errors.Is(err, tron.ErrBadResponse) {
			t.Fatalf("%s: infos %+v, %v; want ErrBadResponse", name, infos, err)
		}
		if infos, err := c.TxInfosByBlockNum(ctx, 5); !errors.Is(err, tron.ErrBadResponse) {
			t.Fatalf("%s: head block infos %+v, %v; want ErrBadResponse", name, infos, err)
		}
	}
}

// recorder is a node that remembers every request's path and headers and
// answers from answer (nil: {}).
type recorder struct {
	mu      sync.Mutex
	paths   []string
	headers []http.Header
	answer  func(n int, w http.ResponseWriter, r *http.Request)
}

func (rec *recorder) serve(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.paths = append(rec.paths, r.URL.Path)
		rec.headers = append(rec.headers, r.Header.Clone())
		n := len(rec.paths)
		rec.mu.Unlock()
		if rec.answer != nil {
			rec.answer(n, w, r)
			return
		}
		_, _ = io.WriteString(w, "{}")
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func (rec *recorder) seen() ([]string, []http.Header) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]string(nil), rec.paths...), append([]http.Header(nil), rec.headers...)
}

// A self-hosted java-tron serves /walletsolidity/* on another port than
// /wallet/*: each call must go to the node that serves its view.
func TestSolidityCallsGoToTheSolidityNode(t *testing.T) {
	ctx := context.Background()
	var full, solid recorder
	c := tronhttp.New(tronhttp.Config{URL: full.serve(t), SolidityURL: solid.serve(t) + "/"})
	var txid [32]byte
	_, _ = c.Head(ctx)
	_, _ = c.Lookup(ctx, txid)
	_, _ = c.SolidHead(ctx)
	_, _ = c.RefBlock(ctx)
	_, _ = c.SolidLookup(ctx, txid)
	_, _ = c.SolidBlockByNum(ctx, 3)
	_, _ = c.SolidTxInfosByBlockNum(ctx, 3)
	_, _ = c.TxInfosByBlockNum(ctx, 3)
	fullPaths, _ := full.seen()
	solidPaths, _ := solid.seen()
	if len(fullPaths) != 5 || len(solidPaths) != 5 {
		t.Fatalf("full node saw %v, solidity node saw %v", fullPaths, solidPaths)
	}
	for _, p := range fullPaths {
		if !strings.HasPrefix(p, "/wallet/") {
			t.Fatalf("full node was asked %s", p)
		}
	}
	for _, p := range solidPaths {
		if !strings.HasPrefix(p, "/walletsolidity/") {
			t.Fatalf("solidity node was asked %s", p)
		}
	}
}

// TronGrid wants its key in TRON-PRO-API-KEY, and it never shows in an
// error (so never in a log), even when the node echoes it back; weir's
// internal worker header is for its own simulated node only.
func TestAPIKeyIsSentAndInternalHeadersAreNot(t *testing.T) {
	const key = "3f1e-very-secret-key"
	ctx := tron.WithWorker(context.Background(), "worker-7")
	// A proxy that echoes the request headers into its error page.
	rec := recorder{answer: func(_ int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "boom: key="+r.Header.Get(tronhttp.APIKeyHeader))
	}}
	url := rec.serve(t)
	c := tronhttp.New(tronhttp.Config{URL: url, APIKey: key})
	_, err := c.Head(ctx)
	if !errors.Is(err, tron.ErrUnavailable) || strings.Contains(err.Error(), key) {
		t.Fatalf("err %v: want ErrUnavailable without the key in it", err)
	}
	_, _ = tronhttp.NewHTTPNode(url, nil).Head(ctx)
	_, headers := rec.seen()
	if len(headers) != 2 {
		t.Fatalf("%d requests", len(headers))
	}
	if got := headers[0].Get(tronhttp.APIKeyHeader); got != key {
		t.Fatalf("API key header %q, want the key", got)
	}
	if got := headers[1].Get(tronhttp.APIKeyHeader); got != "" {
		t.Fatalf("a client without a key sent %q", got)
	}
	for i, h := range headers {
		if v := h.Get(tronhttp.WorkerHeader); v != "" {
			t.Fatalf("request %d sent %s: %q to a third-party node", i, tronhttp.WorkerHeader, v)
		}
	}
}

// TronGrid's 403 frequency-limit answer and HTTP 429 mean "not now": the
// call is unavailable (never a bad request), and the client sends nothing
// to that node until the wait the node named has passed.
func TestRateLimitIsUnavailableAndHonoursRetryAfter(t *testing.T) {
	tests := []struct {
		name   string
		status int
		header string
		body   string
		wait   time.Duration
	}{
		{"TronGrid 403 frequency limit", http.StatusForbidden, "",
			`{"Error":"The key exceeds the frequency limit(15), and the query server is suspended for 30s"}`, 30 * time.Second},
		{"429 Retry-After seconds", http.StatusTooManyRequests, "7", `{"statusCode":429,"message":"Too Many Requests"}`, 7 * time.Second},
		{"503 Retry-After", http.StatusServiceUnavailable, "2", "", 2 * time.Second},
		{"429 without a wait", http.StatusTooManyRequests, "", "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			rec := recorder{answer: func(n int, w http.ResponseWriter, _ *http.Request) {
				if n == 1 {
					if tc.header != "" {
						w.Header().Set("Retry-After", tc.header)
					}
					w.WriteHeader(tc.status)
					_, _ = io.WriteString(w, tc.body)
					return
				}
				_, _ = io.WriteString(w, "{}")
			}}
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			var clockMu sync.Mutex
			clock := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
			c := tronhttp.New(tronhttp.Config{URL: rec.serve(t), Now: clock})
			var txid [32]byte
			if _, err := c.SolidLookup(ctx, txid); !errors.Is(err, tron.ErrUnavailable) {
				t.Fatalf("rate-limited answer: %v, want ErrUnavailable", err)
			}
			if tc.wait > 0 {
				if _, err := c.SolidLookup(ctx, txid); !errors.Is(err, tron.ErrUnavailable) {
					t.Fatalf("call inside the wait: %v, want ErrUnavailable", err)
				}
				if paths, _ := rec.seen(); len(paths) != 1 {
					t.Fatalf("the node was asked %d times inside its Retry-After", len(paths))
				}
				clockMu.Lock()
				now = now.Add(tc.wait)
				clockMu.Unlock()
			}
			if st, err := c.SolidLookup(ctx, txid); err != nil || st.State != tron.TxUnknown {
				t.Fatalf("after the wait: %v, %v", st, err)
			}
		})
	}
	// A 403 that is not a frequency limit (a bad key) is not "try later".
	if _, err := stubNode(t, http.StatusForbidden, `{"Error":"ApiKey not exists"}`).Head(context.Background()); !errors.Is(err, tron.ErrBadResponse) {
		t.Fatalf("403 bad key: %v, want ErrBadResponse", err)
	}
}

// java-tron's BroadcastHexServlet prints Return.message as plain text.
func TestSimulatedBroadcastHexMessageIsPlainText(t *testing.T) {
	sim := tron.NewSimNode(tron.SimConfig{})
	srv := httptest.NewServer(tronhttp.NewHandler(sim))
	defer srv.Close()
	tx := signedTransfer(t, sim, "plain")
	sim.Script(tron.ChannelBroadcast, tron.FaultBusy)
	_, out := postJSON(t, srv.URL+"/wallet/broadcasthex", `{"transaction":"`+hex.EncodeToString(tx.Marshal())+`"}`)
	if out["code"] != "SERVER_BUSY" || out["message"] != "Server busy." {
		t.Fatalf("busy answer %v, want message \"Server busy.\" as plain text", out)
	}
}
