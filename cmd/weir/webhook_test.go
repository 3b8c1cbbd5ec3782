package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weir-payouts/weir/sagas/notify"
	"github.com/weir-payouts/weir/sagas/webhook"
)

// hookReceiver is a real HTTP receiver on a fixed loopback address that
// can go down and come back.
type hookReceiver struct {
	addr string
	srv  *http.Server
	got  chan *http.Request
	body chan []byte
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{got: make(chan *http.Request, 100), body: make(chan []byte, 100)}
	r.up(t, "127.0.0.1:0")
	t.Cleanup(r.down)
	return r
}

func (r *hookReceiver) up(t *testing.T, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.got <- req
		r.body <- b
		w.WriteHeader(http.StatusOK)
	})}
	r.srv = srv
	go func() { _ = srv.Serve(ln) }()
}

func (r *hookReceiver) down() {
	if r.srv != nil {
		_ = r.srv.Close()
		r.srv = nil
	}
}

// next waits for one delivery (bounded: the engine retries on the wall
// clock, every few milliseconds in these tests).
func (r *hookReceiver) next(t *testing.T) (*http.Request, notify.Notification, []byte) {
	t.Helper()
	select {
	case req := <-r.got:
		b := <-r.body
		var n notify.Notification
		if err := json.Unmarshal(b, &n); err != nil {
			t.Fatal(err)
		}
		return req, n, b
	case <-time.After(20 * time.Second):
		t.Fatal("no webhook delivery")
	}
	return nil, notify.Notification{}, nil
}

func startHookEngine(t *testing.T, data string, allowPrivate bool) (*engine, httpClient) {
	t.Helper()
	cfg := serveConfig{
		Data: data, HTTP: "127.0.0.1:0", NATSAddr: "127.0.0.1:0", Sync: "lazy", Workers: 0, memory: data == "",
		SimBlockInterval: 10 * time.Millisecond, SimSolidityLag: 1, DailyLimit: "0", LogLevel: "warn", TronHTTP: "",
		WebhookAllowPrivate: allowPrivate, webhookFirstRetry: 5 * time.Millisecond,
	}
	if cfg.memory {
		cfg.Data = t.TempDir()
	}
	eng, err := startEngine(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close(context.Background()) })
	return eng, httpClient{t: t, base: "http://" + eng.httpAddr}
}

func requestBody(n int) string {
	return fmt.Sprintf(`{"operation_id":"6b000000-0000-4000-8000-%012d","account":"dev","to_address":"TLsV52sRDL79HXGGm9yzwKibb6BeruhUzy","amount":"2","asset":"USDT-TRC20"}`, n)
}

