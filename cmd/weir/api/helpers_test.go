package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
	"github.com/weir-payouts/weir/projections"
	"github.com/weir-payouts/weir/projections/history"
	"github.com/weir-payouts/weir/sagas"
)

const testAddr = "TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC"

// Tokens of the test principals.
const (
	tokAlice  = "alice-token-0001" // requester, approver
	tokBob    = "bob-token-00002"  // approver
	tokCarol  = "carol-token-0003" // approver
	tokDave   = "dave-token-00004" // requester
	tokOlivia = "olivia-token-005" // operator, requester
	tokOscar  = "oscar-token-0006" // operator (a second pair of eyes)
	// Scoped to accounts (principals' "accounts").
	tokRia = "ria-token-00007" // requester, approver on acme only
	tokAbe = "abe-token-00008" // approver on ops-* only
	tokOli = "oli-token-00009" // operator on acme only
)

func testPrincipals(t *testing.T) *api.Principals {
	t.Helper()
	ps, err := api.NewPrincipals([]api.Principal{
		{Name: "alice", Token: tokAlice, Roles: []api.Role{api.RoleRequester, api.RoleApprover}},
		{Name: "bob", Token: tokBob, Roles: []api.Role{api.RoleApprover}},
		{Name: "carol", Token: tokCarol, Roles: []api.Role{api.RoleApprover}},
		{Name: "dave", Token: tokDave, Roles: []api.Role{api.RoleRequester}},
		{Name: "olivia", Token: tokOlivia, Roles: []api.Role{api.RoleOperator, api.RoleRequester}},
		{Name: "oscar", Token: tokOscar, Roles: []api.Role{api.RoleOperator}},
		{Name: "ria", Token: tokRia, Roles: []api.Role{api.RoleRequester, api.RoleApprover}, Accounts: []string{"acme"}},
		{Name: "abe", Token: tokAbe, Roles: []api.Role{api.RoleApprover}, Accounts: []string{"ops-*"}},
		{Name: "oli", Token: tokOli, Roles: []api.Role{api.RoleOperator}, Accounts: []string{"acme"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// fixedQueues serves fixed slices.
type fixedQueues struct {
	approvals, ready []aggregate.Withdrawal
	inFlight         []projections.InFlightItem
}

func (q fixedQueues) PendingApprovals() []aggregate.Withdrawal      { return q.approvals }
func (q fixedQueues) Ready(time.Time) []aggregate.Withdrawal        { return q.ready }
func (q fixedQueues) InFlight(time.Time) []projections.InFlightItem { return q.inFlight }

type env struct {
	emb     *eventstoretest.Server
	store   *eventstore.Store
	intake  *sagas.Intake
	srv     *httptest.Server
	nc      *nats.Conn // the service's connection
	client  *nats.Conn // a producer's connection
	svc     micro.Service
	metrics *api.Metrics
	health  *healthSwitch
}

type healthSwitch struct {
	mu  sync.Mutex
	err error
}

func (h *healthSwitch) set(err error) { h.mu.Lock(); h.err = err; h.mu.Unlock() }
func (h *healthSwitch) check(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

type envOpts struct {
	queues      api.Queues
	rateLimit   *api.RateLimiter
	maxInFlight int
	logger      *slog.Logger // nil: discard (or warnings in -v)
	degraded    func(context.Context) []string
	intake      func(*testing.T, *sagas.Repo, *sagas.Intake) // configures the intake before serving
	wallet      api.Wallet
}

// newEnv runs the real stack: embedded NATS (memory), the event store, the
// ledger saga consuming durably, the HTTP API on a real listener and the
// micro service on its own connection.
func newEnv(t *testing.T, opts ...envOpts) *env {
	t.Helper()
	var o envOpts
	if len(opts) > 0 {
		o = opts[0]
	}
	ctx, cancel := context.WithCancel(context.Background())
	emb := eventstoretest.Start(t)
	nc := emb.Conn()
	store := emb.StoreOn(ctx, nc, eventlog.NewRegistry())
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if o.logger != nil {
		logger = o.logger
	}
	repo := sagas.NewRepo(store)
	ledger := sagas.NewLedger(repo, aggregate.Amount{}, nil, logger)
	intake := sagas.NewIntake(repo, ledger, nil)
	if o.intake != nil {
		o.intake(t, repo, intake)
	}
	ledgerDone := make(chan struct{})
	go func() { defer close(ledgerDone); _ = ledger.Run(ctx) }()

	hist := startHistory(ctx, t, emb, store, logger)

	metrics := api.NewMetrics()
	health := &healthSwitch{}
	principals := testPrincipals(t)
	srv := httptest.NewServer(api.NewHTTPHandler(api.HTTPConfig{
		Intake: intake, Principals: principals, Queues: o.queues, History: hist, Health: health.check, Degraded: o.degraded,
		Metrics: metrics, Logger: logger, RateLimit: o.rateLimit, MaxInFlight: o.maxInFlight, Wallet: o.wallet,
	}))
	svc, err := api.StartService(nc, api.ServiceConfig{
		Intake: intake, Principals: principals, Queues: o.queues, History: hist, Version: "1.2.3", Metrics: metrics, Logger: logger,
		RateLimit: o.rateLimit,
	})
	if err != nil {
		t.Fatal(err)
	}
	client := emb.Conn()
	t.Cleanup(func() {
		client.Close()
		srv.Close()
		_ = svc.Stop()
		cancel()
		<-ledgerDone
		nc.Close()
		emb.Shutdown()
	})
	return &env{emb: emb, store: store, intake: intake, srv: srv, nc: nc, client: client, svc: svc, metrics: metrics, health: health}
}

// startHistory runs the history indexer on the test's store until ctx
// ends; lists wait for it to reach the log's end (read your writes).
func startHistory(ctx context.Context, t *testing.T, emb *eventstoretest.Server, store *eventstore.Store, logger *slog.Logger) api.History {
	t.Helper()
	js, err := jetstream.New(emb.Conn())
	if err != nil {
		t.Fatal(err)
	}
	stream, err := history.EnsureStream(ctx, js, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	x := history.NewIndexer(store, js, stream, logger)
	done := make(chan struct{})
	go func() { defer close(done); _ = x.Run(ctx) }()
	t.Cleanup(func() { <-done })
	return caughtUp{store: store, x: x, r: history.NewReader(stream)}
}

type caughtUp struct {
	store *eventstore.Store
	x     *history.Indexer
	r     *history.Reader
}

func (c caughtUp) Walk(ctx context.Context, account string, before uint64, fn func(history.Entry) (bool, error)) error {
	last, err := c.store.LastSequence(ctx)
	if err != nil {
		return err
	}
	if err := c.x.WaitFor(ctx, last); err != nil {
		return err
	}
	return c.r.Walk(ctx, account, before, fn)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// resp is an HTTP answer, read fully.
type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("status %d: body is not a JSON object: %v: %s", r.status, err, r.body)
	}
	return m
}

func (r resp) withdrawal(t *testing.T) aggregate.WithdrawalView {
	t.Helper()
	var v aggregate.WithdrawalView
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("status %d: %v: %s", r.status, err, r.body)
	}
	return v
}

func (r resp) errBody(t *testing.T) api.ErrorDetail {
	t.Helper()
	var b api.ErrorBody
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		t.Fatalf("status %d: not an error body: %v: %s", r.status, err, r.body)
	}
	return b.Error
}

// do sends an HTTP request; a string or []byte body is sent as is with
// Content-Type application/json, anything else is marshalled.
func (e *env) do(t *testing.T, method, path, token string, body any, hdr ...string) resp {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, e.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

// wantErr checks an error answer: status, code, field, and JSON content type.
func wantErr(t *testing.T, r resp, status int, code, field string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	e := r.errBody(t)
	if e.Code != code || e.Field != field {
		t.Fatalf("error %+v, want code %q field %q", e, code, field)
	}
	if e.Message == "" {
		t.Errorf("error %+v has no message", e)
	}
}

func wantStatus(t *testing.T, r resp, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
}

type reqBody map[string]any

func withdrawalBody(id, account, amount string) reqBody {
	return reqBody{"operation_id": id, "account": account, "to_address": testAddr, "amount": amount, "asset": "USDT-TRC20"}
}

// credit funds an account through the API.
func (e *env) credit(t *testing.T, account, creditID, amount string) {
	t.Helper()
	r := e.do(t, "POST", "/v1/accounts/"+account+"/credits", tokOlivia, reqBody{"credit_id": creditID, "amount": amount})
	wantStatus(t, r, http.StatusCreated)
}

// natsReq sends a NATS request with an optional token.
func (e *env) natsReq(t *testing.T, subject, token string, body any) *nats.Msg {
	t.Helper()
	var data []byte
	switch b := body.(type) {
	case nil:
	case string:
		data = []byte(b)
	default:
		var err error
		if data, err = json.Marshal(b); err != nil {
			t.Fatal(err)
		}
	}
	msg := nats.NewMsg(subject)
	msg.Data = data
	if token != "" {
		msg.Header.Set("Authorization", "Bearer "+token)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	m, err := e.client.RequestMsgWithContext(ctx, msg)
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	return m
}

// natsOK checks a success reply and decodes it into v.
func natsOK(t *testing.T, m *nats.Msg, v any) {
	t.Helper()
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		t.Fatalf("%s: error %s %s: %s", m.Subject, code, m.Header.Get(micro.ErrorHeader), m.Data)
	}
	if err := json.Unmarshal(m.Data, v); err != nil {
		t.Fatalf("reply is not JSON: %v: %s", err, m.Data)
	}
}

// natsErr checks a micro error reply.
func natsErr(t *testing.T, m *nats.Msg, status, code, field string) {
	t.Helper()
	if got := m.Header.Get(micro.ErrorCodeHeader); got != status {
		t.Fatalf("error code header %q, want %q (data %s)", got, status, m.Data)
	}
	if got := m.Header.Get(micro.ErrorHeader); got != code {
		t.Fatalf("error header %q, want %q", got, code)
	}
	var b api.ErrorBody
	if err := json.Unmarshal(m.Data, &b); err != nil {
		t.Fatalf("error data is not an ErrorBody: %v: %s", err, m.Data)
	}
	if b.Error.Code != code || b.Error.Field != field || b.Error.Message == "" {
		t.Fatalf("error body %+v, want code %q field %q", b.Error, code, field)
	}
}
