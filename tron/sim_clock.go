package tron

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/big"
	"time"
)

// ---- chain clock -------------------------------------------------------

func (s *SimNode) blockTime(n int64) int64 {
	return s.startMs + (n-s.startNumber)*BlockInterval.Milliseconds()
}

func (s *SimNode) header(n int64) BlockHeader {
	h := BlockHeader{Number: n, Timestamp: s.blockTime(n)}
	// java-tron block ids start with the 8-byte block number; the rest is a
	// hash. Derive it from the seed so TAPoS references are checkable.
	var seedNum [16]byte
	binary.BigEndian.PutUint64(seedNum[:8], uint64(s.seed))
	binary.BigEndian.PutUint64(seedNum[8:], uint64(n))
	sum := sha256.Sum256(append([]byte("weir-sim-block"), seedNum[:]...))
	binary.BigEndian.PutUint64(h.ID[:8], uint64(n))
	copy(h.ID[8:], sum[8:])
	return h
}

func (s *SimNode) solidNumber() int64 { return max(s.startNumber, s.head-s.lag) }

// Advance produces n blocks and returns the new head.
func (s *SimNode) Advance(n int) BlockHeader {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.produce()
	}
	return s.header(s.head)
}

// AdvanceTo produces blocks until the next block would be later than t, and
// returns the head. It never goes back in time.
func (s *SimNode) AdvanceTo(t time.Time) BlockHeader {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.blockTime(s.head+1) <= t.UnixMilli() {
		s.produce()
	}
	return s.header(s.head)
}

// Run produces one block every interval of wall time until ctx ends (chain
// time still moves 3 s per block). It is how `weir serve` drives the
// simulated chain. It returns nil when ctx is cancelled.
func (s *SimNode) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		return fmt.Errorf("tron sim: block interval must be positive, got %v", interval)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			s.Advance(1)
		}
	}
}

// WaitHead blocks until the head is at least block n (or ctx ends).
func (s *SimNode) WaitHead(ctx context.Context, n int64) (BlockHeader, error) {
	for {
		s.mu.Lock()
		h, ch := s.head, s.blockChanged
		s.mu.Unlock()
		if h >= n {
			return s.CurrentHead(), nil
		}
		select {
		case <-ctx.Done():
			return BlockHeader{}, ctx.Err()
		case <-ch:
		}
	}
}

// produce appends one block: pool transactions whose time has come are
// included unless expired; dropped and expired ones leave the pool.
// Caller holds s.mu.
func (s *SimNode) produce() {
	n := s.head + 1
	t := s.blockTime(n)
	kept := s.pool[:0]
	for _, tx := range s.pool {
		switch {
		case tx.dropped:
			s.forget(tx)
		case tx.expiration <= t:
			// A block never includes a transaction whose expiration is not
			// after the block time; java-tron evicts it from the pool.
			s.forget(tx)
		case tx.includeAt <= n:
			s.include(tx, n, t)
		default:
			kept = append(kept, tx)
		}
	}
	clear(s.pool[len(kept):])
	s.pool = kept
	s.head = n
	s.changes++
	close(s.blockChanged)
	s.blockChanged = make(chan struct{})
}

func (s *SimNode) forget(tx *simTx) {
	tx.inPool = false
	delete(s.known, tx.txid)
}

func (s *SimNode) include(tx *simTx, n, t int64) {
	tx.inPool = false
	tx.block, tx.blockTime = n, t
	s.execute(tx, t)
	s.included = append(s.included, tx)
	s.byBlock[n] = append(s.byBlock[n], tx)
}

func (s *SimNode) balanceOf(a Address) *big.Int {
	b, ok := s.balances[a]
	if !ok {
		b = new(big.Int)
		s.balances[a] = b
	}
	return b
}

// SetSolidityLag makes a block solid once the head is lag blocks past it,
// from now on (a benchmark runs the same chain with mainnet's lag). A block
// already solid stays solid: when the lag grows, the head first moves on by
// the difference, in empty blocks. A negative lag is ignored.
func (s *SimNode) SetSolidityLag(lag int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lag < 0 {
		return
	}
	for range max(0, int64(lag)-s.lag) {
		s.produce()
	}
	s.lag = int64(lag)
}
