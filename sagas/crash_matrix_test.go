package sagas_test

import (
	"errors"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
	"github.com/weir-payouts/weir/sagas"
	"github.com/weir-payouts/weir/tron"
)

// Every crash point, one at a time: a worker dies there (writing nothing
// after it), its lease lapses, and a fresh worker — running only the
// ordinary state handlers, no recovery code of its own — finishes the
// withdrawal with the money moved exactly once.
func TestEveryCrashPointRecoversToExactlyOneOutcome(t *testing.T) {
	type scenario int
	const (
		external scenario = iota
		internal
		revert
		dropFirstAttempt
	)
	cases := []struct {
		point    sagas.CrashPoint
		scenario scenario
		// The last event in the log when the worker died. An external
		// payout's claim and route travel in its envelope's write-ahead,
		// its first send's intent in its signature, and an accepted send
		// is not appended (the solid block confirms straight from
		// broadcasting), so several points share a last event.
		last string
	}{
		{sagas.CrashAfterClaim, external, aggregate.EventEnvelopeBuilt},
		{sagas.CrashAfterRoute, external, aggregate.EventEnvelopeBuilt},
		{sagas.CrashBeforeSettleInternal, internal, aggregate.EventRouted},
		{sagas.CrashAfterBuild, external, aggregate.EventEnvelopeBuilt},
		{sagas.CrashAfterSignBeforeRecord, external, aggregate.EventEnvelopeBuilt},
		{sagas.CrashAfterSignature, external, aggregate.EventSigned},
		{sagas.CrashAfterIntent, external, aggregate.EventSigned},
		{sagas.CrashAfterSend, external, aggregate.EventSigned},
		{sagas.CrashAfterAccepted, external, aggregate.EventSigned},
		{sagas.CrashBeforeConfirm, external, aggregate.EventSigned},
		{sagas.CrashBeforeFail, revert, aggregate.EventSigned},
		{sagas.CrashBeforeRebuild, dropFirstAttempt, aggregate.EventBroadcasting},
		{sagas.CrashAfterRebuild, dropFirstAttempt, aggregate.EventRebuilt},
	}
	if len(cases) != len(sagas.CrashPoints()) {
		t.Fatalf("%d cases for %d crash points", len(cases), len(sagas.CrashPoints()))
	}
	for _, tc := range cases {
		t.Run(string(tc.point), func(t *testing.T) {
			t.Parallel()
			r := newBCRig(t)
			to := bcAddress("crash " + string(tc.point))
			if tc.scenario == internal {
				r.custody[to] = "acct-receiver"
			}
			if tc.scenario == revert {
				r.sim.Script(tron.ChannelBroadcast, tron.FaultRevert)
			}
			id := r.ready(to, "43.21")
			faults := func() {
				if tc.scenario != dropFirstAttempt || r.sim.ScriptRemaining(tron.ChannelBroadcast) > 0 {
					return
				}
				if w := r.load(id); w.Attempt == 0 || (w.Attempt == 1 && r.sim.CurrentHead().Timestamp < w.Envelope.Expiration) {
					r.sim.Script(tron.ChannelBroadcast, tron.FaultDropAfterAccept)
				}
			}
			w1 := r.worker("w1", func(c *sagas.WorkerConfig) { c.Crash = sagas.CrashOnce(tc.point, id) })
			crashed := false
			for i := 0; i < 200 && !crashed; i++ {
				faults()
				_, err := w1.Step(r.ctx)
				switch {
				case errors.Is(err, sagas.ErrCrashed):
					crashed = true
				case err != nil:
					t.Fatal(err)
				default:
					r.sim.Advance(1)
				}
			}
			if !crashed {
				t.Fatalf("never reached %s; state %s", tc.point, r.load(id).State)
			}
			evs := r.events(id)
			if last := evs[len(evs)-1].EventType(); last != tc.last {
				t.Fatalf("last event at the crash is %s, want %s", last, tc.last)
			}
			r.clock.Advance(bcLease + time.Second)
			w2 := r.worker("w2")
			for i := 0; i < 200 && !r.load(id).Terminal(); i++ {
				faults()
				r.round(w2)
			}
			w := r.load(id)
			switch tc.scenario {
			case internal:
				if w.State != aggregate.StateConfirmed || !w.Route.IsInternal() || r.node.Total() != 0 {
					t.Fatalf("%s route %v, node calls %d", w.State, w.Route.Rail(), r.node.Total())
				}
				r.settled(w)
			case revert:
				if w.State != aggregate.StateFailed || w.Reason != aggregate.ReasonReverted || len(r.chainTxs(w)) != 1 {
					t.Fatalf("%s %s, %d on chain", w.State, w.Reason, len(r.chainTxs(w)))
				}
				r.settled(w)
			case dropFirstAttempt:
				r.paidOnce(id)
				if w.Attempt != 2 {
					t.Fatalf("attempt %d", w.Attempt)
				}
			default:
				r.paidOnce(id)
				if n := bcCount(r.events(id), aggregate.EventEnvelopeBuilt); n > 1 {
					t.Fatalf("%d envelopes", n)
				}
			}
		})
	}
}
