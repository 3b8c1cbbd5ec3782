package projections

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/weir-payouts/weir/aggregate/eventlog"
	"github.com/weir-payouts/weir/eventstore"
)

// Quarantined is an aggregate the views no longer show: one of its events
// did not verify (eventstore.IntegrityError) or its payload could not be
// decoded. Nothing of it is folded from that event on — it leaves the
// queues and the balances — and the rest of the log goes on being folded.
type Quarantined struct {
	Type     string `json:"type"`
	ID       string `json:"id"`
	Sequence uint64 `json:"seq"`      // stream sequence of its first bad event
	EventID  string `json:"event_id"` // as that event's headers claim
	Event    string `json:"event"`    // event type as claimed
	Reason   string `json:"reason"`
}

// Violation is the quarantine as the store's error type.
func (q Quarantined) Violation() *eventstore.IntegrityError {
	return &eventstore.IntegrityError{
		Sequence: q.Sequence, Key: eventstore.Key{Type: q.Type, ID: q.ID},
		EventID: q.EventID, Type: q.Event, Err: errors.New(q.Reason),
	}
}

// errUndecodable marks a record whose payload the domain refuses: its
// aggregate is quarantined, the projection goes on.
type errUndecodable struct{ err error }

func (e errUndecodable) Error() string { return e.err.Error() }
func (e errUndecodable) Unwrap() error { return e.err }

// quarantine takes an aggregate out of the views at seq. The first bad
// event is the one remembered; later ones of the same aggregate only move
// the position.
func (s *state) quarantine(q Quarantined) {
	k := eventstore.Key{Type: q.Type, ID: q.ID}
	if q.Sequence > s.applied {
		s.applied, s.lastEventID = q.Sequence, q.EventID
	}
	if _, ok := s.quarantined[k]; ok {
		return
	}
	s.quarantined[k] = q
	switch q.Type {
	case eventlog.TypeWithdrawal:
		if o, ok := s.withdrawals[q.ID]; ok {
			s.unindex(o.w.State, q.ID)
			delete(s.withdrawals, q.ID)
		}
	case eventlog.TypeAccount:
		delete(s.accounts, q.ID)
	}
	if s.onQuarantine != nil {
		s.onQuarantine(q)
	}
}

func quarantineOf(v *eventstore.IntegrityError) Quarantined {
	return Quarantined{Type: v.Key.Type, ID: v.Key.ID, Sequence: v.Sequence, EventID: v.EventID, Event: v.Type, Reason: v.Err.Error()}
}

// violation is the store's OnViolation hook for a state: the event is
// quarantined, never folded, and reading goes on.
func (s *state) violation(v *eventstore.IntegrityError) error {
	s.quarantine(quarantineOf(v))
	return nil
}

func (s *state) quarantinedList() []Quarantined {
	out := make([]Quarantined, 0, len(s.quarantined))
	for _, q := range s.quarantined {
		out = append(out, q)
	}
	slices.SortFunc(out, func(a, b Quarantined) int { return cmp.Compare(a.Sequence, b.Sequence) })
	return out
}

// Quarantined lists the aggregates the views refuse to show, by the
// sequence of their first bad event.
func (p *Projector) Quarantined() []Quarantined {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.st.quarantinedList()
}

// IsQuarantined reports whether the aggregate k is quarantined here.
func (p *Projector) IsQuarantined(k eventstore.Key) (Quarantined, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	q, ok := p.st.quarantined[k]
	return q, ok
}

// noteQuarantine is every state's onQuarantine: say it loudly and tell the
// store, whose list health and metrics read.
func (p *Projector) noteQuarantine(q Quarantined) {
	p.log.Error("projections: event quarantined; its aggregate is left out of every view",
		"name", p.opts.Name, "seq", q.Sequence, "aggregate", q.Type+"/"+q.ID, "event", q.Event, "reason", q.Reason)
	p.store.NoteViolation(q.Violation())
}

func (q Quarantined) String() string {
	return fmt.Sprintf("%s/%s at seq %d (%s): %s", q.Type, q.ID, q.Sequence, q.Event, q.Reason)
}