// TestWebhooksOverHTTP: registration is an operator's, a loopback URL is
// refused unless --webhook-allow-private, the secret is shown once, each
// delivery is signed as documented, deliveries are listed and counted on
// /metrics, and a deleted webhook gets nothing more.
func TestWebhooksOverHTTP(t *testing.T) {
	rcv := newHookReceiver(t)
	hookURL := "http://" + rcv.addr + "/weir"

	_, strict := startHookEngine(t, "", false)
	st, _, body := strict.do("POST", "/v1/webhooks", "dev-olivia-token", `{"url":"`+hookURL+`","events":["withdrawal.state_changed"]}`)
	if st != http.StatusUnprocessableEntity || errCode(body) != webhook.CodeInvalidURL {
		t.Fatalf("loopback URL without --webhook-allow-private: %d %v", st, body)
	}
	for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/", "ftp://example.com/"} {
		if st, _, body := strict.do("POST", "/v1/webhooks", "dev-olivia-token", `{"url":"`+u+`"}`); st != 422 || errCode(body) != webhook.CodeInvalidURL {
			t.Fatalf("%s: %d %v", u, st, body)
		}
	}

	_, c := startHookEngine(t, "", true)
	if st, _, body := c.do("POST", "/v1/webhooks", "dev-alice-token", `{"url":"`+hookURL+`"}`); st != http.StatusForbidden {
		t.Fatalf("a non-operator registers: %d %v", st, body)
	}
	if st, _, body := c.do("POST", "/v1/webhooks", "dev-olivia-token", `{"url":"`+hookURL+`","events":["withdrawal.exploded"]}`); st != 422 {
		t.Fatalf("unknown event type: %d %v", st, body)
	}
	st, _, created := c.do("POST", "/v1/webhooks", "dev-olivia-token", `{"url":"`+hookURL+`","events":["withdrawal.state_changed"],"accounts":["dev"]}`)
	if st != http.StatusCreated {
		t.Fatalf("register: %d %v", st, created)
	}
	id, _ := created["id"].(string)
	secret, _ := created["secret"].(string)
	if id == "" || !strings.HasPrefix(secret, "whsec_") || created["url"] != hookURL {
		t.Fatalf("registration reply %v", created)
	}

	st, _, w := c.do("POST", "/v1/withdrawals", "dev-alice-token", requestBody(1))
	if st != http.StatusCreated {
		t.Fatalf("request: %d %v", st, w)
	}
	req, n, raw := rcv.next(t)
	if n.Withdrawal.ID != w["id"] || n.Withdrawal.State != "requested" || req.Header.Get(webhook.HeaderEventID) != n.EventID {
		t.Fatalf("delivery %s (Weir-Event-Id %s)", raw, req.Header.Get(webhook.HeaderEventID))
	}
	sig := req.Header.Get(webhook.HeaderSignature)
	ts, _, _ := strings.Cut(strings.TrimPrefix(sig, "t="), ",")
	var unix int64
	fmt.Sscan(ts, &unix)
	if want := webhook.Signature(secret, time.Unix(unix, 0), raw); sig != want || time.Since(time.Unix(unix, 0)) > time.Minute {
		t.Fatalf("Weir-Signature %q, want %q", sig, want)
	}

	// The secret is never shown again.
	st, _, list := c.do("GET", "/v1/webhooks", "dev-olivia-token", "")
	if st != 200 || strings.Contains(fmt.Sprint(list), secret) || !strings.Contains(fmt.Sprint(list), id) {
		t.Fatalf("list: %d %v", st, list)
	}
	if st, _, _ := c.do("GET", "/v1/webhooks", "dev-alice-token", ""); st != http.StatusForbidden {
		t.Fatalf("a non-operator lists webhooks: %d", st)
	}
	// The receiver has the delivery before the dispatcher has its 2xx
	// answer and records it: wait (bounded) for the record.
	var (
		ds         map[string]any
		deliveries []any
	)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, _, ds = c.do("GET", "/v1/webhooks/"+id+"/deliveries", "dev-olivia-token", "")
		deliveries, _ = ds["deliveries"].([]any)
		if st == 200 && len(deliveries) == 1 && deliveries[0].(map[string]any)["status"] == webhook.StatusDelivered || time.Now().After(deadline) {
			break
		}
	}
	if st != 200 || len(deliveries) != 1 || deliveries[0].(map[string]any)["status"] != webhook.StatusDelivered || ds["next_cursor"] != nil {
		t.Fatalf("deliveries: %d %v", st, ds)
	}
	// The list pages like every other: limit 1 to 1000, a cursor it gave out.
	for _, q := range []string{"limit=1001", "limit=0", "limit=x", "cursor=abc", "cursor=0"} {
		if st, _, body := c.do("GET", "/v1/webhooks/"+id+"/deliveries?"+q, "dev-olivia-token", ""); st != 422 {
			t.Fatalf("deliveries?%s: %d %v", q, st, body)
		}
	}
	if st, _, body := c.do("GET", "/v1/webhooks/"+id+"/deliveries?limit=1&cursor="+fmt.Sprint(deliveries[0].(map[string]any)["notify_seq"]), "dev-olivia-token", ""); st != 200 || len(body["deliveries"].([]any)) != 0 {
		t.Fatalf("the page after the only delivery: %d %v", st, body)
	}
	if m := c.text("/metrics"); !strings.Contains(m, `weir_webhook_deliveries_total{outcome="delivered"} 1`) {
		t.Fatalf("metrics:\n%s", grepLines(m, "weir_webhook"))
	}
	if m := c.text("/metrics"); !strings.Contains(m, "weir_notify_lag_events ") {
		t.Fatalf("no notification lag on /metrics:\n%s", grepLines(m, "weir_notify"))
	}

	if st, _, body := c.do("DELETE", "/v1/webhooks/"+id, "dev-olivia-token", ""); st != 200 {
		t.Fatalf("delete: %d %v", st, body)
	}
	if st, _, body := c.do("DELETE", "/v1/webhooks/wh_nosuch", "dev-olivia-token", ""); st != 404 {
		t.Fatalf("delete unknown: %d %v", st, body)
	}
	_, _, list = c.do("GET", "/v1/webhooks", "dev-olivia-token", "")
	if hooks, _ := list["webhooks"].([]any); len(hooks) != 0 {
		t.Fatalf("after delete: %v", list)
	}
	// A state change after the deletion: a webhook registered now gets it,
	// the deleted one does not.
	other := newHookReceiver(t)
	if st, _, body := c.do("POST", "/v1/webhooks", "dev-olivia-token", `{"url":"http://`+other.addr+`/weir"}`); st != http.StatusCreated {
		t.Fatalf("second registration: %d %v", st, body)
	}
	_, _, w2 := c.do("POST", "/v1/withdrawals", "dev-alice-token", requestBody(2))
	if _, n, _ := other.next(t); n.Withdrawal.ID != w2["id"] {
		t.Fatalf("the second webhook got %+v", n)
	}
	select {
	case r := <-rcv.got:
		t.Fatalf("delivered after deletion: %s", r.Header.Get(webhook.HeaderEventID))
	default:
	}
}

