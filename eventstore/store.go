package eventstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Headers written on every event. The event id travels as Nats-Msg-Id so
// that the server's de-duplication and our read-back use the same identity.
const (
	HeaderEventID   = jetstream.MsgIDHeader // "Nats-Msg-Id": the event's ULID
	HeaderEventType = "Weir-Event-Type"
	HeaderSchema    = "Weir-Schema"  // schema version of the payload as written
	HeaderVersion   = "Weir-Version" // aggregate version: 1..n within one aggregate
	// HeaderPrevSeq is the stream sequence of the aggregate's previous event
	// (0 on its first). Load walks these pointers backwards from the last
	// event, which costs one lookup per event whatever the stream holds.
	// The second and later events of an atomic batch do not carry it: the
	// server commits a batch contiguously, so their predecessor is the
	// message right before them (Load verifies that).
	HeaderPrevSeq = "Weir-Prev-Seq"
)

// MaxEventsPerAppend bounds one atomic append; the server's own atomic batch
// limit is 1000, and a decision that produces more is a design smell.
const MaxEventsPerAppend = 100

// Config describes the event stream.
type Config struct {
	Stream        string        // default "WEIR_EVENTS"
	SubjectPrefix string        // default "weir.evt"; subjects are <prefix>.<aggregateType>.<id>
	Replicas      int           // default 1
	Memory        bool          // memory storage for the stream (tests)
	DedupWindow   time.Duration // default 2m

	// ResolveTimeout bounds the read-back that settles an append whose
	// outcome is unknown; it runs even when the caller's context has
	// expired, because leaving the outcome unknown is the worse choice.
	// Default 5s.
	ResolveTimeout time.Duration
	// AmbiguousRetries is how many times an append that provably did not
	// land (yet) is re-sent with the same event ids before ErrOutcomeUnknown.
	// Default 1; a negative value disables re-sending.
	AmbiguousRetries int

	// Sealer tags every appended event and verifies every event read
	// (Load, Subscribe, ReadAll, Consume); an event that does not verify is
	// an *IntegrityError. nil: events are written without a tag and read
	// without a check.
	Sealer Sealer

	// GroupCommit gathers the appends that arrive while one is being
	// stored and sends them as one atomic batch, synced once (see
	// groupCommit). For a one-node server that fsyncs every write, where
	// each message otherwise costs one fsync; elsewhere it only adds a
	// wait.
	GroupCommit bool
	// GroupCommitMinBatch is how many waiting messages make one batch;
	// fewer go alone, side by side. Default 16 (see gcMinBatch); tests
	// lower it to make batches out of what little waits.
	GroupCommitMinBatch int
}

func (c *Config) withDefaults() {
	if c.Stream == "" {
		c.Stream = "WEIR_EVENTS"
	}
	if c.SubjectPrefix == "" {
		c.SubjectPrefix = "weir.evt"
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.DedupWindow == 0 {
		c.DedupWindow = 2 * time.Minute
	}
	if c.ResolveTimeout <= 0 {
		c.ResolveTimeout = 5 * time.Second
	}
	if c.AmbiguousRetries == 0 {
		c.AmbiguousRetries = 1
	} else if c.AmbiguousRetries < 0 {
		c.AmbiguousRetries = 0
	}
}

// Key names one aggregate instance: its type ("withdrawal") and id.
type Key struct{ Type, ID string }

// Position is where an aggregate stands.
type Position struct {
	Sequence uint64 // stream sequence of the aggregate's last event; 0 = aggregate empty
	Version  uint64 // number of events in the aggregate
}

// Event is what a caller appends.
type Event struct {
	// ID is the event's ULID; generated if empty. It is sent as Nats-Msg-Id.
	// A caller that may retry an append (after ErrOutcomeUnknown, or after a
	// crash) must reuse the same ids: set them before the first attempt, or
	// take them from OutcomeUnknownError.Events.
	ID   string
	Type string // must be registered
	Data any    // marshalled as JSON; json.RawMessage is used as is
}

// Record is one stored event as read back.
type Record struct {
	Key              Key
	EventID          string
	Type             string
	SchemaVersion    int // schema of Payload, i.e. the current one after upcasting
	StoredSchema     int // schema the event was written with
	AggregateVersion uint64
	Sequence         uint64    // stream sequence
	PrevSequence     uint64    // stream sequence of the aggregate's previous event, as the event's back-pointer says (0 for version 1)
	Time             time.Time // server timestamp, UTC
	Payload          json.RawMessage
}

// Store appends to and reads from the event stream.
type Store struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	cfg    Config
	reg    *Registry

	violations violationLog

	// tail, when set (UseTail), serves unfiltered Subscribes.
	tail atomic.Pointer[Tail]

	// send publishes one prepared append (one message, or an atomic batch)
	// and returns the server's ack. It is a field so that tests can lose
	// acks and drop messages deterministically; production code never
	// changes it.
	send func(ctx context.Context, msgs []*nats.Msg) (pubAck, error)
}

