package eventstore

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
)

// Server error codes the append protocol acts on.
const (
	codeWrongLastSeq         = jetstream.JSErrCodeStreamWrongLastSequence         // 10071: OCC refused (single server, or stale cached check)
	codeWrongLastSeqConstant = jetstream.JSErrCodeStreamWrongLastSequenceConstant // 10164: OCC refused on a replicated stream
	codeDupInProcess         = jetstream.ErrorCode(10158)                         // same Nats-Msg-Id still being proposed (cluster)
	codeBatchDuplicate       = jetstream.ErrorCode(10201)                         // an atomic batch holds an already stored Nats-Msg-Id
)

// Batch headers of nats-server's atomic publish (2.12+).
const (
	hdrBatchID     = "Nats-Batch-Id"
	hdrBatchSeq    = "Nats-Batch-Sequence"
	hdrBatchCommit = "Nats-Batch-Commit"
)

// NewEventID mints an event id (a ULID). Callers that want to retry an append
// across process restarts mint ids up front and persist them with the command.
func NewEventID() string { return ulid.Make().String() }

// Append writes events to k's subject if, and only if, the aggregate still
// stands at expected. It returns the new position, a *ConflictError
// (errors.Is ErrConflict) carrying the actual position, or a hard error;
// never a guess.
//
// expected must be a Position returned by Load or Append for k (the zero
// Position for a new aggregate): the server checks its Sequence, and its
// Version numbers the new events.
//
// One event is one JetStream publish with Nats-Expected-Last-Subject-Sequence
// set to expected.Sequence: the server checks the subject's last sequence,
// and 0 means "the subject holds no message" (checked on this server
// version: an empty subject passes with 0, a non-empty one is refused with
// 10071). Several events are one atomic batch with the expectation on the
// first message: all land or none does.
//
// When the outcome is unknown (timeout, lost ack, cut connection) or the
// refusal may be our own earlier attempt (a single server checks the
// expectation before de-duplication, so a retried append that had landed
// comes back as 10071), the store reads the subject back and looks for the
// event that holds the slot right after expected:
//   - it is ours: success, with the position after our events;
//   - it is someone else's: conflict, definitive, since our message carries a
//     now stale expectation and can never land later;
//   - the slot is empty: the append did not land (yet); it is re-sent with the
//     same ids, which is always safe (expectation + de-duplication), up to
//     Config.AmbiguousRetries times, then *OutcomeUnknownError.
func (s *Store) Append(ctx context.Context, k Key, expected Position, events ...Event) (Position, error) {
	if err := k.Validate(); err != nil {
		return Position{}, err
	}
	// The server checks the sequence; the version is written as given, so
	// it must come from Load or Append. What can be checked here is.
	if (expected.Sequence == 0) != (expected.Version == 0) || expected.Version > expected.Sequence {
		return Position{}, fmt.Errorf("%w: %+v", ErrInvalidPosition, expected)
	}
	if len(events) == 0 {
		return Position{}, fmt.Errorf("%w: no events", ErrInvalidEvent)
	}
	if len(events) > MaxEventsPerAppend {
		return Position{}, fmt.Errorf("%w: %d events in one append (max %d)", ErrInvalidEvent, len(events), MaxEventsPerAppend)
	}
	if err := ctx.Err(); err != nil {
		return Position{}, err
	}
	msgs, sent, generated, err := s.prepare(k, expected, events)
	if err != nil {
		return Position{}, err
	}
	return s.commit(ctx, k, expected, msgs, sent, generated)
}