// TestWeirRestartedMidDeliveryDeliversOnceTheReceiverIsBack: the receiver
// is down while weir keeps retrying; weir stops and starts again on the
// same data directory; the receiver comes back and gets the notification,
// whose delivery record shows the attempts before and after the restart.
func TestWeirRestartedMidDeliveryDeliversOnceTheReceiverIsBack(t *testing.T) {
	data := t.TempDir()
	rcv := newHookReceiver(t)
	addr := rcv.addr
	rcv.down()
	eng, c := startHookEngine(t, data, true)
	st, _, created := c.do("POST", "/v1/webhooks", "dev-olivia-token", `{"url":"http://`+addr+`/weir"}`)
	if st != http.StatusCreated {
		t.Fatalf("register: %d %v", st, created)
	}
	id := created["id"].(string)
	st, _, w := c.do("POST", "/v1/withdrawals", "dev-alice-token", requestBody(1))
	if st != http.StatusCreated {
		t.Fatalf("request: %d %v", st, w)
	}
	attempts := func(c httpClient) float64 {
		_, _, ds := c.do("GET", "/v1/webhooks/"+id+"/deliveries", "dev-olivia-token", "")
		if d, _ := ds["deliveries"].([]any); len(d) > 0 {
			return d[len(d)-1].(map[string]any)["attempts"].(float64)
		}
		return 0
	}
	deadline := time.Now().Add(20 * time.Second)
	for attempts(c) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no failed attempts recorded")
		}
		<-time.After(10 * time.Millisecond) // the engine retries on the wall clock
	}
	if err := eng.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rcv.up(t, addr)
	_, c2 := startHookEngine(t, data, true)
	_, n, _ := rcv.next(t)
	if n.Withdrawal.ID != w["id"] {
		t.Fatalf("delivered %+v", n)
	}
	_, _, ds := c2.do("GET", "/v1/webhooks/"+id+"/deliveries", "dev-olivia-token", "")
	d := ds["deliveries"].([]any)
	first := d[len(d)-1].(map[string]any)
	for deadline := time.Now().Add(10 * time.Second); first["status"] != webhook.StatusDelivered; {
		if time.Now().After(deadline) {
			t.Fatalf("never recorded delivered: %v", first)
		}
		<-time.After(10 * time.Millisecond) // recorded right after the POST returns
		_, _, ds = c2.do("GET", "/v1/webhooks/"+id+"/deliveries", "dev-olivia-token", "")
		d = ds["deliveries"].([]any)
		first = d[len(d)-1].(map[string]any)
	}
	if first["attempts"].(float64) < 3 {
		t.Fatalf("attempts across the restart: %v", first)
	}
}
