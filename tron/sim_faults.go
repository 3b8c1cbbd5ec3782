package tron

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// Channel is a family of node calls that faults are injected into.
type Channel string

const (
	ChannelBroadcast Channel = "broadcast" // Broadcast
	ChannelLookup    Channel = "lookup"    // Lookup, SolidLookup, SolidBlockByNum, SolidTxInfosByBlockNum, TxInfosByBlockNum
	ChannelHead      Channel = "head"      // Head, SolidHead, RefBlock
)

// Fault is one way the simulated node misbehaves on one call. Each fault
// belongs to one channel. Timeouts are errors wrapping ErrTimeout returned at
// once (no real waiting).
type Fault string

const (
	// FaultNone lets one call through untouched (useful inside scripts).
	FaultNone Fault = "none"

	// FaultTimeoutBeforeAccept: the request is lost before the node sees it;
	// the caller gets ErrTimeout and the transaction is not in the pool.
	FaultTimeoutBeforeAccept Fault = "timeout_before_accept"
	// FaultAcceptThenTimeout: the node processes the transaction normally
	// (usually accepting it) but the answer is lost: ErrTimeout.
	FaultAcceptThenTimeout Fault = "accept_then_timeout"
	// FaultBusy: SERVER_BUSY; the transaction is not accepted.
	FaultBusy Fault = "busy"
	// FaultUnknownCode: an answer with a code outside java-tron's taxonomy
	// (SimUnknownCode); the transaction is not accepted.
	FaultUnknownCode Fault = "unknown_code"
	// FaultFalseExpired: the node processes the transaction normally (usually
	// accepting it, so it can still be included) but answers
	// TRANSACTION_EXPIRATION_ERROR.
	FaultFalseExpired Fault = "false_expired"
	// FaultDupNotAccepted: DUP_TRANSACTION_ERROR for a transaction the node
	// never accepted (it is not in the pool).
	FaultDupNotAccepted Fault = "dup_not_accepted"
	// FaultConnectionAfterAccept: the node accepts the transaction but answers
	// NOT_ENOUGH_EFFECTIVE_CONNECTION.
	FaultConnectionAfterAccept Fault = "not_enough_connection_after_accept"
	// FaultDropAfterAccept: SUCCESS, but the pool silently drops the
	// transaction when the next block is produced; it is never included
	// unless sent again.
	FaultDropAfterAccept Fault = "drop_after_accept"
	// FaultRevert: accepted and included, with receipt REVERT (no tokens move).
	FaultRevert Fault = "revert"
	// FaultOutOfEnergy: accepted and included, with receipt OUT_OF_ENERGY.
	FaultOutOfEnergy Fault = "out_of_energy"

	// FaultLookupTimeout: Lookup, SolidLookup, SolidBlockByNum,
	// SolidTxInfosByBlockNum or TxInfosByBlockNum times out.
	FaultLookupTimeout Fault = "lookup_timeout"
	// FaultLookupNonAnswer: the same calls get an answer that is not an
	// answer — a gateway's HTTP 200 {"statusCode":429,...} in front of the
	// node — which a client must report as ErrBadResponse, never as
	// "unknown". In process the call returns that error; the tronhttp
	// façade sends the gateway's body.
	FaultLookupNonAnswer Fault = "lookup_non_answer"

	// FaultHeadTimeout: Head, SolidHead or RefBlock times out.
	FaultHeadTimeout Fault = "head_timeout"
)

// SimUnknownCode is the broadcast code FaultUnknownCode answers with.
const SimUnknownCode BroadcastCode = "SIM_UNLISTED_CODE"

var faultChannels = map[Fault]Channel{
	FaultTimeoutBeforeAccept:   ChannelBroadcast,
	FaultAcceptThenTimeout:     ChannelBroadcast,
	FaultBusy:                  ChannelBroadcast,
	FaultUnknownCode:           ChannelBroadcast,
	FaultFalseExpired:          ChannelBroadcast,
	FaultDupNotAccepted:        ChannelBroadcast,
	FaultConnectionAfterAccept: ChannelBroadcast,
	FaultDropAfterAccept:       ChannelBroadcast,
	FaultRevert:                ChannelBroadcast,
	FaultOutOfEnergy:           ChannelBroadcast,
	FaultLookupTimeout:         ChannelLookup,
	FaultLookupNonAnswer:       ChannelLookup,
	FaultHeadTimeout:           ChannelHead,
}

