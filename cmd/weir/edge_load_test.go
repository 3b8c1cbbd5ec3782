package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// openFiles counts this process's file descriptors (-1 where /proc is
// not there).
func openFiles() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// idleHealthz opens a keep-alive connection from src, asks /healthz once
// and leaves the connection open and idle; nil when the server refused it.
func idleHealthz(src, addr string) net.Conn {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: weir\r\n\r\n"); err != nil {
		_ = c.Close()
		return nil
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		_ = c.Close()
		return nil
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	_ = c.SetDeadline(time.Time{})
	return c
}

// Finding "connection flood breaks the store until restart": 19,990 idle
// keep-alive /healthz connections took every file descriptor, JetStream
// logged a critical write error, and every POST answered 503 afterwards.
// A bounded loopback flood (12 addresses × 24 idle connections against a
// 64-connection cap, 16 per address) now takes at most the cap: the
// process's descriptors stay bounded, writes from another address succeed
// during the flood (idle connections are evicted to make room), and after
// it, without a restart.
func TestIdleConnectionFloodDoesNotBreakWrites(t *testing.T) {
	const maxConns, perAddr = 64, 16
	cfg := serveConfig{
		Data: t.TempDir(), HTTP: "127.0.0.1:0", NATSAddr: "127.0.0.1:0", Sync: "always", Workers: 0,
		TronHTTP: "", SimBlockInterval: time.Hour, SimSolidityLag: 1, DailyLimit: "0", LogLevel: "warn",
		MaxConns: maxConns, MaxConnsPerAddr: perAddr,
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := startEngine(context.Background(), cfg, log, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close(context.Background()) })
	c := httpClient{t: t, base: "http://" + eng.httpAddr}
	if code, _, body := c.do("POST", "/v1/accounts/flood/credits", "dev-olivia-token", `{"credit_id":"c1","amount":"1000"}`); code != 201 {
		t.Fatalf("credit: %d %v", code, body)
	}
	seq := 0
	write := func(phase string) {
		t.Helper()
		seq++
		body := fmt.Sprintf(`{"operation_id":"f1000000-0000-4000-8000-%012d","account":"flood","to_address":"TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZY","amount":"1"}`, seq)
		if code, _, w := c.do("POST", "/v1/withdrawals", "dev-alice-token", body); code != 201 {
			t.Fatalf("%s: POST /v1/withdrawals %d %v", phase, code, w)
		}
	}
	write("before the flood")
	before := openFiles()

	var flood []net.Conn
	held := 0
	for a := 2; a <= 13; a++ {
		for range 24 {
			if conn := idleHealthz(fmt.Sprintf("127.0.0.%d", a), eng.httpAddr); conn != nil {
				flood = append(flood, conn)
				held++
			}
		}
	}
	t.Cleanup(func() {
		for _, conn := range flood {
			_ = conn.Close()
		}
	})
	// This process holds the flood's client ends too: the server's share
	// is what grew beyond them.
	serverSide := openFiles() - before - len(flood)
	st := eng.httpLimit.Stats()
	refused, evicted := st.Refused, st.Evicted
	t.Logf("flood: %d of %d connections answered (%d refused, %d evicted idle); server descriptors grew by %d",
		held, 12*24, refused, evicted, serverSide)
	if held <= maxConns || evicted == 0 || refused == 0 {
		t.Fatalf("%d flood connections served, %d evicted, %d refused: the test did not reach both caps", held, evicted, refused)
	}
	if before >= 0 && serverSide > maxConns+8 {
		t.Fatalf("the server's open files grew by %d under the flood; the cap is %d connections", serverSide, maxConns)
	}
	for i := range 10 {
		write(fmt.Sprintf("during the flood (%d)", i))
	}
	if code, _, h := c.do("GET", "/healthz", "", ""); code != 200 {
		t.Fatalf("healthz during the flood: %d %v", code, h)
	}
	metrics := c.text("/metrics")
	for _, m := range []string{"weir_http_connections_open ", "weir_http_connections_refused_total " + fmt.Sprint(refused), "weir_http_connections_evicted_total "} {
		if !strings.Contains(metrics, m) {
			t.Fatalf("/metrics lacks %q", m)
		}
	}

	for _, conn := range flood {
		_ = conn.Close()
	}
	flood = nil
	for i := range 5 {
		write(fmt.Sprintf("after the flood (%d)", i))
	}
	if _, _, acct := c.do("GET", "/v1/accounts/flood", "dev-alice-token", ""); acct["reserved"] != fmt.Sprint(seq) {
		t.Fatalf("account after %d writes: %v", seq, acct)
	}
}
