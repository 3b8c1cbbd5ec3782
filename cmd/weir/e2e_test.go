package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// weirBinary builds ./cmd/weir once per test run, into weirBinaryDir
// (removed by TestMain).
var weirBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "weir-e2e-bin")
	if err != nil {
		return "", err
	}
	weirBinaryDir.Store(dir)
	bin := filepath.Join(dir, "weir")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// weirBinaryDir is where weirBinary built the binary, if it did.
var weirBinaryDir atomic.Value

// TestMain removes the binary the end-to-end tests built (40 MB a run).
func TestMain(m *testing.M) {
	code := m.Run()
	if dir, ok := weirBinaryDir.Load().(string); ok {
		_ = os.RemoveAll(dir)
	}
	os.Exit(code)
}

// servedProcess is `weir serve` running as a real process.
type servedProcess struct {
	cmd     *exec.Cmd
	httpURL string
	natsURL string
	tronURL string
	stderr  *syncBuffer
	exited  chan error
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var listenLine = regexp.MustCompile(`msg="(HTTP API listening|embedded NATS listening|using external NATS|simulated TRON node serving java-tron HTTP API)".*? url=(\S+)`)

// startServe runs `weir serve` on free ports and waits (by reading its log,
// not by sleeping) until the HTTP API and NATS listeners are announced.
func startServe(t *testing.T, extra ...string) *servedProcess {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test starts a process")
	}
	bin, err := weirBinary()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"serve", "--data", t.TempDir(), "--http", "127.0.0.1:0", "--nats-addr", "127.0.0.1:0",
		"--tron-http", "127.0.0.1:0", "--sim-block-interval", "20ms", "--sim-solidity-lag", "2"}, extra...)
	// Flags given later win (the flag package keeps the last value).
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "WEIR_LOG_LEVEL=info")
	stderrPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &servedProcess{cmd: cmd, stderr: &syncBuffer{}, exited: make(chan error, 1)}
	cmd.Stdout = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderrPipe)
		var once sync.Once
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(p.stderr, line)
			if m := listenLine.FindStringSubmatch(line); m != nil {
				p.stderr.mu.Lock()
				switch m[1] {
				case "HTTP API listening":
					p.httpURL = m[2]
				case "simulated TRON node serving java-tron HTTP API":
					p.tronURL = m[2]
				default:
					p.natsURL = m[2]
				}
				ready := p.httpURL != "" && p.natsURL != ""
				p.stderr.mu.Unlock()
				if ready {
					once.Do(func() { close(found) })
				}
			}
		}
	}()
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("weir serve output:\n%s", p.stderr.String())
		}
	})
	select {
	case <-found:
	case err := <-p.exited:
		t.Fatalf("weir serve exited early: %v\n%s", err, p.stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("weir serve did not announce its listeners\n%s", p.stderr.String())
	}
	p.stderr.mu.Lock()
	defer p.stderr.mu.Unlock()
	return p
}

type httpClient struct {
	t    *testing.T
	base string
}

func (c httpClient) do(method, path, token, body string) (int, http.Header, map[string]any) {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &out); err != nil {
			c.t.Fatalf("%s %s: bad JSON %q: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode, resp.Header, out
}

// waitForState follows the withdrawal until it reaches want, by reading the
// API after each simulated block (the chain is what moves it on).
func (c httpClient) waitForState(id, token, want string, within time.Duration) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(within)
	var last map[string]any
	for time.Now().Before(deadline) {
		_, _, last = c.do("GET", "/v1/withdrawals/"+id, token, "")
		if last["state"] == want {
			return last
		}
		if last["terminal"] == true {
			break
		}
		<-time.After(20 * time.Millisecond) // one simulated block
	}
	c.t.Fatalf("withdrawal %s: want state %s, last seen %v", id, want, last)
	return nil
}

