package projections

import (
	"cmp"
	"slices"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/eventstore"
)

// Every view takes the read lock, copies what it returns and sorts it, so a
// caller can keep or change the result freely and two calls on the same
// state return the same order.

// PendingApprovals lists withdrawals waiting for approvals (state requested),
// oldest request first, then by id. Each carries RequiredApprovals and the
// Approvals given so far.
func (p *Projector) PendingApprovals() []aggregate.Withdrawal {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := p.collect(func(o openWithdrawal) bool { return true }, aggregate.StateRequested)
	slices.SortFunc(out, func(x, y aggregate.Withdrawal) int {
		return cmpTimeThenID(x.RequestedAt, y.RequestedAt, x.ID, y.ID)
	})
	return out
}

// Ready lists withdrawals the broadcast saga may take: approved with their
// amount reserved, and not held by a worker whose lease is still running at
// now. Earliest approval first, then by id.
func (p *Projector) Ready(now time.Time) []aggregate.Withdrawal {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := p.collect(func(o openWithdrawal) bool {
		return o.w.ReadyToSend() && !o.w.Claim.HeldAt(now)
	}, aggregate.StateApproved)
	slices.SortFunc(out, func(x, y aggregate.Withdrawal) int {
		return cmpTimeThenID(x.ApprovedAt, y.ApprovedAt, x.ID, y.ID)
	})
	return out
}

// Folded returns open withdrawal id as this projector folded it, with the
// position of the last event it folded (sagas.Folder): a worker starts from
// it and reads from the log only what came after — the subject's last
// event, when nothing did — instead of every event from the first. The
// state is the same fold of the same verified records a load makes, and
// the reader checks that the log passes through the position. False when
// the withdrawal is not open here (never seen, or ended).
func (p *Projector) Folded(id string) (aggregate.Withdrawal, eventstore.Position, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	o, ok := p.st.withdrawals[id]
	if !ok || o.seq == 0 {
		return aggregate.Withdrawal{}, eventstore.Position{}, false
	}
	return cloneWithdrawal(o.w), eventstore.Position{Sequence: o.seq, Version: o.w.Version}, true
}

// ReadyIDs appends to dst the ids Ready(now) lists, in the same order,
// without copying the withdrawals: a broadcast worker looks for work far
// more often than the queue changes, and copying and sorting every queued
// withdrawal on each look was most of its CPU (sagas.IDLister).
func (p *Projector) ReadyIDs(now time.Time, dst []string) []string {
	type entry struct {
		at time.Time
		id string
	}
	p.mu.RLock()
	set := p.st.byState[aggregate.StateApproved]
	ready := make([]entry, 0, len(set))
	for id := range set {
		if o := p.st.withdrawals[id]; o.w.ReadyToSend() && !o.w.Claim.HeldAt(now) {
			ready = append(ready, entry{o.w.ApprovedAt, id})
		}
	}
	p.mu.RUnlock()
	slices.SortFunc(ready, func(x, y entry) int { return cmpTimeThenID(x.at, y.at, x.id, y.id) })
	for _, e := range ready {
		dst = append(dst, e.id)
	}
	return dst
}

// InFlightIDs appends to dst, in id order, the ids of the in-flight
// withdrawals (signing … broadcast) that no worker other than worker holds
// a live lease on at now: those worker may visit (sagas.IDLister).
func (p *Projector) InFlightIDs(now time.Time, worker string, dst []string) []string {
	from := len(dst)
	p.mu.RLock()
	for _, st := range aggregate.States() {
		if !st.IsInFlight() {
			continue
		}
		for id := range p.st.byState[st] {
			if c := p.st.withdrawals[id].w.Claim; !c.HeldAt(now) || c.Worker == worker {
				dst = append(dst, id)
			}
		}
	}
	p.mu.RUnlock()
	slices.Sort(dst[from:])
	return dst
}

// InFlightItem is one withdrawal between its first envelope and an outcome
// (signing … broadcast), with what an operator needs to judge it.
type InFlightItem struct {
	Withdrawal aggregate.Withdrawal `json:"withdrawal"`
	ID         string               `json:"id"`
	State      aggregate.State      `json:"state"`
	TxID       string               `json:"txid"`
	Attempt    int                  `json:"attempt"`
	Sends      int                  `json:"sends"`

	Since       time.Time     `json:"since"` // when it entered its current state (event time)
	Age         time.Duration `json:"age"`   // now − Since
	EnvelopeAt  time.Time     `json:"envelope_at"`
	EnvelopeAge time.Duration `json:"envelope_age"` // now − EnvelopeAt: how long this txid has existed

	ClaimedBy  string    `json:"claimed_by"`
	LeaseUntil time.Time `json:"lease_until"`
	LeaseLive  bool      `json:"lease_live"`

	// Unacknowledged: a send intent is recorded with no acceptance after it
	// (state broadcasting). The transaction may or may not be on the
	// network. While a worker holds the lease this is the normal wait for
	// the solid block: the worker keeps its node's answer in hand (it is no
	// longer appended) and reconciles by txid itself when the answer was
	// not an acceptance.
	Unacknowledged bool `json:"unacknowledged"`
	// LeaseLapsed: no worker holds a live lease on it, so nobody is driving it
	// to an outcome until a worker claims it again.
	LeaseLapsed bool `json:"lease_lapsed"`
	// Ambiguous is LeaseLapsed: nobody is driving it, the log alone cannot
	// say what happened on chain (an unacknowledged send, a signature that
	// may have been sent), and reconciliation by txid is due once a worker
	// claims it.
	Ambiguous bool `json:"ambiguous"`
}