// prepare encodes events into messages; nothing is sent, so every error here
// leaves the store untouched.
func (s *Store) prepare(k Key, expected Position, events []Event) ([]*nats.Msg, []Event, bool, error) {
	subj := s.Subject(k)
	msgs := make([]*nats.Msg, len(events))
	sent := make([]Event, len(events))
	seen := make(map[string]struct{}, len(events))
	generated := true
	for i, ev := range events {
		schema, ok := s.reg.CurrentSchema(ev.Type)
		if !ok {
			return nil, nil, false, fmt.Errorf("%w: %q (event %d of %d)", ErrUnknownEventType, ev.Type, i+1, len(events))
		}
		if ev.ID == "" {
			ev.ID = NewEventID()
		} else {
			generated = false
			if err := validHeaderValue(ev.ID); err != nil {
				return nil, nil, false, fmt.Errorf("%w: id %q: %v", ErrInvalidEvent, ev.ID, err)
			}
		}
		if _, dup := seen[ev.ID]; dup {
			return nil, nil, false, fmt.Errorf("%w: id %s repeated in one append", ErrInvalidEvent, ev.ID)
		}
		seen[ev.ID] = struct{}{}
		data, err := encodePayload(ev.Data)
		if err != nil {
			return nil, nil, false, fmt.Errorf("%w: %s payload: %v", ErrInvalidEvent, ev.Type, err)
		}
		m := nats.NewMsg(subj)
		m.Data = data
		m.Header.Set(HeaderEventID, ev.ID)
		m.Header.Set(HeaderEventType, ev.Type)
		m.Header.Set(HeaderSchema, strconv.Itoa(schema))
		m.Header.Set(HeaderVersion, strconv.FormatUint(expected.Version+uint64(i)+1, 10))
		if i == 0 {
			seq := strconv.FormatUint(expected.Sequence, 10)
			m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, seq)
			m.Header.Set(HeaderPrevSeq, seq)
		}
		if s.cfg.Sealer != nil {
			buf := sealBufs.Get().(*[]byte)
			*buf = eventSealInput(*buf, subj, m.Header, m.Data)
			keyID, tag := s.cfg.Sealer.Seal(*buf)
			sealBufs.Put(buf)
			m.Header.Set(HeaderKeyID, keyID)
			m.Header.Set(HeaderTag, hex.EncodeToString(tag))
		}
		msgs[i] = m
		sent[i] = ev
	}
	return msgs, sent, generated, nil
}

func encodePayload(v any) ([]byte, error) {
	switch d := v.(type) {
	case json.RawMessage:
		if !json.Valid(d) {
			return nil, errors.New("json.RawMessage is not valid JSON")
		}
		return d, nil
	case nil:
		return []byte("null"), nil
	default:
		return json.Marshal(v)
	}
}

