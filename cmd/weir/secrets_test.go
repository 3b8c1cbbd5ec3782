package main

import (
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weir-payouts/weir/cmd/weir/api"
)

// TestPrincipalsAddPrintsTheTokenOnceAndStoresOnlyItsHash: `weir
// principals add` creates a 0600 file holding token_sha256, prints the
// token (which then logs in), and refuses a duplicate name or an unknown
// role without touching the file.
func TestPrincipalsAddPrintsTheTokenOnceAndStoresOnlyItsHash(t *testing.T) {
	file := filepath.Join(t.TempDir(), "principals.json")
	code, out, errOut := runWeir(t, "principals", "add", "dana", "--roles", "approver,auditor", "--file", file)
	wantCode(t, code, 0, out, errOut)
	token := strings.TrimSpace(out)
	if len(token) < 40 {
		t.Fatalf("token %q is too short to be random", token)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %#o, want 0600", fi.Mode().Perm())
	}
	b, _ := os.ReadFile(file)
	if strings.Contains(string(b), token) || !strings.Contains(string(b), api.HashToken(token)) {
		t.Fatalf("the file must hold the hash, not the token:\n%s", b)
	}
	code, out2, errOut := runWeir(t, "principals", "add", "erin", "--roles", "requester", "--accounts", "acme,ops-*", "--file", file)
	wantCode(t, code, 0, out2, errOut)
	ps, err := api.LoadPrincipals(file)
	if err != nil {
		t.Fatal(err)
	}
	for tok, name := range map[string]string{token: "dana", strings.TrimSpace(out2): "erin"} {
		if p, ok := ps.ByToken(tok); !ok || p.Name != name {
			t.Fatalf("token of %s: %v %v", name, p, ok)
		}
	}
	if erin, _ := ps.ByToken(strings.TrimSpace(out2)); !erin.MayAct("ops-east") || erin.MayAct("globex") {
		t.Fatalf("erin's accounts: %v", erin.Accounts)
	}
	for _, args := range [][]string{
		{"principals", "add", "dana", "--roles", "approver", "--file", file},
		{"principals", "add", "frank", "--roles", "root", "--file", file},
	} {
		if code, out, _ := runWeir(t, args...); code == 0 {
			t.Fatalf("%v: accepted: %s", args, out)
		}
	}
	if after, _ := os.ReadFile(file); string(after) == string(b) || strings.Contains(string(after), "frank") {
		t.Fatalf("a refused add changed the file:\n%s", after)
	}
}

// TestServeRefusesSecretFilesOthersCanRead: a principals file or signing
// key readable by group or others is refused, as ssh refuses such a key.
func TestServeRefusesSecretFilesOthersCanRead(t *testing.T) {
	dir := t.TempDir()
	principals := filepath.Join(dir, "principals.json")
	if err := os.WriteFile(principals, []byte(`[{"name":"a","token":"long-enough-token","roles":["operator"]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "hot.key")
	if err := os.WriteFile(key, []byte(hex.EncodeToString(devSigningKey[:])), 0o640); err != nil {
		t.Fatal(err)
	}
	cfg := fileEngineConfig(t.TempDir())
	cfg.Principals = principals
	_, err := startEngine(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "chmod 600 "+principals) {
		t.Fatalf("0644 principals file: %v", err)
	}
	if err := os.Chmod(principals, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.SigningKey = key
	_, err = startEngine(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--signing-key") || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("0640 signing key: %v", err)
	}
}

// TestNoTokenOrPasswordInAnyLogLine runs weir with every log on (debug,
// and the NATS server's own) through logins that succeed and fail, over
// HTTP and NATS, and greps every line for each secret used.
func TestNoTokenOrPasswordInAnyLogLine(t *testing.T) {
	const (
		hashedTok = "hashed-operator-token-1"
		plainTok  = "plain-approver-token-2"
		wrongTok  = "wrong-token-never-valid-3"
	)
	dir := t.TempDir()
	principals := filepath.Join(dir, "principals.json")
	body := `[{"name":"ops","token_sha256":"` + api.HashToken(hashedTok) + `","roles":["operator","requester"]},` +
		`{"name":"bob","token":"` + plainTok + `","roles":["approver"]}]`
	if err := os.WriteFile(principals, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	custody := filepath.Join(dir, "custody.json")
	if err := os.WriteFile(custody, []byte(`[]`), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	debug := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := fileEngineConfig(t.TempDir())
	cfg.NATSAddr, cfg.Principals, cfg.Custody, cfg.LogLevel, cfg.natsLog = "127.0.0.1:0", principals, custody, "debug", debug
	cfg.SimBlockInterval, cfg.SimSolidityLag = 10*time.Millisecond, 0
	eng, err := startEngine(context.Background(), cfg, debug, &logs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close(context.Background()) })

	c := httpClient{t: t, base: "http://" + eng.httpAddr}
	c.do("POST", "/v1/accounts/acme/credits", hashedTok, `{"credit_id":"c1","amount":"100"}`)
	c.do("POST", "/v1/accounts/acme/credits", wrongTok, `{"credit_id":"c2","amount":"100"}`)
	c.do("GET", "/v1/accounts/acme", plainTok, "")
	url := eng.natsURL
	runWeir(t, "balance", "acme", "--nats-url", url, "--token", hashedTok)
	runWeir(t, "balance", "acme", "--nats-url", url, "--token", wrongTok)
	runWeir(t, "balance", "acme", "--nats-url", url, "--nats-user", "bob", "--nats-password", wrongTok, "--token", plainTok)
	if nc, err := nats.Connect(url, nats.UserInfo("ops", plainTok), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("ops logged in with bob's token")
	}
	if err := eng.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	text := logs.String()
	if !strings.Contains(text, "NATS connection refused") || !strings.Contains(text, "plaintext tokens") {
		t.Fatalf("the run did not log what this test greps through:\n%s", text)
	}
	for _, secret := range []string{hashedTok, plainTok, wrongTok, api.HashToken(hashedTok)} {
		if strings.Contains(text, secret) {
			t.Fatalf("a log line holds %q:\n%s", secret, text)
		}
	}
}
