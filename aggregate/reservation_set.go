package aggregate

import (
	"hash/maphash"
	"iter"
)

// reservationShards splits an account's reservations so that a fold copies
// only the part an event changes: a busy account with thousands of held
// reservations costs a request about 1/reservationShards of them, not all.
const reservationShards = 64

var reservationSeed = maphash.MakeSeed()

// reservationSet is an account's reservations by withdrawal id, shared
// copy-on-write between successive states: a state obtained from
// Account.owned shares every shard with the state it was made from and
// copies a shard the first time it changes it (mine records which shards
// it has copied). A state is read-only once handed out; only the fold that
// made it writes it, as for the other maps of Account.
//
// Shards hold pointers, never written through once stored (put stores a
// new one), so copying a shard copies a pointer per reservation, not the
// reservation.
type reservationSet struct {
	shards [reservationShards]map[string]*Reservation
	mine   uint64
	n      int
}

func reservationShard(id string) int {
	return int(maphash.String(reservationSeed, id) % reservationShards)
}

func (s *reservationSet) get(id string) (Reservation, bool) {
	if r, ok := s.shards[reservationShard(id)][id]; ok {
		return *r, true
	}
	return Reservation{}, false
}

func (s *reservationSet) put(r Reservation) {
	i := s.own(r.WithdrawalID)
	if _, ok := s.shards[i][r.WithdrawalID]; !ok {
		s.n++
	}
	s.shards[i][r.WithdrawalID] = &r
}

func (s *reservationSet) del(id string) {
	if _, ok := s.get(id); !ok {
		return
	}
	delete(s.shards[s.own(id)], id)
	s.n--
}

// own makes id's shard this state's own and returns its index.
func (s *reservationSet) own(id string) int {
	i := reservationShard(id)
	if s.mine&(1<<i) == 0 {
		s.shards[i] = cloneOrMake(s.shards[i])
		s.mine |= 1 << i
	}
	return i
}

// shared returns a copy that shares every shard and owns none.
func (s reservationSet) shared() reservationSet {
	s.mine = 0
	return s
}

func (s *reservationSet) len() int { return s.n }

func (s *reservationSet) all() iter.Seq2[string, Reservation] {
	return func(yield func(string, Reservation) bool) {
		for _, m := range s.shards {
			for id, r := range m {
				if !yield(id, *r) {
					return
				}
			}
		}
	}
}

func reservationsFrom(m map[string]Reservation) reservationSet {
	var s reservationSet
	for _, r := range m {
		s.put(r)
	}
	return s
}
