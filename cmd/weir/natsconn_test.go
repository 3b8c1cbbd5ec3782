package main

import (
	"strings"
	"testing"
)

// TestNATSCredentialFlagsGoTogether: one identity at a time, user with
// password, certificate with key; a token logs in only when no other
// identity is given; an unreadable nkey seed is named without its content.
func TestNATSCredentialFlagsGoTogether(t *testing.T) {
	for _, tc := range []struct {
		name  string
		c     natsCreds
		token string
		n     int    // options expected
		err   string // refusal expected
	}{
		{"nothing", natsCreds{}, "", 0, ""},
		{"token logs in", natsCreds{}, "tok-12345678", 1, ""},
		{"user and password, token stays in the header", natsCreds{user: "u", password: "p"}, "tok-12345678", 1, ""},
		{"creds file", natsCreds{creds: "x.creds"}, "", 1, ""},
		{"TLS", natsCreds{tlsCA: "ca.pem", tlsCert: "c.pem", tlsKey: "k.pem"}, "", 2, ""},
		{"user without password", natsCreds{user: "u"}, "", 0, "go together"},
		{"password without user", natsCreds{password: "p"}, "", 0, "go together"},
		{"two identities", natsCreds{creds: "x.creds", user: "u", password: "p"}, "", 0, "give one of"},
		{"cert without key", natsCreds{tlsCert: "c.pem"}, "", 0, "go together"},
		{"unreadable nkey seed", natsCreds{nkey: "/nonexistent/seed.nk"}, "", 0, "--nats-nkey"},
	} {
		opts, err := tc.c.options(tc.token)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err == "" && len(opts) != tc.n:
			t.Errorf("%s: %d options, want %d", tc.name, len(opts), tc.n)
		}
	}
}
