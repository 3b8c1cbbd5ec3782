package notify

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/eventstore"
)

// The notification contract (CONTRACT.md, "Notifications").
const (
	// Stream is the JetStream stream notifications are published to.
	Stream = "WEIR_NOTIFY"
	// SubjectPrefix is followed by .<account>.<state>.
	SubjectPrefix = "weir.notify.withdrawal"
	// Subjects is what the stream holds.
	Subjects = "weir.notify.>"
	// TypeStateChanged is the type of every notification so far.
	TypeStateChanged = "withdrawal.state_changed"
	// HeaderSourceSeq carries the stream sequence, in the event log, of the
	// event a notification announces: the publisher's durable position.
	HeaderSourceSeq = "Weir-Source-Seq"
	// DuplicateWindow is the stream's de-duplication window (Nats-Msg-Id).
	DuplicateWindow = 2 * time.Minute
)

// Notification is the body of every message on WEIR_NOTIFY and of every
// webhook delivery.
type Notification struct {
	EventID    string                   `json:"event_id"`
	Type       string                   `json:"type"`
	At         time.Time                `json:"at"`
	Withdrawal aggregate.WithdrawalView `json:"withdrawal"`
}

// Subject is where a notification about a withdrawal of account in state
// is published. Account ids are subject tokens already
// (aggregate.ValidateAccountID); states are lower-case words.
func Subject(account string, state aggregate.State) string {
	return SubjectPrefix + "." + account + "." + string(state)
}

// StreamConfig is WEIR_NOTIFY's configuration: limits retention with no
// limit (the last message is the publisher's position, and a producer's
// durable consumer may be far behind), deny delete and purge, direct gets.
func StreamConfig(replicas int, memory bool) jetstream.StreamConfig {
	cfg := eventstore.DerivedStreamConfig(Stream, "weir: withdrawal state changes, derived from WEIR_EVENTS",
		[]string{Subjects}, replicas, memory, DuplicateWindow)
	cfg.AllowAtomicPublish = true // the publisher's batches (Publisher.UseBatches)
	return cfg
}

// EnsureStream creates WEIR_NOTIFY (or brings it back to StreamConfig).
func EnsureStream(ctx context.Context, js jetstream.JetStream, replicas int, memory bool) (jetstream.Stream, error) {
	s, err := js.CreateOrUpdateStream(ctx, StreamConfig(replicas, memory))
	if err != nil {
		return nil, fmt.Errorf("notify: stream %s: %w", Stream, err)
	}
	return s, nil
}

// Position is where the publisher stands: the last withdrawal notification
// of WEIR_NOTIFY (on weir.notify.withdrawal.>; wallet notifications share
// the stream and are not the publisher's), the log sequence of the event
// it announced, and the stream's last sequence when that was read (all 0
// before the first).
//
// StreamSeq is what the next publish expects (Nats-Expected-Last-Sequence,
// which the server checks against one number): the stream's end, not the
// last withdrawal notification, because expecting the last message of
// weir.notify.withdrawal.> makes the server find it among every account
// and state subject on each publish. A wallet notification moving the end
// only makes that publish refused, read again and retried.
type Position struct {
	NotifySeq uint64
	SourceSeq uint64
	StreamSeq uint64
}

// isWithdrawal tells a withdrawal notification's subject.
func isWithdrawal(subject string) bool {
	return strings.HasPrefix(subject, SubjectPrefix+".")
}

// ReadPosition reads the stream's end and its last withdrawal notification
// at or before it. Only messages read by sequence are trusted (never a
// "last message on a filter", which a lagging replica could answer with an
// older one): the last message, then back over wallet notifications (a
// few per crossing of a mark) to the withdrawal notification before them.
func ReadPosition(ctx context.Context, s jetstream.Stream) (Position, error) {
	info, err := s.Info(ctx)
	if err != nil {
		return Position{}, fmt.Errorf("notify: %s info: %w", Stream, err)
	}
	last := info.State.LastSeq
	if last == 0 {
		return Position{}, nil
	}
	first := max(info.State.FirstSeq, 1)
	for seq := last; seq >= first; seq-- {
		msg, err := s.GetMsg(ctx, seq)
		if err != nil {
			return Position{}, fmt.Errorf("notify: %s message %d: %w", Stream, seq, err)
		}
		if !isWithdrawal(msg.Subject) {
			continue
		}
		src, err := strconv.ParseUint(msg.Header.Get(HeaderSourceSeq), 10, 64)
		if err != nil {
			return Position{}, fmt.Errorf("notify: %s message %d has no %s header: %w", Stream, msg.Sequence, HeaderSourceSeq, err)
		}
		return Position{NotifySeq: msg.Sequence, SourceSeq: src, StreamSeq: last}, nil
	}
	if first <= 1 {
		return Position{StreamSeq: last}, nil // wallet notifications only, so far
	}
	// The stream is never purged or trimmed; missing messages mean someone
	// did, and announcing the log again from the start would flood every
	// consumer. Refuse loudly.
	return Position{}, fmt.Errorf("notify: %s has no withdrawal notification and starts at %d: %w", Stream, first, jetstream.ErrMsgNotFound)
}
