package notify_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/weir-payouts/weir/sagas/hotwallet"
	"github.com/weir-payouts/weir/sagas/notify"
)

func walletNote(typ, asset string) notify.WalletNotification {
	n := notify.WalletNotification{Type: typ, Wallet: hotwallet.Status{Address: "TNyYNoVfDGHVvyxMjiCm9z7rHNFoR14DSy", USDT: "3", Sending: hotwallet.SendingActive}}
	if asset != "" {
		n.Asset, n.LowMark = asset, "50"
	}
	return n
}

// walletSeen lists the wallet messages of WEIR_NOTIFY as subject|event_id,
// checking each body against its headers.
func (h *harness) walletSeen() []string {
	var out []string
	for _, m := range h.all() {
		if !strings.HasPrefix(m.Subject, notify.WalletSubjectPrefix+".") {
			continue
		}
		var n notify.WalletNotification
		if err := json.Unmarshal(m.Data, &n); err != nil {
			h.t.Fatal(err)
		}
		if id := m.Header.Get(nats.MsgIdHdr); id != n.EventID || n.At.IsZero() || n.Wallet.Address == "" {
			h.t.Fatalf("wallet notification %s: Nats-Msg-Id %q, body %+v", m.Subject, id, n)
		}
		if _, state, _ := strings.Cut(n.Type, "."); !strings.HasSuffix(m.Subject, "."+state) {
			h.t.Fatalf("type %s on %s", n.Type, m.Subject)
		}
		out = append(out, m.Subject+"|"+n.EventID)
	}
	return out
}

