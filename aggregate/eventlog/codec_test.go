package eventlog

import (
	"strings"
	"testing"

	"github.com/weir-payouts/weir/eventstore"
)

// TestUndecodableRecordIsNamedNotSkipped: a record the domain cannot decode
// fails the whole decode with its aggregate, version and type in the error.
func TestUndecodableRecordIsNamedNotSkipped(t *testing.T) {
	recs := []eventstore.Record{{
		Key: eventstore.Key{Type: TypeAccount, ID: "acme"}, AggregateVersion: 3,
		Type: "no-such-event", Payload: []byte(`{}`),
	}}
	evs, err := AccountEvents(recs)
	if err == nil {
		t.Fatalf("decoded %v from an unknown event type", evs)
	}
	if want := "account acme event 3 (no-such-event)"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name %q", err, want)
	}
}