// TestServeWalkthrough drives the README walkthrough against `weir serve` as
// a real process on free ports: credit → request → duplicate → conflict →
// self-approval refused → two approvals → confirmed, then the balance.
func TestServeWalkthrough(t *testing.T) {
	p := startServe(t)
	c := httpClient{t: t, base: p.httpURL}
	const id = "6f1c2a1e-8d4b-4a51-9a7e-2f0c5b7d9e10"
	const to = "TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZY"

	if code, _, body := c.do("GET", "/healthz", "", ""); code != 200 || body["status"] != "ok" {
		t.Fatalf("healthz %d %v", code, body)
	}
	if code, _, body := c.do("POST", "/v1/accounts/acme/credits", "dev-olivia-token", `{"credit_id":"wire-001","amount":"5000"}`); code != 201 {
		t.Fatalf("credit: %d %v", code, body)
	}
	req := `{"operation_id":"` + id + `","account":"acme","to_address":"` + to + `","amount":"1500.00","asset":"USDT-TRC20"}`
	code, _, w := c.do("POST", "/v1/withdrawals", "dev-alice-token", req)
	if code != 201 || w["state"] != "requested" || w["amount"] != "1500" || w["required_approvals"] != float64(2) {
		t.Fatalf("request: %d %v", code, w)
	}
	dup := strings.Replace(req, `"1500.00"`, `"1500"`, 1)
	if code, h, _ := c.do("POST", "/v1/withdrawals", "dev-alice-token", dup); code != 200 || h.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("duplicate: %d %v", code, h)
	}
	conflict := strings.Replace(req, `"1500.00"`, `"1600"`, 1)
	if code, _, body := c.do("POST", "/v1/withdrawals", "dev-alice-token", conflict); code != 409 || errCode(body) != "idempotency_conflict" {
		t.Fatalf("conflict: %d %v", code, body)
	}
	if code, _, body := c.do("POST", "/v1/withdrawals/"+id+"/approve", "dev-alice-token", ""); code != 403 || errCode(body) != "self_approval" {
		t.Fatalf("self approval: %d %v", code, body)
	}
	if code, _, body := c.do("POST", "/v1/withdrawals/"+id+"/approve", "dev-bob-token", ""); code != 200 || body["state"] != "requested" {
		t.Fatalf("bob: %d %v", code, body)
	}
	if code, _, body := c.do("POST", "/v1/withdrawals/"+id+"/approve", "dev-carol-token", ""); code != 200 || body["state"] == "requested" {
		t.Fatalf("carol: %d %v", code, body)
	}
	done := c.waitForState(id, "dev-alice-token", "confirmed", 60*time.Second)
	if done["txid"] == nil {
		t.Fatalf("confirmed without txid: %v", done)
	}
	// The fee the payout burnt, from its receipt (issue 14.3).
	rs, _ := done["receipts"].([]any)
	var rc map[string]any
	if len(rs) == 1 {
		rc, _ = rs[0].(map[string]any)
	}
	if fee, _ := rc["fee_sun"].(float64); rc["result"] != "SUCCESS" || fee <= 0 || done["fee_burned_trx"] != rc["fee_trx"] {
		t.Fatalf("receipts %v, fee burnt %v", done["receipts"], done["fee_burned_trx"])
	}
	// The ledger saga settles after the confirmation is stored (its own
	// consumer): wait for it rather than race it.
	var acct map[string]any
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, _, acct = c.do("GET", "/v1/accounts/acme", "dev-alice-token", "")
		if acct["settled"] == "1500" || time.Now().After(deadline) {
			break
		}
	}
	if acct["available"] != "3500" || acct["reserved"] != "0" || acct["settled"] != "1500" {
		t.Fatalf("balance after payout: %v", acct)
	}
	metrics := c.text("/metrics")
	for _, want := range []string{"weir_projection_lag_events", "weir_projection_applied_sequence", `weir_api_requests_total{route="POST /v1/withdrawals",status="201",transport="http"}`,
		`weir_withdrawals{state="confirmed"} 1`, `weir_withdrawals{state="requested"} 0`, `weir_queue_depth{queue="in_flight"} 0`,
		`weir_queue_depth{queue="approvals"} 0`, "weir_inflight_oldest_age_seconds 0", "weir_ambiguous_withdrawals 0",
		`weir_node_requests_total{call="Broadcast",outcome="ok"}`, `weir_node_request_duration_seconds_count{call="Broadcast"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if code, _, list := c.do("GET", "/v1/withdrawals?state=confirmed", "dev-bob-token", ""); code != 200 || len(list["withdrawals"].([]any)) != 1 {
		t.Fatalf("list of confirmed: %d %v", code, list)
	}
	_, _, evs := c.do("GET", "/v1/withdrawals/"+id+"/events", "dev-alice-token", "")
	events, _ := evs["events"].([]any)
	// requested, funds_reserved, approval_recorded, approved,
	// envelope_built (claim + route + write-ahead), signed (+ the first
	// send's intent), confirmed.
	if len(events) < 7 {
		t.Fatalf("events: %v", evs)
	}
	// SIGTERM shuts down cleanly (exit 0).
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("serve exit after SIGTERM: %v", err)
		}
		p.exited <- nil
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}
	_ = context.Background
}

func errCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func (c httpClient) text(path string) string {
	c.t.Helper()
	resp, err := http.Get(c.base + path)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