// InFlight lists in-flight withdrawals (state signing … broadcast) as of now,
// the longest in their current state first, then by id.
func (p *Projector) InFlight(now time.Time) []InFlightItem {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var out []InFlightItem
	for _, st := range aggregate.States() {
		if !st.IsInFlight() {
			continue
		}
		for id := range p.st.byState[st] {
			out = append(out, inFlightItem(p.st.withdrawals[id], now))
		}
	}
	slices.SortFunc(out, func(x, y InFlightItem) int { return cmpTimeThenID(x.Since, y.Since, x.ID, y.ID) })
	if out == nil {
		out = []InFlightItem{}
	}
	return out
}

// InFlightWithdrawals is InFlight's withdrawals in the same order, for the
// API's {"items":[withdrawal...]}.
func (p *Projector) InFlightWithdrawals(now time.Time) []aggregate.Withdrawal {
	items := p.InFlight(now)
	out := make([]aggregate.Withdrawal, len(items))
	for i, it := range items {
		out[i] = it.Withdrawal
	}
	return out
}

func inFlightItem(o openWithdrawal, now time.Time) InFlightItem {
	w := cloneWithdrawal(o.w)
	it := InFlightItem{
		Withdrawal: w, ID: w.ID, State: w.State, TxID: w.TxID(), Attempt: w.Attempt, Sends: w.Sends,
		Since: o.stateSince, Age: since(now, o.stateSince),
		EnvelopeAt: o.envelopeAt, EnvelopeAge: since(now, o.envelopeAt),
		ClaimedBy: w.Claim.Worker, LeaseUntil: w.Claim.LeaseUntil, LeaseLive: w.Claim.HeldAt(now),
		Unacknowledged: w.State == aggregate.StateBroadcasting,
	}
	it.LeaseLapsed = !it.LeaseLive
	it.Ambiguous = it.LeaseLapsed
	return it
}

// since is now − t, never negative: event times come from other machines'
// clocks, and an age below zero would only confuse.
func since(now, t time.Time) time.Duration {
	if t.IsZero() || now.Before(t) {
		return 0
	}
	return now.Sub(t)
}

// Withdrawal returns an open (non-terminal) withdrawal as the projection has
// it; false for unknown and ended ones (load the stream for those).
func (p *Projector) Withdrawal(id string) (aggregate.Withdrawal, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	o, ok := p.st.withdrawals[id]
	if !ok {
		return aggregate.Withdrawal{}, false
	}
	return cloneWithdrawal(o.w), true
}

// Balance returns an account's balances; false if it has no events yet.
func (p *Projector) Balance(account string) (aggregate.AccountView, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	ent, ok := p.st.accounts[account]
	if !ok {
		return aggregate.AccountView{}, false
	}
	v := ent.a.View()
	v.ID = account
	return v, true
}

// Balances lists every account's balances by account id.
func (p *Projector) Balances() []aggregate.AccountView {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]aggregate.AccountView, 0, len(p.st.accounts))
	for id, ent := range p.st.accounts {
		v := ent.a.View()
		v.ID = id
		out = append(out, v)
	}
	slices.SortFunc(out, func(x, y aggregate.AccountView) int { return cmp.Compare(x.ID, y.ID) })
	return out
}

// Stats is a summary for health checks and metrics.
type Stats struct {
	Applied  uint64                     `json:"applied"`
	Open     map[aggregate.State]int    `json:"open"`  // open withdrawals by state
	Ended    map[aggregate.State]uint64 `json:"ended"` // withdrawals that ended, by terminal state
	Accounts int                        `json:"accounts"`
}

// Stats returns counts of what the projection holds.
func (p *Projector) Stats() Stats {
	p.mu.RLock()
	defer p.mu.RUnlock()
	s := Stats{Applied: p.st.applied, Open: map[aggregate.State]int{}, Ended: map[aggregate.State]uint64{}, Accounts: len(p.st.accounts)}
	for st, set := range p.st.byState {
		if len(set) > 0 {
			s.Open[st] = len(set)
		}
	}
	for st, n := range p.st.ended {
		s.Ended[st] = n
	}
	return s
}

// Snapshot returns all views as one deterministic value (see Snapshot).
func (p *Projector) Snapshot() Snapshot {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.st.snapshot()
}

// collect copies the withdrawals in state st that keep accepts. The caller
// holds the read lock.
func (p *Projector) collect(keep func(openWithdrawal) bool, st aggregate.State) []aggregate.Withdrawal {
	out := make([]aggregate.Withdrawal, 0, len(p.st.byState[st]))
	for id := range p.st.byState[st] {
		if o := p.st.withdrawals[id]; keep(o) {
			out = append(out, cloneWithdrawal(o.w))
		}
	}
	return out
}

func cmpTimeThenID(a, b time.Time, idA, idB string) int {
	if c := a.Compare(b); c != 0 {
		return c
	}
	return cmp.Compare(idA, idB)
}
