package natsauth_test

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/weir-payouts/weir/cmd/weir/api"
	"github.com/weir-payouts/weir/cmd/weir/natsauth"
	"github.com/weir-payouts/weir/eventstore/eventstoretest"
)

// TestScopedPrincipalsHearOnlyTheirAccountsNotifications: a principal
// scoped to "acme" may subscribe acme's notifications and not the others';
// an unscoped one may subscribe them all; a glob scope gets none over NATS.
func TestScopedPrincipalsHearOnlyTheirAccountsNotifications(t *testing.T) {
	ps, err := api.NewPrincipals([]api.Principal{
		{Name: "any", Token: "any-token-0001", Roles: []api.Role{api.RoleRequester}},
		{Name: "acme", Token: "acme-token-002", Roles: []api.Role{api.RoleRequester}, Accounts: []string{"acme"}},
		{Name: "ops", Token: "ops-token-0003", Roles: []api.Role{api.RoleRequester}, Accounts: []string{"ops-*"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := eventstoretest.Start(t, eventstoretest.Listen(), eventstoretest.Auth(natsauth.New(ps, nil)))
	try := func(token, subject string) bool {
		nc, err := nats.Connect(srv.ClientURL(), nats.Token(token), nats.MaxReconnects(0))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if _, err := nc.SubscribeSync(subject); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		last := nc.LastError()
		return last == nil || !strings.Contains(last.Error(), "Permissions Violation")
	}
	for _, c := range []struct {
		token, subject string
		allowed        bool
	}{
		{"any-token-0001", "weir.notify.>", true},
		{"acme-token-002", "weir.notify.withdrawal.acme.>", true},
		{"acme-token-002", "weir.notify.withdrawal.acme.confirmed", true},
		{"acme-token-002", "weir.notify.>", false},
		{"acme-token-002", "weir.notify.withdrawal.globex.>", false},
		{"acme-token-002", "weir.notify.withdrawal.*.confirmed", false},
		{"ops-token-0003", "weir.notify.withdrawal.ops-east.>", false},
		{"acme-token-002", "_INBOX.>", true},
	} {
		if got := try(c.token, c.subject); got != c.allowed {
			t.Errorf("%s subscribing %s: allowed %v, want %v", c.token, c.subject, got, c.allowed)
		}
	}
}
