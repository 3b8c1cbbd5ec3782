package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/eventstore"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
)

func integrityConfig(dir string) serveConfig {
	return serveConfig{
		Data: dir, HTTP: "127.0.0.1:0", NATSAddr: "127.0.0.1:0", Sync: "lazy", Workers: 1,
		TronHTTP: "", SimBlockInterval: 10 * time.Millisecond, SimSolidityLag: 1, DailyLimit: "0", LogLevel: "warn",
	}
}

// TestForgedCreditFromALeakedAdminCredentialIsCaught runs the attack of
// issue 10 against a default `weir serve`: a full-access NATS identity
// publishes a well-formed credit of 5,000,000 with every header right, a
// 7-byte event of an unknown type, and the approval of a reserved
// withdrawal. The forged account answers 409 integrity_violation (HTTP and
// NATS) and nothing is ever paid from it, the forged approval is never
// acted on; /healthz is
// degraded naming both stream sequences, the metric counts them, `weir
// audit --event-key` exits 1 naming them — and every other account keeps
// paying out.
func TestForgedCreditFromALeakedAdminCredentialIsCaught(t *testing.T) {
	dir := t.TempDir()
	eng, err := startEngine(context.Background(), integrityConfig(dir), slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close(context.Background()) })
	keyFile := filepath.Join(dir, devEventKeyFile)
	if info, err := os.Stat(keyFile); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("dev event key %s: %v %v, want a 0600 file", keyFile, info, err)
	}
	c := httpClient{t: t, base: "http://" + eng.httpAddr}

	// The leaked admin credential: an in-process connection, which no
	// NATS permission stops.
	admin, err := eng.emb.Connect(nats.Name("leaked-admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	forged := eventstoretest.Forged(eng.store.Subject(eventstore.Key{Type: eventlog.TypeAccount, ID: "mallory"}), eventstore.Position{},
		aggregate.EventAccountCredited, aggregate.EventSchemaVersion,
		[]byte(`{"account":"mallory","credit_id":"forged","amount":"5000000.000000","at":"2026-01-01T00:00:00Z"}`))
	ack, err := js.PublishMsg(ctx, forged)
	if err != nil {
		t.Fatal(err)
	}
	credit := ack.Sequence
	junk := nats.NewMsg(eng.store.Subject(eventstore.Key{Type: eventlog.TypeAccount, ID: "junk"}))
	junk.Data = []byte("garbage")
	junk.Header.Set(eventstore.HeaderEventType, "no.such")
	if ack, err = js.PublishMsg(ctx, junk); err != nil {
		t.Fatal(err)
	}
	junkSeq := ack.Sequence

	code, _, body := c.do("GET", "/v1/accounts/mallory", "dev-alice-token", "")
	if code != http.StatusConflict || errCode(body) != "integrity_violation" {
		t.Fatalf("GET mallory: %d %v, want 409 integrity_violation", code, body)
	}
	// The same answer over NATS, to a principal logged in with its token.
	alice, err := nats.Connect(eng.natsURL, nats.Token("dev-alice-token"))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	_, err = api.NewClient(alice, "dev-alice-token").Account(ctx, "mallory")
	var refused *api.Refusal
	if !errors.As(err, &refused) || refused.Status != http.StatusConflict || refused.Code != "integrity_violation" {
		t.Fatalf("weir.cmd.account.get mallory: %v, want 409 integrity_violation", err)
	}
	id := "7e0b7c1a-1111-4222-8333-000000000001"
	code, _, body = c.do("POST", "/v1/withdrawals", "dev-alice-token",
		`{"operation_id":"`+id+`","account":"mallory","to_address":"TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZY","amount":"90"}`)
	if code != http.StatusConflict || errCode(body) != "integrity_violation" {
		t.Fatalf("request on mallory: %d %v, want 409 integrity_violation", code, body)
	}
	if code, _, w := c.do("POST", "/v1/withdrawals/"+id+"/approve", "dev-bob-token", ""); code != 200 || w["reserved"] == true {
		t.Fatalf("approve: %d %v (it may be approved, never reserved)", code, w)
	}

	// A forged approval of a reserved withdrawal on a funded account
	// (the one approval a single-approver withdrawal needs): the projector
	// quarantines it, so no worker takes it, and nothing is ever appended
	// after it.
	approvedByForger := "7e0b7c1a-1111-4222-8333-000000000003"
	if code, _, w := c.do("POST", "/v1/withdrawals", "dev-alice-token",
		`{"operation_id":"`+approvedByForger+`","account":"dev","to_address":"TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZY","amount":"50"}`); code != 201 || w["reserved"] != true {
		t.Fatalf("request on dev: %d %v", code, w)
	}
	wkey := eventstore.Key{Type: eventlog.TypeWithdrawal, ID: approvedByForger}
	_, wpos, err := eng.store.Load(ctx, wkey)
	if err != nil {
		t.Fatal(err)
	}
	approval, _ := json.Marshal(aggregate.Approved{Approval: aggregate.Approval{By: "dev-bob", At: time.Now().UTC(), Rule: "single", PolicyVersion: 1}, RequiredApprovals: 1, At: time.Now().UTC()})
	if ack, err = js.PublishMsg(ctx, eventstoretest.Forged(eng.store.Subject(wkey), wpos, aggregate.EventApproved, aggregate.EventSchemaVersion, approval)); err != nil {
		t.Fatal(err)
	}
	forgedApproval := ack.Sequence

	// Everything else keeps working: the dev account pays out.
	paid := "7e0b7c1a-1111-4222-8333-000000000002"
	if code, _, w := c.do("POST", "/v1/withdrawals", "dev-alice-token",
		`{"operation_id":"`+paid+`","account":"dev","to_address":"TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZY","amount":"90"}`); code != 201 {
		t.Fatalf("request on dev: %d %v", code, w)
	}
	if code, _, w := c.do("POST", "/v1/withdrawals/"+paid+"/approve", "dev-bob-token", ""); code != 200 {
		t.Fatalf("approve on dev: %d %v", code, w)
	}
	c.waitForState(paid, "dev-alice-token", "confirmed", 60*time.Second)
	if _, _, w := c.do("GET", "/v1/withdrawals/"+id, "dev-alice-token", ""); w["reserved"] == true || w["state"] == "confirmed" {
		t.Fatalf("the withdrawal on the forged credit: %v", w)
	}
	if _, _, q := c.do("GET", "/v1/queues/ready", "dev-bob-token", ""); queueHas(q, id) || queueHas(q, approvedByForger) {
		t.Fatalf("a withdrawal resting on a forgery is ready to send: %v", q)
	}
	st, err := js.Stream(ctx, eng.store.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	if last, err := st.GetLastMsgForSubject(ctx, eng.store.Subject(wkey)); err != nil || last.Sequence != forgedApproval {
		t.Fatalf("after the forged approval the withdrawal's subject ends at %v (%v), want the forgery at seq %d: something acted on it", last, err, forgedApproval)
	}
	if code, _, body := c.do("GET", "/v1/withdrawals/"+approvedByForger, "dev-alice-token", ""); code != http.StatusConflict || errCode(body) != "integrity_violation" {
		t.Fatalf("GET the withdrawal with the forged approval: %d %v", code, body)
	}
	// The history lists the others and leaves the quarantined one out.
	if code, _, body := c.do("GET", "/v1/withdrawals?account=dev", "dev-olivia-token", ""); code != 200 ||
		!listHas(body, paid) || listHas(body, approvedByForger) {
		t.Fatalf("GET /v1/withdrawals?account=dev: %d %v, want %s listed and not %s", code, body, paid, approvedByForger)
	}

	code, _, body = c.do("GET", "/healthz", "", "")
	msg, _ := body["error"].(map[string]any)["message"].(string)
	if code != http.StatusOK || body["status"] != "degraded" ||
		!strings.Contains(msg, "stream seq "+strconv.FormatUint(credit, 10)) || !strings.Contains(msg, "stream seq "+strconv.FormatUint(junkSeq, 10)) ||
		!strings.Contains(msg, "stream seq "+strconv.FormatUint(forgedApproval, 10)) {
		t.Fatalf("healthz: %d %v, want degraded naming seqs %d and %d", code, body, credit, junkSeq)
	}
	if metrics := c.text("/metrics"); !strings.Contains(metrics, "weir_integrity_violations_total 3") {
		t.Fatalf("metrics lack weir_integrity_violations_total 2:\n%s", grepLines(metrics, "integrity"))
	}

	exit, out, errOut := runWeir(t, "audit", "--all", "--nats-url", eng.natsURL, "--token", "dev-olivia-token", "--tron-node", "", "--event-key", keyFile)
	for _, seq := range []uint64{credit, junkSeq, forgedApproval} {
		if exit != 1 || !strings.Contains(out+errOut, "sequence "+strconv.FormatUint(seq, 10)) {
			t.Fatalf("audit: exit %d, want 1 naming sequence %d:\n%s\n%s", exit, seq, out, errOut)
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// The event key is what stops a leaked NATS credential from writing money:
// a key file others may read is refused, and a rotated key file (new key
// first, old key kept) reads everything signed before.
func TestEventKeyFileIsPrivateAndRotates(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	keyFile := filepath.Join(t.TempDir(), "event.key")
	old := "k1 " + strings.Repeat("a1", 32) + "\n"
	if err := os.WriteFile(keyFile, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := integrityConfig(dir)
	cfg.EventKey = keyFile
	if _, err := startEngine(context.Background(), cfg, log, io.Discard); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a 0644 key file: %v, want refused", err)
	}
	if err := os.Chmod(keyFile, 0o600); err != nil {
		t.Fatal(err)
	}

	eng, err := startEngine(context.Background(), cfg, log, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c := httpClient{t: t, base: "http://" + eng.httpAddr}
	if code, _, body := c.do("POST", "/v1/accounts/keep/credits", "dev-olivia-token", `{"credit_id":"c1","amount":"100"}`); code != 201 {
		t.Fatalf("credit: %d %v", code, body)
	}
	if err := eng.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Rotate: k2 signs from now on, k1 still verifies.
	if err := os.WriteFile(keyFile, []byte("k2 "+strings.Repeat("b2", 32)+"\n"+old), 0o600); err != nil {
		t.Fatal(err)
	}
	eng, err = startEngine(context.Background(), cfg, log, io.Discard)
	if err != nil {
		t.Fatalf("restart with the rotated key: %v", err)
	}
	t.Cleanup(func() { _ = eng.Close(context.Background()) })
	c = httpClient{t: t, base: "http://" + eng.httpAddr}
	if code, _, body := c.do("POST", "/v1/accounts/keep/credits", "dev-olivia-token", `{"credit_id":"c2","amount":"5"}`); code != 201 || body["available"] != "105" {
		t.Fatalf("credit after rotation: %d %v, want 105 available", code, body)
	}
	if code, _, body := c.do("GET", "/healthz", "", ""); code != 200 {
		t.Fatalf("healthz after rotation: %d %v", code, body)
	}
}

func listHas(body map[string]any, id string) bool {
	ws, _ := body["withdrawals"].([]any)
	for _, w := range ws {
		if m, _ := w.(map[string]any); m["id"] == id {
			return true
		}
	}
	return false
}
