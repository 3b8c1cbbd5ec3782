package eventstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// durableConfig is the durable consumer Consume relies on; VerifyConsumer
// checks a running one against it.
func (s *Store) durableConfig(durable, filterType string) (jetstream.ConsumerConfig, error) {
	if err := validToken(durable); err != nil {
		return jetstream.ConsumerConfig{}, fmt.Errorf("%w: durable name %q: %v", ErrInvalidKey, durable, err)
	}
	filter := s.cfg.SubjectPrefix + ".*.*"
	if filterType != "" {
		if err := validToken(filterType); err != nil {
			return jetstream.ConsumerConfig{}, fmt.Errorf("%w: filter type %q: %v", ErrInvalidKey, filterType, err)
		}
		filter = s.cfg.SubjectPrefix + "." + filterType + ".*"
	}
	return jetstream.ConsumerConfig{
		Durable:       durable,
		FilterSubject: filter,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxAckPending: 256,
		Replicas:      s.cfg.Replicas,
	}, nil
}

// EnsureConsumer creates the durable consumer Consume reads (or brings an
// edited one back to its configuration), so that a caller can know it
// exists before the consuming loop starts.
func (s *Store) EnsureConsumer(ctx context.Context, durable, filterType string) (jetstream.Consumer, error) {
	cfg, err := s.durableConfig(durable, filterType)
	if err != nil {
		return nil, err
	}
	cons, err := s.js.CreateOrUpdateConsumer(ctx, s.cfg.Stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("eventstore: durable consumer %s: %w", durable, err)
	}
	return cons, nil
}

// Consume delivers records to handle through a durable consumer named
// durable, so a process manager (saga) resumes after a crash exactly where
// its acknowledgements stopped: no startup scan, no reaper. A record is
// acknowledged only after handle returns nil; on an error it is redelivered
// after a back-off (at-least-once, so handlers must be idempotent). Several
// processes consuming with the same durable name share the work.
//
// filterType limits delivery to one aggregate type ("" = all). It blocks
// until ctx is done and returns ctx.Err(), or returns a setup error. A
// record that does not verify or decode stops it, unless OnViolation takes
// it (and, when that returns nil, it is acknowledged and never handled).
func (s *Store) Consume(ctx context.Context, durable, filterType string, handle func(Record) error, opts ...ReadOption) error {
	o := readOpts(opts)
	cons, err := s.EnsureConsumer(ctx, durable, filterType)
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		it, err := cons.Messages()
		if err != nil {
			return fmt.Errorf("eventstore: durable consumer %s: %w", durable, err)
		}
		err = s.drain(ctx, it, o, handle)
		it.Stop()
		if ctx.Err() != nil {
			break
		}
		var undecodable errUndecodable
		if errors.As(err, &undecodable) {
			return fmt.Errorf("eventstore: durable consumer %s: %w", durable, undecodable.err)
		}
		if err != nil && !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			// A broken iterator (server restart, lost connection): open a
			// new one after a short pause rather than give up.
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return ctx.Err()
}

func (s *Store) drain(ctx context.Context, it jetstream.MessagesContext, o readOptions, handle func(Record) error) error {
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		msg, err := it.Next()
		if err != nil {
			return err
		}
		rec, err := s.decodeStreamMsg(msg)
		if err != nil {
			var ie *IntegrityError
			if !errors.As(err, &ie) {
				return err // no metadata: the iterator is broken
			}
			// Quarantined: handed to OnViolation, or stop loudly, like
			// Subscribe. A saga that skipped an event silently would leave
			// money out of step forever.
			if qErr := s.quarantine(o, err); qErr != nil {
				return errUndecodable{qErr}
			}
			_ = msg.DoubleAck(ctx)
			continue
		}
		if err := handle(rec); err != nil {
			delay := time.Second
			if md, mErr := msg.Metadata(); mErr == nil && md.NumDelivered < 5 {
				delay = time.Duration(md.NumDelivered) * 100 * time.Millisecond
			}
			_ = msg.NakWithDelay(delay)
			continue
		}
		// Acknowledge synchronously so "handled" and "acknowledged" do not
		// drift apart; a lost ack only means a redelivery.
		_ = msg.DoubleAck(ctx)
	}
}

type errUndecodable struct{ err error }

func (e errUndecodable) Error() string { return e.err.Error() }
