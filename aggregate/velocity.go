package aggregate

import (
	"iter"
	"slices"
	"time"
)

// The account's side of velocity tiers: what it sent in the rolling
// VelocityWindow before a request. "Sent" is reserved and not released —
// held (in progress, approved or not) or settled; a released reservation
// (rejected, failed) never left. The fold keeps only the reservations of
// about the last window (plus velocityKeepSlack for clocks that disagree),
// so the state does not grow with the account's history and a request
// sums at most a window's worth of entries.

// velocityKeepSlack keeps reservations a little past the window: requests
// are timed by the intake's clock, reservations by the ledger's, which may
// run somewhat ahead.
const velocityKeepSlack = time.Hour

type recentReservation struct {
	WithdrawalID string
	Amount       Amount
	At           time.Time
	Released     bool
}

// SentInWindow is what the account sent in the VelocityWindow before at:
// the amounts reserved in (at − window, at] and not released since.
func (a Account) SentInWindow(at time.Time) Amount {
	from := at.Add(-VelocityWindow)
	sum := AccountAsset.Zero()
	for r := range a.recent.all() {
		if r.Released || !r.At.After(from) || r.At.After(at) {
			continue
		}
		sum = sum.Add(r.Amount)
	}
	return sum
}

// recentBlockSize is how many reservations one block of the velocity
// window holds: a fold copies the block it changes, not the window.
const recentBlockSize = 64

// recentLog is the velocity window, oldest first, in blocks shared
// copy-on-write between successive states (as reservationSet shares its
// shards): a state from Account.owned gets a fresh token and copies a
// block, and the short list of blocks, before it changes them; only the
// fold that made a state writes it.
type recentLog struct {
	blocks []*recentBlock
	start  int   // entries of blocks[0] before start were dropped
	tok    *byte // blocks whose owner is tok belong to this state
}

type recentBlock struct {
	owner *byte
	items []recentReservation
}

// owned returns a copy sharing every block and owning none.
func (l recentLog) owned() recentLog {
	l.blocks = slices.Clone(l.blocks)
	l.tok = new(byte)
	return l
}

func (l *recentLog) block(i int) *recentBlock {
	b := l.blocks[i]
	if b.owner != l.tok {
		// Room for one more: a block grows as appends need (most
		// accounts hold a few entries), up to recentBlockSize.
		items := make([]recentReservation, len(b.items), len(b.items)+1)
		copy(items, b.items)
		b = &recentBlock{owner: l.tok, items: items}
		l.blocks[i] = b
	}
	return b
}

func (l *recentLog) len() int {
	n := -l.start
	for _, b := range l.blocks {
		n += len(b.items)
	}
	return n
}

func (l *recentLog) all() iter.Seq[recentReservation] {
	return func(yield func(recentReservation) bool) {
		for i, b := range l.blocks {
			items := b.items
			if i == 0 {
				items = items[l.start:]
			}
			for _, r := range items {
				if !yield(r) {
					return
				}
			}
		}
	}
}

// dropBefore drops, from the front, the entries older than cutoff.
func (l *recentLog) dropBefore(cutoff time.Time) {
	for len(l.blocks) > 0 {
		items := l.blocks[0].items
		for l.start < len(items) && items[l.start].At.Before(cutoff) {
			l.start++
		}
		if l.start < len(items) || len(items) < recentBlockSize {
			return
		}
		l.blocks, l.start = l.blocks[1:], 0
	}
}

func (l *recentLog) push(r recentReservation) {
	if n := len(l.blocks); n > 0 && len(l.blocks[n-1].items) < recentBlockSize {
		b := l.block(n - 1)
		b.items = append(b.items, r)
		return
	}
	l.blocks = append(l.blocks, &recentBlock{owner: l.tok, items: []recentReservation{r}})
}

// release marks withdrawalID's entry released, searching from the newest.
func (l *recentLog) release(withdrawalID string) {
	for i := len(l.blocks) - 1; i >= 0; i-- {
		items := l.blocks[i].items
		lo := 0
		if i == 0 {
			lo = l.start
		}
		for j := len(items) - 1; j >= lo; j-- {
			if items[j].WithdrawalID == withdrawalID {
				l.block(i).items[j].Released = true
				return
			}
		}
	}
}

func (l *recentLog) list() []recentReservation { return slices.Collect(l.all()) }

func recentFrom(rs []recentReservation) recentLog {
	l := recentLog{tok: new(byte)}
	for _, r := range rs {
		l.push(r)
	}
	return l
}