// Two weir processes watch one wallet: each announces what it saw, and
// WEIR_NOTIFY holds one message per change of the announced state.
func TestWalletChangesAreAnnouncedOncePerCrossingWhateverTheProcesses(t *testing.T) {
	h := newHarness(t)
	a := notify.NewWalletAnnouncer(h.js, h.stream, nil)
	b := notify.NewWalletAnnouncer(h.js, h.stream, nil)
	ctx := t.Context()
	step := func(an *notify.WalletAnnouncer, typ, asset string, want bool) {
		t.Helper()
		got, err := an.Announce(ctx, walletNote(typ, asset))
		if err != nil || got != want {
			t.Fatalf("%s %s: published %v (%v), want %v", typ, asset, got, err, want)
		}
	}
	step(a, hotwallet.ChangeRecovered, "USDT", false) // nothing was low: nothing to announce
	step(a, hotwallet.ChangeResumed, "", false)       // nothing was paused
	step(a, hotwallet.ChangeLow, "USDT", true)
	step(b, hotwallet.ChangeLow, "USDT", false) // b saw the same crossing later
	step(b, hotwallet.ChangePaused, "", true)
	step(a, hotwallet.ChangePaused, "", false)
	step(b, hotwallet.ChangeLow, "TRX", true) // topics are separate
	step(a, hotwallet.ChangeRecovered, "USDT", true)
	step(b, hotwallet.ChangeRecovered, "USDT", false)
	step(b, hotwallet.ChangeLow, "USDT", true) // a second crossing is a second notification
	step(a, hotwallet.ChangeResumed, "", true)

	// Eight processes race to announce the same recovery.
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for range 8 {
		an := notify.NewWalletAnnouncer(h.js, h.stream, nil)
		wg.Go(func() {
			ok, err := an.Announce(ctx, walletNote(hotwallet.ChangeRecovered, "TRX"))
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				won++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d of 8 racing processes published the TRX recovery, want 1", won)
	}
	want := []string{
		"weir.notify.wallet.usdt.low|wallet.usdt.low.0",
		"weir.notify.wallet.sending.paused|wallet.sending.paused.0",
		"weir.notify.wallet.trx.low|wallet.trx.low.0",
		"weir.notify.wallet.usdt.recovered|wallet.usdt.recovered.1",
		"weir.notify.wallet.usdt.low|wallet.usdt.low.4",
		"weir.notify.wallet.sending.resumed|wallet.sending.resumed.2",
		"weir.notify.wallet.trx.recovered|wallet.trx.recovered.3",
	}
	got := h.walletSeen()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("WEIR_NOTIFY holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The queue: changes told by the monitor (OnChange) are published in
// order by Run, and Idle says when they are.
func TestWalletAnnouncerRunPublishesQueuedChangesInOrder(t *testing.T) {
	h := newHarness(t)
	a := notify.NewWalletAnnouncer(h.js, h.stream, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	for _, c := range []hotwallet.Change{
		{Type: hotwallet.ChangeLow, Asset: "USDT", Mark: "50"},
		{Type: hotwallet.ChangePaused},
		{Type: hotwallet.ChangeLow, Asset: "USDT", Mark: "50"}, // a second process's view: no news
		{Type: hotwallet.ChangeResumed},
	} {
		c.Status = hotwallet.Status{Address: "TNyYNoVfDGHVvyxMjiCm9z7rHNFoR14DSy"}
		a.Notify(c)
	}
	if err := a.Idle(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := h.walletSeen()
	if len(got) != 3 || !strings.HasPrefix(got[0], "weir.notify.wallet.usdt.low|") ||
		!strings.HasPrefix(got[1], "weir.notify.wallet.sending.paused|") || !strings.HasPrefix(got[2], "weir.notify.wallet.sending.resumed|") {
		t.Fatalf("published %v", got)
	}
	if a.Published() != 3 {
		t.Fatalf("Published() = %d", a.Published())
	}
}

// Wallet messages between withdrawal notifications do not move the
// withdrawal publisher: it resumes after the last withdrawal notification,
// repeating and skipping nothing.
func TestWalletNotificationsDoNotDisturbTheWithdrawalPublisher(t *testing.T) {
	h := newHarness(t)
	h.credit("acme", "100")
	a := notify.NewWalletAnnouncer(h.js, h.stream, nil)
	p, stop := h.run()
	h.request("acme", "10")
	h.caughtUp(p)
	if ok, err := a.Announce(t.Context(), walletNote(hotwallet.ChangeLow, "USDT")); !ok || err != nil {
		t.Fatalf("announce: %v %v", ok, err)
	}
	h.request("acme", "20")
	h.caughtUp(p)
	stop()
	// The stream now ends with a wallet message: a restarted publisher
	// still finds its position.
	if ok, err := a.Announce(t.Context(), walletNote(hotwallet.ChangePaused, "")); !ok || err != nil {
		t.Fatalf("announce: %v %v", ok, err)
	}
	p2, stop2 := h.run()
	defer stop2()
	h.request("acme", "30")
	h.caughtUp(p2)
	withdrawals := 0
	for _, m := range h.all() {
		if strings.HasPrefix(m.Subject, notify.SubjectPrefix+".") {
			withdrawals++
		}
	}
	if withdrawals != 3 || p2.Published() != 1 || len(h.walletSeen()) != 2 {
		t.Fatalf("%d withdrawal notifications (want 3), the restarted publisher published %d (want 1), wallet %v",
			withdrawals, p2.Published(), h.walletSeen())
	}
}

// Two publishers follow one log while the wallet announcer publishes in
// between: every request is announced once, in the log's order, and the
// wallet messages are all there.
func TestRacingPublishersWithWalletNotificationsInBetweenAnnounceEachEventOnceInOrder(t *testing.T) {
	h := newHarness(t)
	h.credit("acme", "1000")
	h.credit("bolt", "1000")
	a := notify.NewWalletAnnouncer(h.js, h.stream, nil)
	pa, stopA := h.run()
	defer stopA()
	pb, stopB := h.run()
	defer stopB()
	const requests = 24
	for i := range requests {
		h.request([]string{"acme", "bolt"}[i%2], "1")
		if i%3 == 2 {
			typ := hotwallet.ChangeLow
			if i%6 == 5 {
				typ = hotwallet.ChangeRecovered
			}
			if ok, err := a.Announce(t.Context(), walletNote(typ, "USDT")); !ok || err != nil {
				t.Fatalf("announce %s: %v %v", typ, ok, err)
			}
		}
	}
	h.caughtUp(pa)
	h.caughtUp(pb)
	var last uint64
	ids := map[string]bool{}
	withdrawals := 0
	for _, m := range h.all() {
		if !strings.HasPrefix(m.Subject, notify.SubjectPrefix+".") {
			continue
		}
		withdrawals++
		src, err := strconv.ParseUint(m.Header.Get(notify.HeaderSourceSeq), 10, 64)
		if err != nil || src <= last {
			t.Fatalf("message %d announces log sequence %s after %d: out of order or repeated", m.Sequence, m.Header.Get(notify.HeaderSourceSeq), last)
		}
		last = src
		id := m.Header.Get(nats.MsgIdHdr)
		if ids[id] {
			t.Fatalf("event %s announced twice", id)
		}
		ids[id] = true
	}
	if withdrawals != requests || pa.Published()+pb.Published() != requests || len(h.walletSeen()) != requests/3 {
		t.Fatalf("%d withdrawal notifications, published %d+%d, %d wallet messages; want %d, %d in all, %d",
			withdrawals, pa.Published(), pb.Published(), len(h.walletSeen()), requests, requests, requests/3)
	}
}
