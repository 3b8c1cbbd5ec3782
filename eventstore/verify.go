package eventstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrStoreUnhealthy: the stream or a consumer the store relies on is not as
// it must be, or the stream does not take writes. Errors wrapping it name
// what is wrong.
var ErrStoreUnhealthy = errors.New("eventstore: event log not as weir relies on it")

// Verify checks, against the server, what the store's guarantees rest on:
// the stream exists with its subjects, keeps every event (limits
// retention, no message, byte, age or per-subject limits), refuses deletes
// and purges, is not sealed, mirrors or sources nothing and republishes
// nothing, keeps the de-duplication window and direct gets and atomic
// batches; and its leader accepts publishes (a write probe that the stream
// refuses on purpose, so it stores nothing). The first finding is
// returned, wrapping ErrStreamMismatch (configuration) or ErrStoreUnhealthy.
func (s *Store) Verify(ctx context.Context) error {
	info, err := s.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("%w: stream %s: %w", ErrStoreUnhealthy, s.cfg.Stream, err)
	}
	c := info.Config
	want := []string{s.cfg.SubjectPrefix + ".*.*"}
	mismatch := func(what string, got, wantV any) error {
		return fmt.Errorf("%w: stream %s has %s %v, weir needs %v", ErrStreamMismatch, s.cfg.Stream, what, got, wantV)
	}
	switch {
	case len(c.Subjects) != 1 || c.Subjects[0] != want[0]:
		return mismatch("subjects", c.Subjects, want)
	case c.Sealed:
		return mismatch("sealed", true, false)
	case c.Retention != jetstream.LimitsPolicy:
		return mismatch("retention", c.Retention, jetstream.LimitsPolicy)
	case c.MaxMsgs > 0:
		return mismatch("max_msgs", c.MaxMsgs, -1)
	case c.MaxBytes > 0:
		return mismatch("max_bytes", c.MaxBytes, -1)
	case c.MaxAge > 0:
		return mismatch("max_age", c.MaxAge, 0)
	case c.MaxMsgsPerSubject > 0:
		return mismatch("max_msgs_per_subject", c.MaxMsgsPerSubject, -1)
	case !c.DenyDelete:
		return mismatch("deny_delete", false, true)
	case !c.DenyPurge:
		return mismatch("deny_purge", false, true)
	case c.Mirror != nil || len(c.Sources) > 0:
		return mismatch("mirror/sources", "set", "none")
	case c.RePublish != nil:
		return mismatch("republish", c.RePublish.Destination, "none")
	case c.Duplicates < s.cfg.DedupWindow:
		return mismatch("duplicate_window", c.Duplicates, s.cfg.DedupWindow)
	case !c.AllowDirect:
		return mismatch("allow_direct", false, true)
	case !c.AllowAtomicPublish:
		return mismatch("allow_atomic", false, true)
	case c.Replicas < s.cfg.Replicas:
		return mismatch("replicas", c.Replicas, s.cfg.Replicas)
	}
	return s.writeProbe(ctx)
}

// probeSubject is where the write probe publishes: inside the stream's
// subjects, never an aggregate's (ids are not "-").
func (s *Store) probeSubject() string { return s.cfg.SubjectPrefix + ".health.-" }

// writeProbe publishes to the stream with an expected last sequence it can
// never have: a leader that takes writes answers "wrong last sequence" and
// stores nothing; a sealed, lost or leaderless stream answers otherwise or
// not at all.
func (s *Store) writeProbe(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	msg := nats.NewMsg(s.probeSubject())
	msg.Header.Set(jetstream.ExpectedLastSeqHeader, strconv.FormatUint(math.MaxUint64, 10))
	_, err := s.js.PublishMsg(ctx, msg)
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == codeWrongLastSeq || apiErr.ErrorCode == codeWrongLastSeqConstant) {
		return nil
	}
	if err == nil {
		return fmt.Errorf("%w: stream %s stored the write probe", ErrStoreUnhealthy, s.cfg.Stream)
	}
	return fmt.Errorf("%w: stream %s refuses writes: %w", ErrStoreUnhealthy, s.cfg.Stream, err)
}

// VerifyConsumer checks that the durable consumer Consume(durable,
// filterType) reads exists and is configured as Consume made it: the same
// filter, explicit acks from the start, no delivery limit (a limit would
// drop what a saga failed on), and not paused.
func (s *Store) VerifyConsumer(ctx context.Context, durable, filterType string) error {
	want, err := s.durableConfig(durable, filterType)
	if err != nil {
		return err
	}
	cons, err := s.stream.Consumer(ctx, durable)
	if err != nil {
		return fmt.Errorf("%w: consumer %s on %s: %w", ErrStoreUnhealthy, durable, s.cfg.Stream, err)
	}
	c := cons.CachedInfo().Config
	mismatch := func(what string, got, wantV any) error {
		return fmt.Errorf("%w: consumer %s has %s %v, weir needs %v", ErrStoreUnhealthy, durable, what, got, wantV)
	}
	switch {
	case c.FilterSubject != want.FilterSubject || len(c.FilterSubjects) > 0:
		return mismatch("filter", append([]string{c.FilterSubject}, c.FilterSubjects...), want.FilterSubject)
	case c.AckPolicy != want.AckPolicy:
		return mismatch("ack policy", c.AckPolicy, want.AckPolicy)
	case c.DeliverPolicy != want.DeliverPolicy:
		return mismatch("deliver policy", c.DeliverPolicy, want.DeliverPolicy)
	case c.MaxDeliver > 0:
		return mismatch("max_deliver", c.MaxDeliver, -1)
	case c.PauseUntil != nil && c.PauseUntil.After(time.Now()):
		return mismatch("pause until", c.PauseUntil, "not paused")
	}
	return nil
}
