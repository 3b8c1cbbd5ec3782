package api_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/weir-payouts/weir/cmd/weir/api"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Reads are logged at debug, writes at info: an info log shows what
// changed, not every poll.
func TestReadRequestsAreLoggedAtDebugAndWritesAtInfo(t *testing.T) {
	var buf lockedBuffer
	e := newEnv(t, envOpts{logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	e.credit(t, "acme", "seed", "100")
	id := uuid.NewString()
	wantStatus(t, e.do(t, "POST", "/v1/withdrawals", tokAlice, withdrawalBody(id, "acme", "10")), http.StatusCreated)
	wantStatus(t, e.do(t, "GET", "/v1/withdrawals/"+id, tokAlice, nil), http.StatusOK)
	wantStatus(t, e.do(t, "GET", "/v1/withdrawals", tokAlice, nil), http.StatusOK)
	var v map[string]any
	natsOK(t, e.natsReq(t, "weir.cmd.withdrawal.get", tokAlice, map[string]string{"id": id}), &v)
	wantStatus(t, e.do(t, "GET", "/v1/withdrawals/"+uuid.NewString(), tokAlice, nil), http.StatusNotFound)

	out := buf.String()
	if !strings.Contains(out, "method=POST path=/v1/withdrawals ") {
		t.Fatalf("the write is not logged at info:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "status=200") && (strings.Contains(line, "method=GET") || strings.Contains(line, "subject=weir.cmd.withdrawal.get")) {
			t.Fatalf("a successful read logged at info: %s", line)
		}
	}
}

// /healthz says what is degraded (200) and what is down (503), as JSON.
func TestHealthzBodySaysWhatIsDegraded(t *testing.T) {
	var reasons []string
	var mu sync.Mutex
	e := newEnv(t, envOpts{degraded: func(context.Context) []string {
		mu.Lock()
		defer mu.Unlock()
		return reasons
	}})
	var body api.HealthBody
	r := e.do(t, "GET", "/healthz", "", nil)
	wantStatus(t, r, http.StatusOK)
	r.decode(t, &body)
	if body.Status != "ok" || len(body.Degraded) != 0 || body.Error != nil {
		t.Fatalf("healthy: %+v", body)
	}
	mu.Lock()
	reasons = []string{"tron node: the last 3 calls failed (last: Head: connection refused)"}
	mu.Unlock()
	r = e.do(t, "GET", "/healthz", "", nil)
	wantStatus(t, r, http.StatusOK)
	body = api.HealthBody{}
	r.decode(t, &body)
	if body.Status != "degraded" || len(body.Degraded) != 1 || !strings.Contains(body.Degraded[0], "tron node") {
		t.Fatalf("degraded: %+v", body)
	}
	e.health.set(errors.New("store: stream WEIR_EVENTS sealed"))
	r = e.do(t, "GET", "/healthz", "", nil)
	wantStatus(t, r, http.StatusServiceUnavailable)
	body = api.HealthBody{}
	r.decode(t, &body)
	if body.Status != "unavailable" || body.Error == nil || !strings.Contains(body.Error.Message, "sealed") || len(body.Degraded) != 1 {
		t.Fatalf("down: %+v", body)
	}
}