// pubAck is the part of a JetStream publish ack the store needs.
type pubAck struct {
	Sequence  uint64
	Duplicate bool
}

// Open creates the event stream or brings an existing one up to the settings
// the store relies on, and returns a Store.
//
// The stream is append-only by configuration (DenyDelete, DenyPurge; the
// server refuses to lift either later), de-duplicates on Nats-Msg-Id within
// DedupWindow, allows direct gets (Load's lookups) and atomic batch publish
// (multi-event appends, nats-server 2.12+).
func Open(ctx context.Context, nc *nats.Conn, cfg Config, reg *Registry) (*Store, error) {
	if nc == nil {
		return nil, errors.New("eventstore: Open: nil connection")
	}
	if reg == nil {
		return nil, errors.New("eventstore: Open: nil registry")
	}
	cfg.withDefaults()
	for _, tok := range strings.Split(cfg.SubjectPrefix, ".") {
		if err := validToken(tok); err != nil {
			return nil, fmt.Errorf("eventstore: subject prefix %q: %w", cfg.SubjectPrefix, err)
		}
	}
	if cfg.Replicas < 1 {
		return nil, fmt.Errorf("eventstore: replicas %d < 1", cfg.Replicas)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("eventstore: jetstream: %w", err)
	}

	storage := jetstream.FileStorage
	if cfg.Memory {
		storage = jetstream.MemoryStorage
	}
	subjects := []string{cfg.SubjectPrefix + ".*.*"}

	stream, err := openStream(ctx, js, cfg, storage, subjects)
	if err != nil {
		return nil, err
	}
	s := &Store{nc: nc, js: js, stream: stream, cfg: cfg, reg: reg}
	s.send = s.publish
	if cfg.GroupCommit {
		s.send = (&groupCommit{direct: s.publish, batch: s.atomicBatch,
			minBatch: cmp.Or(cfg.GroupCommitMinBatch, gcMinBatch)}).send
	}
	return s, nil
}

func openStream(ctx context.Context, js jetstream.JetStream, cfg Config, storage jetstream.StorageType, subjects []string) (jetstream.Stream, error) {
	// Two rounds: a concurrent Open may create the stream between our
	// lookup and our create; the second round adopts it.
	for round := 0; ; round++ {
		stream, err := js.Stream(ctx, cfg.Stream)
		if err == nil {
			return adoptStream(ctx, js, stream, cfg, storage, subjects)
		}
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, fmt.Errorf("eventstore: look up stream %s: %w", cfg.Stream, err)
		}
		stream, err = js.CreateStream(ctx, jetstream.StreamConfig{
			Name:               cfg.Stream,
			Description:        "weir event log (append-only)",
			Subjects:           subjects,
			Storage:            storage,
			Replicas:           cfg.Replicas,
			Retention:          jetstream.LimitsPolicy,
			Discard:            jetstream.DiscardOld,
			Duplicates:         cfg.DedupWindow,
			DenyDelete:         true,
			DenyPurge:          true,
			AllowDirect:        true,
			AllowAtomicPublish: true,
		})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) && round == 0 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("eventstore: create stream %s: %w", cfg.Stream, err)
		}
		return stream, nil
	}
}

