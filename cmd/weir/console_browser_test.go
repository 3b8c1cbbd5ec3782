package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/weir-payouts/weir/cmd/weir/console"
	"github.com/weir-payouts/weir/tron"
)

// tourPolicy is the policy the tour's policy page shows: the default
// amount rules plus an allow-list and velocity tiers.
const tourPolicy = `{"name":"payees and pace",
 "rules":[{"name":"single","threshold":"0","approvers":1},{"name":"four-eyes","threshold":"1000","approvers":2}],
 "destinations":[
   {"name":"payroll-payees","accounts":["payroll-*"],"allow":["TLsV52sRDL79HXGGm9yzwKibb6BeruhUzy"],"unlisted":"refuse"},
   {"name":"dev-payees","accounts":["dev"],"allow":["TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZY","TLsV52sRDL79HXGGm9yzwKibb6BeruhUzy"],"unlisted":"extra_approvers","extra_approvers":1}],
 "velocity":[
   {"name":"busy day","above":"10000","extra_approvers":1},
   {"name":"very busy day","accounts":["dev"],"above":"50000","extra_approvers":2}]}`

// chromiumPath finds a Chromium or Chrome: $WEIR_CHROMIUM, else the usual
// names on PATH.
func chromiumPath() string {
	if p := os.Getenv("WEIR_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// screenshotsDir is where WEIR_SCREENSHOTS=1 writes the console tour.
const screenshotsDir = "../../docs/console"

// TestConsoleInChromium drives the web console of a real `weir serve`
// engine (dev principals, simulated chain) in headless Chromium: one
// browser process for every step, one isolated browser context per
// principal. Without a browser it skips, saying so — except under CI,
// where .ci/run installs one and a missing browser is a failure.
func TestConsoleInChromium(t *testing.T) {
	top := t
	exe := chromiumPath()
	if exe == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but no Chromium was found: .ci/run installs Debian's chromium (or set WEIR_CHROMIUM)")
		}
		t.Skip("no Chromium or Chrome on this machine (apt-get install chromium, or set WEIR_CHROMIUM): the console's browser tests did not run")
	}
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hooks.Close)
	cfg := serveConfig{
		Data: t.TempDir(), HTTP: "127.0.0.1:0", NATSAddr: "127.0.0.1:0", Sync: "lazy", Workers: 1, memory: true,
		TronHTTP: "", SimBlockInterval: 100 * time.Millisecond, SimSolidityLag: 2, DailyLimit: "0", LogLevel: "warn",
		WebhookAllowPrivate: true, ConsoleTxLink: console.DefaultTxLink, webhookFirstRetry: 50 * time.Millisecond,
	}
	eng, err := startEngine(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close(context.Background()) })
	base := "http://" + eng.httpAddr
	api := httpClient{t: t, base: base}
	const (
		alice  = "dev-alice-token" // requester and approver
		bob    = "dev-bob-token"
		carol  = "dev-carol-token"
		olivia = "dev-olivia-token" // operator
	)
	request := func(amount string) string {
		t.Helper()
		id := uuid.NewString()
		body := fmt.Sprintf(`{"operation_id":%q,"account":"dev","to_address":"TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZY","amount":%q,"asset":"USDT-TRC20"}`, id, amount)
		if code, _, b := api.do("POST", "/v1/withdrawals", alice, body); code != http.StatusCreated {
			t.Fatalf("request: %d %v", code, b)
		}
		return id
	}

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true), chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("safebrowsing-disable-auto-update", true), chromedp.Flag("password-store", "basic"),
		chromedp.WindowSize(1280, 860),
	)
	t.Cleanup(cancelAlloc)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(browserCtx); err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	// do runs steps with a deadline (the browser outlives it).
	do := func(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if err := chromedp.Do(c, steps...); err != nil {
			loc, _ := chromedp.Run(ctx, chromedp.Location())
			html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("main")))
			t.Fatalf("%s: %v (at %s)\n%s", what, err, loc, html)
		}
	}
	text := func(t *testing.T, ctx context.Context, sel string) string {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		s, err := chromedp.Run(c, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	// as opens an isolated browser context (its own cookies) logged in
	// with token through the login form.
	// fresh opens an isolated browser context with its tab (the first run
	// on a context opens the tab, and must have no deadline).
	fresh := func(t *testing.T) context.Context {
		t.Helper()
		ctx, cancel := chromedp.NewContext(browserCtx, chromedp.WithNewBrowserContext())
		top.Cleanup(cancel) // a principal's browser outlives the subtest that opened it
		if err := chromedp.Do(ctx); err != nil {
			t.Fatal(err)
		}
		return ctx
	}
	as := func(t *testing.T, token string) context.Context {
		t.Helper()
		ctx := fresh(t)
		do(t, ctx, "log in",
			chromedp.Navigate(base+"/console/"),
			chromedp.WaitVisible(chromedp.ID("token")),
			chromedp.SendKeys(chromedp.ID("token"), token),
			chromedp.Click(chromedp.CSS(`form[action="/console/login"] button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(`nav a[href="/console/approvals"]`)),
		)
		return ctx
	}
	shots := os.Getenv("WEIR_SCREENSHOTS") != ""
	shot := func(t *testing.T, ctx context.Context, name string) {
		t.Helper()
		if !shots {
			return
		}
		c, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		png, err := chromedp.Run(c, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.MkdirAll(screenshotsDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(screenshotsDir, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	var aliceCtx context.Context
	t.Run("login", func(t *testing.T) {
		if shots {
			ctx := fresh(t)
			do(t, ctx, "login page", chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.ID("token")))
			shot(t, ctx, "01-login")
		}
		aliceCtx = as(t, alice)
		if h1 := text(t, aliceCtx, "h1"); h1 != "Approvals" {
			t.Fatalf("after login: h1 %q, want Approvals", h1)
		}
		if who := text(t, aliceCtx, ".who span"); who != "alice" {
			t.Fatalf("logged in as %q", who)
		}
	})

	var liveID string
	t.Run("live update without reload", func(t *testing.T) {
		if aliceCtx == nil {
			t.Skip("login failed")
		}
		// A marker in the page's JavaScript world: a reload would lose it.
		do(t, aliceCtx, "open queue",
			chromedp.Navigate(base+"/console/approvals"),
			chromedp.Poll[chromedp.Void](`document.body.getAttribute("data-live-state") === "open"`, chromedp.WithPollingTimeout(10*time.Second)),
			chromedp.Evaluate[chromedp.Void](`window.weirMarker = 42`),
		)
		liveID = request("4321.5")
		do(t, aliceCtx, "the new withdrawal appears",
			chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.getElementById("w-%s") !== null`, liveID), chromedp.WithPollingTimeout(10*time.Second)),
		)
		if got, err := chromedp.Run(aliceCtx, chromedp.Evaluate[int](`window.weirMarker`)); err != nil || got != 42 {
			t.Fatalf("the page was reloaded (marker %d, %v), want a live update", got, err)
		}
		row := text(t, aliceCtx, "#w-"+liveID)
		for _, want := range []string{"4321.5", "USDT-TRC20", "TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZY", "alice", "you requested this", "0 of 2"} {
			if !strings.Contains(row, want) {
				t.Fatalf("row lacks %q: %q", want, row)
			}
		}
	})

	t.Run("self approval refused with the message shown", func(t *testing.T) {
		if liveID == "" || aliceCtx == nil {
			t.Skip("needs the live update's withdrawal")
		}
		// The page offers alice no approve button on her own withdrawal;
		// a hand-made (or stale) form meets the application's refusal.
		n, err := chromedp.Run(aliceCtx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll('form[action$="%s/approve"]').length`, liveID)))
		if err != nil || n != 0 {
			t.Fatalf("approve forms for alice's own withdrawal: %d (%v)", n, err)
		}
		do(t, aliceCtx, "post a hand-made approve form",
			chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(function(){
				var f = document.createElement("form"); f.method = "post"; f.action = "/console/withdrawals/%s/approve";
				var c = document.createElement("input"); c.type = "hidden"; c.name = "csrf";
				c.value = document.querySelector('input[name="csrf"]').value; f.appendChild(c);
				document.body.appendChild(f); f.submit(); })()`, liveID)),
			chromedp.WaitVisible(chromedp.CSS(".flash.error")),
		)
		msg := text(t, aliceCtx, ".flash.error")
		if !strings.Contains(msg, "you cannot approve it") || !strings.Contains(msg, "self_approval") {
			t.Fatalf("refusal shown as %q", msg)
		}
		_, _, w := api.do("GET", "/v1/withdrawals/"+liveID, alice, "")
		if w["state"] != "requested" || len(w["approvals"].([]any)) != 0 {
			t.Fatalf("after the refused self approval: %v", w)
		}
	})

	var approvedID string
	t.Run("approve: a second approver completes four eyes", func(t *testing.T) {
		approvedID = request("2500")
		// Its first transaction runs out of energy on chain (the first
		// broadcast of this run): a failed receipt, then a rebuilt payout —
		// both shown on its page (see "receipts").
		eng.sim.Script(tron.ChannelBroadcast, tron.FaultOutOfEnergy)
		for i, tok := range []string{bob, carol} {
			ctx := as(t, tok)
			btn := fmt.Sprintf(`#w-%s form[action$="/approve"] button`, approvedID)
			if i == 0 && shots {
				do(t, ctx, "queue", chromedp.Navigate(base+"/console/approvals"), chromedp.WaitVisible(chromedp.CSS(btn)))
				shot(t, ctx, "02-approvals")
			}
			do(t, ctx, "approve from the queue",
				chromedp.Navigate(base+"/console/approvals"),
				chromedp.WaitVisible(chromedp.CSS(btn)),
				chromedp.Click(chromedp.CSS(btn)),
				chromedp.WaitVisible(chromedp.CSS(".flash.ok")),
			)
			msg := text(t, ctx, ".flash.ok")
			want := "It has 1 of 2 approvals."
			if i == 1 {
				want = "It is approved"
			}
			if !strings.Contains(msg, want) {
				t.Fatalf("%s: flash %q, want %q", tok, msg, want)
			}
		}
		_, _, w := api.do("GET", "/v1/withdrawals/"+approvedID, alice, "")
		if n := len(w["approvals"].([]any)); n != 2 || w["state"] == "requested" || w["state"] == "rejected" {
			t.Fatalf("after two approvals: state %v, %d approvals", w["state"], n)
		}
		_, _, evs := api.do("GET", "/v1/withdrawals/"+approvedID+"/events", alice, "")
		found := false
		for _, e := range evs["events"].([]any) {
			if e.(map[string]any)["type"] == "withdrawal.approved" {
				found = true
			}
		}
		if !found {
			t.Fatalf("no withdrawal.approved event: %v", evs)
		}
	})

	t.Run("receipts: a failed one and the payout, with their fees", func(t *testing.T) {
		if approvedID == "" || aliceCtx == nil {
			t.Skip("needs the approved withdrawal")
		}
		w := api.waitForState(approvedID, alice, "confirmed", 20*time.Second)
		do(t, aliceCtx, "withdrawal page", chromedp.Navigate(base+"/console/withdrawals/"+approvedID), chromedp.WaitVisible(chromedp.ID("receipts")))
		rows, err := chromedp.Run(aliceCtx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#receipts tbody tr")).map(function (r) { return r.className + "|" + r.innerText; })`))
		if err != nil || len(rows) != 2 {
			t.Fatalf("receipt rows %q (%v), want the failed one and the payout", rows, err)
		}
		receipts := w["receipts"].([]any)
		for i, want := range []string{"OUT_OF_ENERGY", "SUCCESS"} {
			r := receipts[i].(map[string]any)
			fee, _ := r["fee_trx"].(string)
			if r["result"] != want || fee == "" || !strings.Contains(rows[i], want) || !strings.Contains(rows[i], fee+" TRX") ||
				!strings.Contains(rows[i], fmt.Sprint(r["block_number"])) || strings.HasPrefix(rows[i], "warn|") != (want != "SUCCESS") {
				t.Fatalf("receipt %d: row %q, API %v", i, rows[i], r)
			}
		}
		if fee := text(t, aliceCtx, "#fee-burned"); fee != w["fee_burned_trx"].(string)+" TRX" {
			t.Fatalf("fees burnt %q, API %v", fee, w["fee_burned_trx"])
		}
	})

	t.Run("decline with a reason", func(t *testing.T) {
		id := request("1800")
		ctx := as(t, bob)
		do(t, ctx, "decline on the withdrawal page",
			chromedp.Navigate(base+"/console/withdrawals/"+id),
			chromedp.WaitVisible(chromedp.ID("reason")),
			chromedp.SendKeys(chromedp.ID("reason"), "destination not on file"),
			chromedp.Click(chromedp.ID("decline")),
			chromedp.WaitVisible(chromedp.CSS(".flash.ok")),
		)
		if msg := text(t, ctx, ".flash.ok"); !strings.Contains(msg, "Declined.") || !strings.Contains(msg, "rejected (declined)") {
			t.Fatalf("flash %q", msg)
		}
		if tl := text(t, ctx, "#timeline"); !strings.Contains(tl, "withdrawal.rejected") || !strings.Contains(tl, "bob") {
			t.Fatalf("timeline lacks the decline: %q", tl)
		}
		_, _, w := api.do("GET", "/v1/withdrawals/"+id, alice, "")
		if w["state"] != "rejected" || w["reason"] != "declined" || w["detail"] != "destination not on file" || w["resolved_by"] != "bob" {
			t.Fatalf("after the decline: %v", w)
		}
	})

	t.Run("works without JavaScript", func(t *testing.T) {
		id := request("2200")
		ctx := fresh(t)
		do(t, ctx, "switch scripts off", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
			return err
		}))
		btn := fmt.Sprintf(`#w-%s form[action$="/approve"] button`, id)
		do(t, ctx, "log in and approve with plain forms",
			chromedp.Navigate(base+"/console/login"),
			chromedp.SendKeys(chromedp.ID("token"), carol),
			chromedp.Click(chromedp.CSS(`form[action="/console/login"] button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(btn)),
			chromedp.Click(chromedp.CSS(btn)),
			chromedp.WaitVisible(chromedp.CSS(".flash.ok")),
		)
		if state, err := chromedp.Run(ctx, chromedp.Evaluate[string](`String(document.body.getAttribute("data-live-state"))`)); err != nil || state != "null" {
			t.Fatalf("the live script ran (state %q, %v): scripts were meant to be off", state, err)
		}
		if msg := text(t, ctx, ".flash.ok"); !strings.Contains(msg, "1 of 2 approvals") {
			t.Fatalf("flash %q", msg)
		}
	})

	t.Run("every control is labelled", func(t *testing.T) {
		ctx := as(t, olivia)
		id := request("10")
		for _, path := range []string{"/console/approvals", "/console/withdrawals", "/console/withdrawals/" + id, "/console/accounts", "/console/accounts/dev", "/console/in-flight", "/console/policy", "/console/wallet", "/console/webhooks"} {
			do(t, ctx, path, chromedp.Navigate(base+path), chromedp.WaitVisible(chromedp.CSS("h1")))
			// A control without a label, a button without text: what a screen
			// reader user would meet unnamed.
			bad, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("input:not([type=hidden]), select, textarea, button")).filter(function (e) {
				if (e.tagName === "BUTTON") { return e.textContent.trim() === "" && !e.getAttribute("aria-label"); }
				return !(e.labels && e.labels.length) && !e.getAttribute("aria-label");
			}).map(function (e) { return e.outerHTML; })`))
			if err != nil || len(bad) > 0 {
				t.Fatalf("%s: controls without a label (%v): %v", path, err, bad)
			}
		}
	})

	t.Run("POST without CSRF token refused", func(t *testing.T) {
		id := request("3000")
		jar, _ := cookiejar.New(nil)
		hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		get := func(path string) string {
			res, err := hc.Get(base + path)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			return string(b)
		}
		post := func(path string, form url.Values) int {
			res, err := hc.PostForm(base+path, form)
			if err != nil {
				t.Fatal(err)
			}
			_ = res.Body.Close()
			return res.StatusCode
		}
		token := regexp.MustCompile(`name="csrf" value="([^"]+)"`)
		login := token.FindStringSubmatch(get("/console/login"))
		if code := post("/console/login", url.Values{"csrf": {login[1]}, "token": {bob}}); code != http.StatusSeeOther {
			t.Fatalf("login: %d", code)
		}
		if code := post("/console/withdrawals/"+id+"/approve", url.Values{}); code != http.StatusForbidden {
			t.Fatalf("approve without the CSRF token: %d, want 403", code)
		}
		_, _, w := api.do("GET", "/v1/withdrawals/"+id, alice, "")
		if w["state"] != "requested" || len(w["approvals"].([]any)) != 0 {
			t.Fatalf("a refused POST changed the withdrawal: %v", w)
		}
	})

	t.Run("tour", func(t *testing.T) {
		if !shots {
			t.Skip("WEIR_SCREENSHOTS is not set: no screenshots written")
		}
		api.waitForState(approvedID, alice, "confirmed", 10*time.Second)
		if code, _, b := api.do("POST", "/v1/webhooks", olivia, fmt.Sprintf(`{"url":%q,"events":["withdrawal.state_changed"]}`, hooks.URL+"/weir")); code != http.StatusCreated {
			t.Fatalf("webhook: %d %v", code, b)
		}
		settled := request("120")
		_, _, ok := api.do("POST", "/v1/withdrawals/"+settled+"/approve", bob, "")
		if ok["state"] == nil {
			t.Fatalf("approve: %v", ok)
		}
		api.waitForState(settled, alice, "confirmed", 10*time.Second)
		// A payout held in flight: the node says SUCCESS to every send of
		// it but its pool drops the transaction (nothing else is sent from
		// here on), so it stays broadcasting with its worker's lease until
		// the test ends.
		eng.sim.Script(tron.ChannelBroadcast, slices.Repeat([]tron.Fault{tron.FaultDropAfterAccept}, 1000)...)
		held := request("640")
		if _, _, ok := api.do("POST", "/v1/withdrawals/"+held+"/approve", bob, ""); ok["state"] == nil {
			t.Fatalf("approve: %v", ok)
		}
		api.waitForState(held, alice, "broadcasting", 10*time.Second)
		// The policy in force gets destination rules and velocity tiers.
		if code, _, b := api.do("PUT", "/v1/policy", olivia, tourPolicy); code != http.StatusOK {
			t.Fatalf("policy: %d %v", code, b)
		}
		ctx := as(t, olivia)
		pages := []struct{ name, path, wait string }{
			{"03-withdrawal", "/console/withdrawals/" + approvedID, "#timeline"},
			{"04-withdrawals", "/console/withdrawals", "table"},
			{"05-in-flight", "/console/in-flight", "#inflight"},
			{"06-account", "/console/accounts/dev", "#statement"},
			{"07-policy", "/console/policy", "table.velocity"},
			{"08-wallet", "/console/wallet", ".facts"},
			{"09-webhooks", "/console/webhooks", "#webhooks"},
		}
		for _, p := range pages {
			do(t, ctx, p.name, chromedp.Navigate(base+p.path), chromedp.WaitVisible(chromedp.CSS(p.wait)))
			shot(t, ctx, p.name)
			if p.name == "05-in-flight" {
				if row := text(t, ctx, "#inflight tbody tr"); !strings.Contains(row, "640") || !strings.Contains(row, "broadcasting") || !strings.Contains(row, "until") {
					t.Fatalf("in-flight row %q: want the held payout with its lease", row)
				}
			}
		}
		do(t, ctx, "deliveries", chromedp.Navigate(base+"/console/webhooks"), chromedp.Click(chromedp.CSS(`#webhooks a[href^="/console/webhooks/"]`)),
			chromedp.WaitVisible(chromedp.CSS("h1")))
		shot(t, ctx, "10-deliveries")
		// A phone.
		phone := as(t, carol)
		request("75.25")
		do(t, phone, "phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)), chromedp.Navigate(base+"/console/approvals"), chromedp.WaitVisible(chromedp.CSS("h1")))
		shot(t, phone, "11-approvals-phone")
	})
}
