package eventstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Subscribe delivers records from stream sequence fromSeq (inclusive; 0 and
// 1 both mean the beginning) in stream order, then keeps delivering new ones
// as they are appended. filterType limits it to one aggregate type ("" = all).
// It blocks until handle returns an error (returned as is), ctx is done
// (ctx.Err()), or the stream cannot be read.
//
// It uses an ordered consumer: no server-side state to clean up, gaps are
// detected and the consumer is recreated from the last delivered sequence,
// so handle sees every matching record once and in order. With a Tail in
// use (UseTail), an unfiltered Subscribe shares the Tail's consumer and
// hands over the same records. A record that does not verify or cannot be
// decoded (unknown type, unknown schema) is an *IntegrityError: it stops
// the subscription rather than being skipped silently, unless OnViolation
// says what to do with it.
func (s *Store) Subscribe(ctx context.Context, fromSeq uint64, filterType string, handle func(Record) error, opts ...ReadOption) error {
	if t := s.tail.Load(); t != nil && filterType == "" {
		return t.subscribe(ctx, s, fromSeq, handle, opts...)
	}
	return s.subscribe(ctx, fromSeq, filterType, handle, opts...)
}

// subscribe is Subscribe on an ordered consumer of its own.
func (s *Store) subscribe(ctx context.Context, fromSeq uint64, filterType string, handle func(Record) error, opts ...ReadOption) error {
	o := readOpts(opts)
	it, _, err := s.iterate(ctx, fromSeq, filterType)
	if err != nil {
		return err
	}
	defer it.stop(ctx)
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			return fmt.Errorf("eventstore: subscribe: %w", err)
		}
		rec, err := s.decodeStreamMsg(msg)
		if err != nil {
			if err := s.quarantine(o, err); err != nil {
				return err
			}
			continue
		}
		if err := handle(rec); err != nil {
			return err
		}
	}
}

// ReadAll delivers matching records from fromSeq up to the stream's end as
// of the call, then returns. lastSeq is the stream sequence the caller has
// now seen everything up to: the stream's last sequence at the call, or, on
// an error, the sequence of the last record handled (fromSeq-1 if none). A
// projection checkpoints lastSeq and resumes with lastSeq+1.
// Quarantined records are treated as on Subscribe.
func (s *Store) ReadAll(ctx context.Context, fromSeq uint64, filterType string, handle func(Record) error, opts ...ReadOption) (uint64, error) {
	o := readOpts(opts)
	if fromSeq == 0 {
		fromSeq = 1
	}
	end, err := s.LastSequence(ctx)
	if err != nil {
		return fromSeq - 1, err
	}
	if end < fromSeq {
		return fromSeq - 1, nil
	}
	it, pending, err := s.iterate(ctx, fromSeq, filterType)
	if err != nil {
		return fromSeq - 1, err
	}
	defer it.stop(ctx)
	if pending == 0 {
		// Nothing matches from fromSeq on; an iterator would wait forever.
		return end, nil
	}
	done := fromSeq - 1
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return done, ctxErr
			}
			return done, fmt.Errorf("eventstore: read: %w", err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			return done, fmt.Errorf("eventstore: read: %w", err)
		}
		seq := meta.Sequence.Stream
		if seq > end {
			return end, nil
		}
		rec, err := s.decodeStreamMsg(msg)
		if err == nil {
			err = handle(rec)
		} else {
			err = s.quarantine(o, err)
		}
		if err != nil {
			return done, err
		}
		done = seq
		// NumPending counts matching messages after this one: zero means
		// the filter has nothing more right now.
		if seq == end || meta.NumPending == 0 {
			return end, nil
		}
	}
}

// iterator is an ordered consumer's message iterator plus what is needed to
// remove the consumer from the server when done.
type iterator struct {
	jetstream.MessagesContext
	js     jetstream.JetStream
	cons   jetstream.Consumer
	stream string
}

// stop ends the iteration and deletes the server-side consumer. Stopping the
// iterator alone leaves the consumer until its inactivity threshold, and a
// projection calling ReadAll in a loop would pile them up.
func (it *iterator) stop(ctx context.Context) {
	it.Stop()
	info := it.cons.CachedInfo()
	if info == nil {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	// Best effort: the inactivity threshold removes it anyway.
	_ = it.js.DeleteConsumer(dctx, it.stream, info.Name)
}

// iterate opens an ordered consumer from fromSeq and reports how many
// matching messages the server counted when creating it.
func (s *Store) iterate(ctx context.Context, fromSeq uint64, filterType string) (*iterator, uint64, error) {
	filter := s.cfg.SubjectPrefix + ".*.*"
	if filterType != "" {
		if err := validToken(filterType); err != nil {
			return nil, 0, fmt.Errorf("%w: filter type %q: %v", ErrInvalidKey, filterType, err)
		}
		filter = s.cfg.SubjectPrefix + "." + filterType + ".*"
	}
	if fromSeq == 0 {
		fromSeq = 1
	}
	cons, err := s.js.OrderedConsumer(ctx, s.cfg.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    fromSeq,
		// Backstop for a process that dies mid-read; a live iterator keeps
		// its consumer active.
		InactiveThreshold: time.Minute,
		// Bounded: nats.go retries re-creating a lost ordered consumer
		// forever by default, holding a lock that Stop needs, so a stream
		// that is gone would hang Next and every shutdown behind it. After
		// ~3 s Next fails and the caller decides (a projector retries).
		MaxResetAttempts: 3,
	})
	if err != nil {
		return nil, 0, fmt.Errorf("eventstore: ordered consumer: %w", err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, 0, fmt.Errorf("eventstore: ordered consumer: %w", err)
	}
	iter := &iterator{MessagesContext: it, js: s.js, cons: cons, stream: s.cfg.Stream}
	info := cons.CachedInfo()
	if info == nil {
		iter.Stop()
		return nil, 0, errors.New("eventstore: ordered consumer: no consumer info after creation")
	}
	return iter, info.NumPending, nil
}

func (s *Store) decodeStreamMsg(msg jetstream.Msg) (Record, error) {
	meta, err := msg.Metadata()
	if err != nil {
		return Record{}, fmt.Errorf("eventstore: read: %w", err)
	}
	m := &storedMsg{
		Subject:  msg.Subject(),
		Sequence: meta.Sequence.Stream,
		Header:   msg.Headers(),
		Data:     msg.Data(),
		Time:     meta.Timestamp,
	}
	k, err := s.keyFromSubject(m.Subject)
	if err != nil {
		return Record{}, newIntegrityError(m, Key{}, err)
	}
	em, err := parseMeta(m, "")
	if err != nil {
		return Record{}, newIntegrityError(m, k, err)
	}
	if err := s.verifyTag(m); err != nil {
		return Record{}, newIntegrityError(m, k, err)
	}
	rec, err := s.decode(k, m, em)
	if err != nil {
		return Record{}, newIntegrityError(m, k, err)
	}
	return rec, nil
}