// faultOrder fixes the order seeded draws walk the faults in, so a seed
// means the same schedule on every run.
var faultOrder = []Fault{
	FaultTimeoutBeforeAccept, FaultAcceptThenTimeout, FaultBusy, FaultUnknownCode,
	FaultFalseExpired, FaultDupNotAccepted, FaultConnectionAfterAccept,
	FaultDropAfterAccept, FaultRevert, FaultOutOfEnergy,
	FaultLookupTimeout, FaultHeadTimeout, FaultLookupNonAnswer,
}

// Channel returns the channel f is injected into ("" for FaultNone or an
// unknown fault).
func (f Fault) Channel() Channel { return faultChannels[f] }

// Faults lists the faults of a channel (all faults when ch is "").
func Faults(ch Channel) []Fault {
	var out []Fault
	for _, f := range faultOrder {
		if ch == "" || faultChannels[f] == ch {
			out = append(out, f)
		}
	}
	return out
}

func validateRates(rates map[Fault]float64) error {
	sums := map[Channel]float64{}
	for f, p := range rates {
		ch, ok := faultChannels[f]
		if !ok {
			return fmt.Errorf("tron sim: unknown fault %q in FaultRates", f)
		}
		if math.IsNaN(p) || p < 0 || p > 1 {
			return fmt.Errorf("tron sim: rate of %s is %v, want 0..1", f, p)
		}
		sums[ch] += p
	}
	for ch, sum := range sums {
		if sum > 1+1e-9 {
			return fmt.Errorf("tron sim: fault rates of channel %s sum to %v > 1", ch, sum)
		}
	}
	return nil
}

// ---- faults ------------------------------------------------------------

// Script queues faults for the next calls of a channel, consumed one per
// call in order before any seeded fault. It panics if a fault belongs to
// another channel (FaultNone fits every channel).
func (s *SimNode) Script(ch Channel, faults ...Fault) {
	for _, f := range faults {
		if f != FaultNone && f.Channel() != ch {
			panic(fmt.Sprintf("tron sim: fault %q does not belong to channel %q", f, ch))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scripts[ch] = append(s.scripts[ch], faults...)
}

// ScriptRemaining returns how many scripted faults of ch are not consumed yet.
func (s *SimNode) ScriptRemaining(ch Channel) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.scripts[ch])
}

// FaultCounts returns how many times each fault was injected.
func (s *SimNode) FaultCounts() map[Fault]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[Fault]int, len(s.faultCounts))
	for f, n := range s.faultCounts {
		out[f] = n
	}
	return out
}

// nextFault picks the fault for one call of ch. Caller holds s.mu.
func (s *SimNode) nextFault(ch Channel) Fault {
	f := FaultNone
	if q := s.scripts[ch]; len(q) > 0 {
		f, s.scripts[ch] = q[0], q[1:]
	} else if s.channelHasRates(ch) {
		r := s.rng.Float64()
		for _, cand := range faultOrder {
			if faultChannels[cand] != ch {
				continue
			}
			if r < s.rates[cand] {
				f = cand
				break
			}
			r -= s.rates[cand]
		}
	}
	if f != FaultNone {
		s.faultCounts[f]++
	}
	return f
}

func (s *SimNode) channelHasRates(ch Channel) bool {
	for f, p := range s.rates {
		if p > 0 && faultChannels[f] == ch {
			return true
		}
	}
	return false
}

func simTimeout(call string) error {
	return fmt.Errorf("tron sim: %s: %w", call, ErrTimeout)
}

// ctxErr maps a finished context to the package's error vocabulary: a
// deadline is a timeout (ambiguous), a cancellation is passed through.
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	}
	return err
}
