package aggregate

import (
	"iter"
	"slices"
	"sort"
	"time"
)

// The account's side of velocity tiers: what it sent in the rolling
// VelocityWindow before a request. "Sent" is reserved and not released —
// held (in progress, approved or not) or settled; a released reservation
// (rejected, failed) never left. The fold keeps only the reservations of
// about the last window (plus velocityKeepSlack for clocks that disagree),
// so the state does not grow with the account's history; a request finds
// its sum by binary search and running sums (SentInWindow), not by adding
// up the window.

// velocityKeepSlack keeps reservations a little past the window: requests
// are timed by the intake's clock, reservations by the ledger's, which may
// run somewhat ahead.
const velocityKeepSlack = time.Hour

type recentReservation struct {
	WithdrawalID string
	Amount       Amount
	At           time.Time
	Released     bool

	// Derived on push, never stored (recentFrom recomputes them):
	// maxAt is the latest At of this entry and every one pushed before
	// it, so it never decreases along the log and can be searched; cum
	// is the sum of Amount over this entry and every one pushed before
	// it since the log began, so the sum of a run of entries is two
	// lookups.
	maxAt time.Time
	cum   Amount
}

// SentInWindow is what the account sent in the VelocityWindow before at:
// the amounts reserved in (at − window, at] and not released since.
//
// It costs O(log n + k), n the entries kept, k those that are "odd":
// released, or pushed with an At earlier than one before them (a writer
// whose clock lags). Entries that are neither have At == maxAt, so the
// ones in the window are a run found by binary search on maxAt and summed
// from cum; each odd entry is then corrected to what it contributes.
// The result is exactly the sum the walk over every entry gives
// (sentInWindowWalk, which the tests compare it with).
func (a Account) SentInWindow(at time.Time) Amount {
	return a.recent.sentIn(at.Add(-VelocityWindow), at)
}

// counts reports whether r is part of the sum over (from, to].
func (r *recentReservation) counts(from, to time.Time) bool {
	return !r.Released && r.At.After(from) && !r.At.After(to)
}

// recentBlockSize is how many reservations one block of the velocity
// window holds: a fold copies the block it changes, not the window.
const recentBlockSize = 64

// recentLog is the velocity window, in the order reservations were
// folded (oldest first but for clock skew), in blocks shared copy-on-write
// between successive states (as reservationSet shares its shards): a state
// from Account.owned gets a fresh token and copies a block, and the short
// list of blocks, before it changes them; only the fold that made a state
// writes it. Every block but the last is full, so the i-th entry is found
// by arithmetic.
type recentLog struct {
	blocks []*recentBlock
	start  int   // entries of blocks[0] before start were dropped
	tok    *byte // blocks whose owner is tok belong to this state
	// first is the number of entries dropped from the front since the
	// log began: entry i (0-based among those kept) is number first+i.
	first uint64
	// odd lists, by number in increasing order, the kept entries that
	// are released or were pushed late (At < maxAt). Never written in
	// place: a change makes a new slice, so states share it freely.
	odd []uint64
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
	switch n := len(l.blocks); n {
	case 0:
		return 0
	default:
		return (n-1)*recentBlockSize + len(l.blocks[n-1].items) - l.start
	}
}

// at returns the i-th kept entry (0 ≤ i < len()).
func (l *recentLog) at(i int) *recentReservation {
	j := l.start + i
	return &l.blocks[j/recentBlockSize].items[j%recentBlockSize]
}

func (l *recentLog) last() *recentReservation {
	if l.len() == 0 {
		return nil
	}
	return l.at(l.len() - 1)
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

// sentIn sums the entries not released with At in (from, to].
func (l *recentLog) sentIn(from, to time.Time) Amount {
	sum := AccountAsset.Zero()
	n := l.len()
	// [lo, hi) is the run whose maxAt is in (from, to]: before lo every
	// At ≤ maxAt ≤ from, from hi on maxAt > to; odd entries aside, an
	// entry counts exactly when it lies in the run.
	lo := sort.Search(n, func(i int) bool { return l.at(i).maxAt.After(from) })
	hi := lo + sort.Search(n-lo, func(i int) bool { return l.at(lo + i).maxAt.After(to) })
	if lo < hi {
		first, last := l.at(lo), l.at(hi-1)
		sum = sum.Add(last.cum).Sub(first.cum).Add(first.Amount)
	}
	for _, num := range l.odd {
		i := int(num - l.first)
		r := l.at(i)
		inRun, counts := i >= lo && i < hi, r.counts(from, to)
		switch {
		case counts && !inRun:
			sum = sum.Add(r.Amount)
		case inRun && !counts:
			sum = sum.Sub(r.Amount)
		}
	}
	return sum
}

// dropBefore drops, from the front, the entries older than cutoff.
func (l *recentLog) dropBefore(cutoff time.Time) {
	defer l.trimOdd()
	for len(l.blocks) > 0 {
		items := l.blocks[0].items
		for l.start < len(items) && items[l.start].At.Before(cutoff) {
			l.start++
			l.first++
		}
		if l.start < len(items) || len(items) < recentBlockSize {
			return
		}
		l.blocks, l.start = l.blocks[1:], 0
	}
}

// trimOdd forgets the odd entries dropped from the front (in order).
func (l *recentLog) trimOdd() {
	k := 0
	for k < len(l.odd) && l.odd[k] < l.first {
		k++
	}
	l.odd = l.odd[k:]
}

func (l *recentLog) push(r recentReservation) {
	r.maxAt, r.cum = r.At, r.Amount
	late := false
	if p := l.last(); p != nil {
		if p.maxAt.After(r.At) {
			r.maxAt, late = p.maxAt, true
		}
		r.cum = p.cum.Add(r.Amount)
	}
	if late || r.Released {
		l.markOdd(l.first + uint64(l.len()))
	}
	if n := len(l.blocks); n > 0 && len(l.blocks[n-1].items) < recentBlockSize {
		b := l.block(n - 1)
		b.items = append(b.items, r)
		return
	}
	l.blocks = append(l.blocks, &recentBlock{owner: l.tok, items: []recentReservation{r}})
}

// markOdd adds entry number num to odd (a new slice; odd is shared).
func (l *recentLog) markOdd(num uint64) {
	i, found := slices.BinarySearch(l.odd, num)
	if found {
		return
	}
	odd := make([]uint64, 0, len(l.odd)+1)
	odd = append(odd, l.odd[:i]...)
	odd = append(odd, num)
	l.odd = append(odd, l.odd[i:]...)
}

// release marks withdrawalID's entry released, searching from the newest.
func (l *recentLog) release(withdrawalID string) {
	for i := l.len() - 1; i >= 0; i-- {
		if l.at(i).WithdrawalID != withdrawalID {
			continue
		}
		j := l.start + i
		l.block(j / recentBlockSize).items[j%recentBlockSize].Released = true
		l.markOdd(l.first + uint64(i))
		return
	}
}

func recentFrom(rs []recentReservation) recentLog {
	l := recentLog{tok: new(byte)}
	for _, r := range rs {
		l.push(r)
	}
	return l
}
