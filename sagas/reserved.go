package sagas

import "sync"

// reservedMax bounds the reserved set: past it, the oldest entry is
// forgotten, and the consumer loads that withdrawal as it would without the
// set. 64k entries of a few dozen bytes each cover a consumer lagging tens
// of thousands of requests behind the intake.
const reservedMax = 1 << 16

// reservedSet remembers, in this process only, the withdrawals whose
// withdrawal.funds_reserved this process appended, with that event's stream
// sequence and the account reserved on. It lets the ledger's consumer skip
// loading a withdrawal for its events that come before that funds_reserved
// in the log (its withdrawal.requested and the account.reserved its
// reservation appended): for those, the step would load the withdrawal only
// to find it reserved, and any end of the withdrawal after that is an event
// of its own, after funds_reserved, which the consumer handles with a load
// as always (handleAccount's "recorded on a withdrawal that may still be
// paid: nothing to do").
//
// It is a cache of facts already in the log, never a source of truth: an
// entry is dropped once the consumer has passed the withdrawal's
// funds_reserved, or when the set is full; a restart starts it empty; and a
// withdrawal missing from it is loaded exactly as before. No event at or
// after the remembered sequence is ever skipped, so a reservation appended
// later (a stale reserving path after a cancel) is still handled.
type reservedSet struct {
	mu   sync.Mutex
	at   map[string]reservedAt
	ring []string // insertion order, to forget the oldest when full
	next int
}

type reservedAt struct {
	seq     uint64 // stream sequence of the withdrawal's funds_reserved
	account string // the account the reservation is on
}

func newReservedSet(max int) *reservedSet {
	return &reservedSet{at: make(map[string]reservedAt), ring: make([]string, max)}
}

// add records that withdrawal id's funds_reserved, for a reservation on
// account, is in the log at stream sequence seq.
func (s *reservedSet) add(id, account string, seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.at[id]; !ok {
		if old := s.ring[s.next]; old != "" {
			delete(s.at, old)
		}
		s.ring[s.next] = id
		s.next = (s.next + 1) % len(s.ring)
	}
	s.at[id] = reservedAt{seq: seq, account: account}
}

// covers reports whether an event of withdrawal id at stream sequence seq
// comes before the funds_reserved this process appended for it; account, when
// not empty, must be the account reserved on.
func (s *reservedSet) covers(id, account string, seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.at[id]
	return ok && seq < e.seq && (account == "" || account == e.account)
}

// passed forgets withdrawal id once the consumer handles an event of it at
// or after its funds_reserved (at seq): nothing later may be skipped.
func (s *reservedSet) passed(id string, seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.at[id]; ok && seq >= e.seq {
		delete(s.at, id) // its ring slot is reused, or cleared when overwritten
	}
}

// len is the number of withdrawals remembered.
func (s *reservedSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.at)
}
