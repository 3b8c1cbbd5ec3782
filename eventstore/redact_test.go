package eventstore

import (
	"strings"
	"testing"
)

// TestRedactURLHidesPasswordsAndTokens: a NATS URL list is fit for a log
// line: user passwords and bare tokens are replaced, hosts kept.
func TestRedactURLHidesPasswordsAndTokens(t *testing.T) {
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":                            "nats://127.0.0.1:4222",
		"nats://weir:s3cret@n1:4222":                       "nats://weir:REDACTED@n1:4222",
		"nats://s3cret@n1:4222":                            "nats://REDACTED@n1:4222",
		"nats://a:s3cret@n1:4222, nats://b:s3cret@n2:4222": "nats://a:REDACTED@n1:4222,nats://b:REDACTED@n2:4222",
		"tls://weir:s3cret@n1:4222,nats://n2:4222":         "tls://weir:REDACTED@n1:4222,nats://n2:4222",
	} {
		got := RedactURL(in)
		if got != want || strings.Contains(got, "s3cret") {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
	if got := RedactURL("nats://weir:s3cret@[bad"); strings.Contains(got, "s3cret") {
		t.Errorf("an unparsable URL leaked its password: %q", got)
	}
}
