package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas/webhook"
)

// fakeDNS answers every name with fixed addresses.
type fakeDNS map[string][]netip.Addr

func (f fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

func TestWebhookURLsMustBePublicHTTPUnlessPrivateTargetsAreAllowed(t *testing.T) {
	dns := fakeDNS{
		"hooks.example.com":  {netip.MustParseAddr("93.184.216.34")},
		"internal.corp":      {netip.MustParseAddr("10.1.2.3")},
		"mixed.example.com":  {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("192.168.1.1")},
		"metadata.evil.test": {netip.MustParseAddr("169.254.169.254")},
		"v6loop.evil.test":   {netip.MustParseAddr("::ffff:127.0.0.1")},
	}
	strict := webhook.Guard{Resolver: dns}
	lax := webhook.Guard{Resolver: dns, AllowPrivate: true}
	for _, c := range []struct {
		url             string
		strict, private bool // accepted by each guard
	}{
		{"https://hooks.example.com/weir", true, true},
		{"http://93.184.216.34:8080/x", true, true},
		{"http://127.0.0.1:9000/hook", false, true},
		{"http://localhost/hook", false, true},
		{"http://api.localhost/hook", false, true},
		{"http://[::1]/hook", false, true},
		{"http://10.0.0.7/hook", false, true},
		{"http://172.16.0.1/hook", false, true},
		{"http://192.168.0.1/hook", false, true},
		{"http://100.64.0.1/hook", false, true},
		{"http://169.254.169.254/latest/meta-data", false, true},
		{"http://[fe80::1]/hook", false, true},
		{"http://[fd00::1]/hook", false, true},
		{"http://0.0.0.0/hook", false, true},
		{"http://internal.corp/hook", false, true},
		{"http://mixed.example.com/hook", false, true},
		{"http://metadata.evil.test/", false, true},
		{"http://v6loop.evil.test/", false, true},
		{"http://nowhere.invalid/hook", false, true},
		{"ftp://hooks.example.com/weir", false, false},
		{"file:///etc/passwd", false, false},
		{"gopher://hooks.example.com/", false, false},
		{"https://user:pass@hooks.example.com/weir", false, false},
		{"hooks.example.com/weir", false, false},
		{"", false, false},
	} {
		for _, g := range []struct {
			guard webhook.Guard
			want  bool
		}{{strict, c.strict}, {lax, c.private}} {
			_, err := g.guard.CheckURL(t.Context(), c.url)
			if (err == nil) != g.want {
				t.Errorf("%q (allow private %v): err %v, want accepted=%v", c.url, g.guard.AllowPrivate, err, g.want)
			}
			var ae *aggregate.Error
			if err != nil && (!errors.As(err, &ae) || ae.Code != webhook.CodeInvalidURL) {
				t.Errorf("%q: %v is not invalid_url", c.url, err)
			}
		}
	}
}

// TestDeliveriesAreRefusedOnTheAddressDialled: the check that matters for
// DNS rebinding is the one on the address the connection goes to. A
// receiver on loopback (registered while private targets were allowed, or
// a public name now resolving to 127.0.0.1) is never contacted by a
// client whose guard refuses private targets.
func TestDeliveriesAreRefusedOnTheAddressDialled(t *testing.T) {
	rcv := newReceiver(t)
	client := webhook.NewClient(webhook.Guard{}, time.Second)
	resp, err := client.Post(rcv.url(), "application/json", nil)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("delivered to %s: %s", rcv.url(), resp.Status)
	}
	if !errors.Is(err, webhook.ErrPrivateTarget) {
		t.Fatalf("error %v is not ErrPrivateTarget", err)
	}
	select {
	case d := <-rcv.got:
		t.Fatalf("the receiver was reached: %+v", d)
	default:
	}
	// Allowed, the same client kind reaches it, and redirects are not
	// followed.
	allowed := webhook.NewClient(webhook.Guard{AllowPrivate: true}, time.Second)
	resp, err = allowed.Post(rcv.url(), "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("status %d", resp.StatusCode)
	}
}
