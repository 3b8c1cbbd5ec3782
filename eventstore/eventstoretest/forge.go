package eventstoretest

import (
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/eventstore"
)

// Forged is a message a full-access NATS identity (a leaked admin
// credential) could publish to the event stream: every header Append
// writes — event id, type, schema, version, back pointer and the
// expectation the server checks — for the slot right after at on subject,
// and no tag (set HeaderKeyID/HeaderTag on it to try a made-up one).
// Publish it with a raw JetStream client, bypassing weir.
func Forged(subject string, at eventstore.Position, typ string, schema int, data []byte) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = data
	seq := strconv.FormatUint(at.Sequence, 10)
	m.Header.Set(eventstore.HeaderEventID, eventstore.NewEventID())
	m.Header.Set(eventstore.HeaderEventType, typ)
	m.Header.Set(eventstore.HeaderSchema, strconv.Itoa(schema))
	m.Header.Set(eventstore.HeaderVersion, strconv.FormatUint(at.Version+1, 10))
	m.Header.Set(eventstore.HeaderPrevSeq, seq)
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, seq)
	return m
}

// WithTag sets a tag under key id "test" (Keyring's id) on m and returns it.
func WithTag(m *nats.Msg, hexTag string) *nats.Msg {
	if hexTag != "" {
		m.Header.Set(eventstore.HeaderKeyID, "test")
		m.Header.Set(eventstore.HeaderTag, hexTag)
	}
	return m
}
