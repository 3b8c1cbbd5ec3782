package eventstore

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// ErrIntegrity: a stored event that cannot be trusted — its tag does not
// verify, its headers are not the store's, it cannot be decoded, or its
// type is unknown. Such an event is quarantined: readers never fold it, and
// Load refuses the aggregate holding it.
var ErrIntegrity = errors.New("eventstore: integrity violation")

// IntegrityError names one quarantined event by its stream sequence.
type IntegrityError struct {
	Sequence uint64
	Subject  string
	Key      Key    // zero when the subject is not <prefix>.<type>.<id>
	EventID  string // as the headers claim, possibly empty
	Type     string // as the headers claim, possibly empty
	Err      error  // what failed (ErrBadTag, ErrCorrupt, ErrUnknownEventType, …)
}

func (e *IntegrityError) Error() string {
	return fmt.Sprintf("eventstore: integrity violation at stream seq %d (%s, type %q): %v", e.Sequence, e.Subject, e.Type, e.Err)
}

// Is makes errors.Is(err, ErrIntegrity) true.
func (e *IntegrityError) Is(target error) bool { return target == ErrIntegrity }

// Unwrap exposes the cause.
func (e *IntegrityError) Unwrap() error { return e.Err }

func newIntegrityError(m *storedMsg, k Key, err error) *IntegrityError {
	return &IntegrityError{
		Sequence: m.Sequence, Subject: m.Subject, Key: k,
		EventID: m.Header.Get(HeaderEventID), Type: m.Header.Get(HeaderEventType), Err: err,
	}
}

// maxViolationsKept bounds the store's memory of violations; the count
// keeps growing past it.
const maxViolationsKept = 1000

// violationLog is what the store has seen quarantined, by stream sequence.
type violationLog struct {
	mu    sync.Mutex
	seen  map[uint64]IntegrityError
	count int
}

// NoteViolation records a violation (idempotent per stream sequence). The
// store notes every one it detects; a reader that learned of one another
// way (a projection restoring its checkpoint) notes it here too, so that
// Violations is the process's one list.
func (s *Store) NoteViolation(v *IntegrityError) {
	l := &s.violations
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[uint64]IntegrityError{}
	}
	if _, ok := l.seen[v.Sequence]; ok {
		return
	}
	l.count++
	if len(l.seen) < maxViolationsKept {
		l.seen[v.Sequence] = *v
	}
}

// Violations lists the quarantined events this store has seen, by stream
// sequence, and how many there were in all.
func (s *Store) Violations() ([]IntegrityError, int) {
	l := &s.violations
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]IntegrityError, 0, len(l.seen))
	for _, v := range l.seen {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b IntegrityError) int { return cmp.Compare(a.Sequence, b.Sequence) })
	return out, l.count
}

// ReadOption changes how Subscribe, ReadAll and Consume treat records.
type ReadOption func(*readOptions)

type readOptions struct {
	onViolation func(*IntegrityError) error
}

// OnViolation makes a read go on past quarantined events: fn is called
// with each one instead of the handler, and the read continues when it
// returns nil (Consume acknowledges the event). Without it, a quarantined
// event stops the read with its *IntegrityError, as an undecodable one
// always did.
func OnViolation(fn func(*IntegrityError) error) ReadOption {
	return func(o *readOptions) { o.onViolation = fn }
}

func readOpts(opts []ReadOption) readOptions {
	var o readOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// quarantine handles a record that failed decoding or verification during
// a read: noted, then handed to the caller's OnViolation or returned.
func (s *Store) quarantine(o readOptions, err error) error {
	var ie *IntegrityError
	if !errors.As(err, &ie) {
		return err
	}
	s.NoteViolation(ie)
	if o.onViolation == nil {
		return err
	}
	return o.onViolation(ie)
}