// commit runs the send / resolve protocol described on Append.
func (s *Store) commit(ctx context.Context, k Key, expected Position, msgs []*nats.Msg, events []Event, generated bool) (Position, error) {
	n := uint64(len(msgs))
	unknown := func(err error) error {
		return &OutcomeUnknownError{Key: k, Expected: expected, Events: events, Err: err}
	}
	for attempt := 0; ; attempt++ {
		ack, sendErr := s.send(ctx, msgs)
		if sendErr == nil && !ack.Duplicate {
			return Position{Sequence: ack.Sequence, Version: expected.Version + n}, nil
		}

		// Decide what the failure tells us before reading anything back.
		var (
			mayBeOurs = true  // the slot holder could be an earlier send of these ids
			refused   = false // the server answered "no" (so nothing of this send was stored)
			dup       = false // the server says one of our ids is already stored
		)
		var apiErr *jetstream.APIError
		var notSent *notSentError
		var alone *aloneAfterBatchError
		switch {
		case sendErr == nil: // duplicate ack (de-duplication ran first, as on a cluster)
			dup = true
		case errors.As(sendErr, &notSent) && ctx.Err() != nil:
			// Never sent, and its caller gave up while it waited for its
			// turn (group commit): nothing to read back.
			return Position{}, fmt.Errorf("eventstore: append to %s: %w", s.Subject(k), sendErr)
		case errors.As(sendErr, &apiErr):
			switch apiErr.ErrorCode {
			case codeWrongLastSeq, codeWrongLastSeqConstant:
				refused = true
				// Ids we minted in this call on its first send cannot be
				// in the stream already: a plain conflict, no walk needed
				// (unless a batch they were in came first: read back).
				mayBeOurs = !(generated && attempt == 0) || errors.As(sendErr, &alone)
			case codeBatchDuplicate:
				refused, dup = true, true
			case codeDupInProcess:
				refused = true
			default:
				// Any other answer from the stream is a definitive refusal
				// of a bad request; nothing was stored.
				return Position{}, fmt.Errorf("eventstore: append to %s: %w", s.Subject(k), sendErr)
			}
		case isLocalRefusal(sendErr):
			return Position{}, fmt.Errorf("eventstore: append to %s: %w", s.Subject(k), sendErr)
		}

		res, err := s.resolve(ctx, k, expected, events, mayBeOurs)
		if err != nil {
			if errors.Is(err, ErrInvalidPosition) || errors.Is(err, ErrCorrupt) {
				return Position{}, err
			}
			return Position{}, unknown(errors.Join(sendErr, err))
		}
		switch res.verdict {
		case verdictLanded:
			return res.pos, nil
		case verdictTaken:
			if dup {
				// The server holds one of our ids, but not in this slot.
				return Position{}, fmt.Errorf("%w: append to %s at seq %d", ErrEventIDReused, s.Subject(k), expected.Sequence)
			}
			return Position{}, &ConflictError{Key: k, Expected: expected, Actual: res.pos}
		}

		// Slot empty: nothing of ours is visible.
		if dup {
			return Position{}, fmt.Errorf("%w: append to %s at seq %d", ErrEventIDReused, s.Subject(k), expected.Sequence)
		}
		if attempt >= s.cfg.AmbiguousRetries || ctx.Err() != nil {
			if sendErr == nil {
				sendErr = errors.New("slot still empty after refusal")
			}
			if ctx.Err() != nil {
				sendErr = errors.Join(sendErr, ctx.Err())
			}
			return Position{}, unknown(sendErr)
		}
		if refused {
			// A refusal while the slot looks empty means another append to
			// this subject is in flight on a cluster (10164 / 10158); give
			// it a moment before sending again.
			t := time.NewTimer(time.Duration(attempt+1) * 20 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return Position{}, unknown(errors.Join(sendErr, ctx.Err()))
			case <-t.C:
			}
		}
	}
}

// isLocalRefusal reports client-side errors raised before anything left the
// process: re-sending or reading back cannot help and nothing was stored.
func isLocalRefusal(err error) bool {
	return errors.Is(err, nats.ErrBadSubject) ||
		errors.Is(err, nats.ErrMaxPayload) ||
		errors.Is(err, nats.ErrHeadersNotSupported) ||
		errors.Is(err, jetstream.ErrInvalidOption)
}

type verdict int

const (
	verdictEmpty  verdict = iota // nothing after expected
	verdictLanded                // our events follow expected
	verdictTaken                 // another writer's event follows expected
)

type resolution struct {
	verdict verdict
	pos     Position // landed: after our events; taken: the aggregate's actual position
}