func adoptStream(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, cfg Config, storage jetstream.StorageType, subjects []string) (jetstream.Stream, error) {
	cur := stream.CachedInfo().Config
	if cur.Storage != storage {
		return nil, fmt.Errorf("%w: %s has storage %s, want %s", ErrStreamMismatch, cfg.Stream, cur.Storage, storage)
	}
	if !slices.Equal(cur.Subjects, subjects) {
		return nil, fmt.Errorf("%w: %s has subjects %v, want %v", ErrStreamMismatch, cfg.Stream, cur.Subjects, subjects)
	}
	if cur.Replicas == cfg.Replicas && cur.Duplicates == cfg.DedupWindow && cur.DenyDelete &&
		cur.DenyPurge && cur.AllowDirect && cur.AllowAtomicPublish {
		return stream, nil
	}
	// Keep whatever else an operator set (limits, placement); change only
	// what the store depends on.
	want := cur
	want.Replicas = cfg.Replicas
	want.Duplicates = cfg.DedupWindow
	want.DenyDelete = true
	want.DenyPurge = true
	want.AllowDirect = true
	want.AllowAtomicPublish = true
	stream, err := js.UpdateStream(ctx, want)
	if err != nil {
		return nil, fmt.Errorf("eventstore: update stream %s: %w", cfg.Stream, err)
	}
	return stream, nil
}

// Subject is the subject holding k's events.
func (s *Store) Subject(k Key) string {
	return s.cfg.SubjectPrefix + "." + k.Type + "." + k.ID
}

// Sealer is the Sealer the store was opened with (nil: none), for other
// derived data that wants to be authenticated the same way.
func (s *Store) Sealer() Sealer { return s.cfg.Sealer }

// StreamName is the JetStream stream the store writes to.
func (s *Store) StreamName() string { return s.cfg.Stream }

// LastSequence is the stream's last sequence, for projection lag.
func (s *Store) LastSequence(ctx context.Context) (uint64, error) {
	info, err := s.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("eventstore: stream info: %w", err)
	}
	return info.State.LastSeq, nil
}

// Validate reports whether k can name an aggregate.
func (k Key) Validate() error {
	if err := validToken(k.Type); err != nil {
		return fmt.Errorf("%w: type %q: %v", ErrInvalidKey, k.Type, err)
	}
	if err := validToken(k.ID); err != nil {
		return fmt.Errorf("%w: id %q: %v", ErrInvalidKey, k.ID, err)
	}
	return nil
}

// keyFromSubject parses <prefix>.<type>.<id>.
func (s *Store) keyFromSubject(subject string) (Key, error) {
	rest, ok := strings.CutPrefix(subject, s.cfg.SubjectPrefix+".")
	if !ok {
		return Key{}, fmt.Errorf("%w: subject %q outside prefix %q", ErrCorrupt, subject, s.cfg.SubjectPrefix)
	}
	typ, id, ok := strings.Cut(rest, ".")
	if !ok || strings.Contains(id, ".") {
		return Key{}, fmt.Errorf("%w: subject %q is not <prefix>.<type>.<id>", ErrCorrupt, subject)
	}
	return Key{Type: typ, ID: id}, nil
}

// validToken accepts one NATS subject token: non-empty, and none of the
// characters that would split it or make it a wildcard.
func validToken(tok string) error {
	if tok == "" {
		return errors.New("empty")
	}
	for _, r := range tok {
		switch {
		case r == '.' || r == '*' || r == '>':
			return fmt.Errorf("contains %q", r)
		case unicode.IsSpace(r) || unicode.IsControl(r):
			return errors.New("contains whitespace or control characters")
		case r == unicode.ReplacementChar:
			return errors.New("not valid UTF-8")
		}
	}
	return nil
}

// validHeaderValue accepts values we put in headers (event types, ids):
// printable ASCII without spaces, so header encoding cannot mangle them.
func validHeaderValue(v string) error {
	if v == "" {
		return errors.New("empty")
	}
	if len(v) > 128 {
		return errors.New("longer than 128 bytes")
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= ' ' || c >= 0x7f || c == ':' {
			return fmt.Errorf("byte %q not allowed", c)
		}
	}
	return nil
}