// resolve reads the subject back to settle an append. It uses the stream
// leader (not direct gets, which a lagging replica may answer) and its own
// deadline, because an expired caller context must not leave the outcome
// unknown when one more round trip would settle it.
func (s *Store) resolve(ctx context.Context, k Key, expected Position, events []Event, mayBeOurs bool) (resolution, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ResolveTimeout)
	defer cancel()
	subj := s.Subject(k)

	last, err := s.readBack(rctx, msgGetRequest{LastFor: subj})
	if errors.Is(err, errMsgNotFound) {
		if expected.Sequence == 0 {
			return resolution{verdict: verdictEmpty}, nil
		}
		// The caller expects events that are not there.
		return resolution{verdict: verdictTaken}, nil
	}
	if err != nil {
		return resolution{}, fmt.Errorf("read back %s: %w", subj, err)
	}
	lm, err := parseMeta(last, subj)
	if err != nil {
		return resolution{}, err
	}
	actual := Position{Sequence: last.Sequence, Version: lm.version}
	switch {
	case last.Sequence == expected.Sequence:
		if lm.version != expected.Version {
			return resolution{}, fmt.Errorf("%w: seq %d holds version %d, caller expected version %d",
				ErrInvalidPosition, expected.Sequence, lm.version, expected.Version)
		}
		return resolution{verdict: verdictEmpty}, nil
	case last.Sequence < expected.Sequence || lm.version <= expected.Version || !mayBeOurs:
		return resolution{verdict: verdictTaken, pos: actual}, nil
	}

	// Walk back from the last event to the one right after expected,
	// remembering the ids on the way: if the slot holder is ours, the rest
	// of our batch is among them.
	n := uint64(len(events))
	ids := make(map[uint64]string) // version -> event id, for versions in (expected, expected+n]
	cur, cm := last, lm
	for {
		if cm.version <= expected.Version+n {
			ids[cm.version] = cm.id
		}
		if cm.version == expected.Version+1 {
			break
		}
		prev, err := s.prevMsg(rctx, cur, cm, subj, true)
		if err != nil {
			return resolution{}, err
		}
		cur = prev
		if cm, err = parseMeta(cur, subj); err != nil {
			return resolution{}, err
		}
	}
	if cm.prevSeq != expected.Sequence || cm.id != events[0].ID {
		return resolution{verdict: verdictTaken, pos: actual}, nil
	}
	// Our id in the slot is ours only if our key made it: a writer that
	// copied the id of an append in flight must not make it look landed.
	if err := s.verifyTag(cur); err != nil {
		return resolution{verdict: verdictTaken, pos: actual}, nil
	}
	for i, ev := range events {
		v := expected.Version + uint64(i) + 1
		if ids[v] != ev.ID {
			return resolution{}, fmt.Errorf("%w: %s version %d holds event %q, the batch sent %q",
				ErrCorrupt, subj, v, ids[v], ev.ID)
		}
	}
	// The sequence of our last event: walk forward is not possible, but an
	// atomic batch is contiguous, so it is the first event's plus n-1.
	return resolution{verdict: verdictLanded, pos: Position{Sequence: cur.Sequence + n - 1, Version: expected.Version + n}}, nil
}

// readBack is a leader get that survives the failure it is settling: a
// request written into a connection that was already cut is lost without an
// error, so each attempt gets a slice of the budget and a lost or refused
// read is simply asked again (reads are idempotent).
func (s *Store) readBack(ctx context.Context, req msgGetRequest) (*storedMsg, error) {
	per := max(s.cfg.ResolveTimeout/5, 200*time.Millisecond)
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, per)
		m, err := s.leaderGet(actx, req)
		cancel()
		if err == nil || errors.Is(err, errMsgNotFound) || ctx.Err() != nil || !transient(err) {
			return m, err
		}
		if errors.Is(err, nats.ErrNoResponders) {
			// Nobody serves the stream right now (leader election, or the
			// connection just came back): do not spin.
			t := time.NewTimer(time.Duration(attempt+1) * 20 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, err
			case <-t.C:
			}
		}
	}
}

// transient reports failures of one request that say nothing about the data.
func transient(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.Is(err, nats.ErrDisconnected)
}

// publish is the production send: the single-event fast path is one
// JetStream publish; several events go as one atomic batch.
func (s *Store) publish(ctx context.Context, msgs []*nats.Msg) (pubAck, error) {
	if len(msgs) == 1 {
		ack, err := s.js.PublishMsg(ctx, msgs[0])
		if err != nil {
			return pubAck{}, err
		}
		return pubAck{Sequence: ack.Sequence, Duplicate: ack.Duplicate}, nil
	}
	return s.publishBatch(ctx, msgs)
}

type batchAck struct {
	Error     *jetstream.APIError `json:"error,omitempty"`
	Stream    string              `json:"stream"`
	Sequence  uint64              `json:"seq"`
	Duplicate bool                `json:"duplicate,omitempty"`
	BatchID   string              `json:"batch,omitempty"`
	Count     int                 `json:"count,omitempty"`
}

// ErrUnexpectedAck marks an answer to a publish that cannot be read, or
// is not this publish's: what was stored is unknown, and only reading the
// stream tells (for an append, the read-back decides).
var ErrUnexpectedAck = errors.New("eventstore: unexpected publish ack")

// publishBatch sends msgs, one append's events, as one nats-server atomic
// batch (atomicBatch).
func (s *Store) publishBatch(ctx context.Context, msgs []*nats.Msg) (pubAck, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	ack, err := s.atomicBatch(ctx, msgs)
	if err != nil {
		return pubAck{}, err
	}
	return pubAck{Sequence: ack.Sequence, Duplicate: ack.Duplicate}, nil
}

// atomicBatch sends msgs as one atomic batch to the store's stream
// (publishAtomic).
func (s *Store) atomicBatch(ctx context.Context, msgs []*nats.Msg) (batchAck, error) {
	return publishAtomic(ctx, s.nc, s.cfg.Stream, msgs)
}

// PublishAtomic sends msgs on nc as one nats-server atomic batch (2.12+)
// into stream, which must allow atomic publish, and returns the stream
// sequence of its last message: the batch is stored whole and contiguous,
// or not at all. An error that unwraps to a *jetstream.APIError is the
// server refusing the batch: nothing was stored. Any other error may leave
// the outcome unknown (ErrUnexpectedAck: an answer that is not this
// batch's), except the client's own refusal of a message, before the
// commit went out. msgs are not changed.
func PublishAtomic(ctx context.Context, nc *nats.Conn, stream string, msgs []*nats.Msg) (uint64, error) {
	ack, err := publishAtomic(ctx, nc, stream, msgs)
	if err == nil && ack.Duplicate {
		err = fmt.Errorf("%w: a duplicate ack for a batch of %d", ErrUnexpectedAck, len(msgs))
	}
	return ack.Sequence, err
}

// publishAtomic sends msgs as one nats-server atomic batch: every message
// carries the batch id and its 1-based position, the last one commits. Only
// the commit is a request; the server stages the others and stores all or
// none (a lost middle message makes the commit fail as incomplete). The
// server's refusal is a *batchRefusedError (nothing stored), a failure
// before the commit went out a *notSentError (nothing stored); any other
// error leaves the outcome unknown.
func publishAtomic(ctx context.Context, nc *nats.Conn, stream string, msgs []*nats.Msg) (batchAck, error) {
	// A fresh batch id per attempt: a retried attempt must not be merged
	// with the staged leftovers of an abandoned one.
	batchID := ulid.Make().String()
	var resp *nats.Msg
	for i, src := range msgs {
		m := &nats.Msg{Subject: src.Subject, Data: src.Data, Header: make(nats.Header, len(src.Header)+3)}
		for h, v := range src.Header {
			m.Header[h] = v
		}
		m.Header.Set(hdrBatchID, batchID)
		m.Header.Set(hdrBatchSeq, strconv.Itoa(i+1))
		if i < len(msgs)-1 {
			if err := nc.PublishMsg(m); err != nil {
				// No commit went out: the server abandons what it staged.
				return batchAck{}, &notSentError{err: err}
			}
			continue
		}
		m.Header.Set(hdrBatchCommit, "1")
		var err error
		if resp, err = nc.RequestMsgWithContext(ctx, m); err != nil {
			if isLocalRefusal(err) {
				return batchAck{}, &notSentError{err: err}
			}
			return batchAck{}, err
		}
	}
	var ack batchAck
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return batchAck{}, fmt.Errorf("%w: %v", ErrUnexpectedAck, err)
	}
	if ack.Error != nil {
		return batchAck{}, &batchRefusedError{err: ack.Error}
	}
	if ack.Stream != stream || ack.BatchID != batchID || ack.Count != len(msgs) || ack.Sequence < uint64(len(msgs)) {
		return batchAck{}, fmt.Errorf("%w: %s", ErrUnexpectedAck, resp.Data)
	}
	return ack, nil
}

// notSentError is a send that provably never reached the stream: the
// client refused it, or a batch's commit never went out. Nothing was
// stored; it unwraps to the client's error.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// batchRefusedError is the server's answer refusing an atomic batch:
// nothing of it was stored. It unwraps to the server's *jetstream.APIError.
type batchRefusedError struct{ err error }

func (e *batchRefusedError) Error() string { return "nats: " + e.err.Error() }
func (e *batchRefusedError) Unwrap() error { return e.err }
