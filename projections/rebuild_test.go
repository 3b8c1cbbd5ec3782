package projections

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/weir-payouts/weir/aggregate"
)

// history drives a random but legal workload through the deciders: credits,
// requests with reservation (or rejection for insufficient funds), approvals,
// cancellations, claims, internal settlements, envelopes, signatures, sends,
// acceptances, rebuilds with proof, confirmations, failures — and the account
// side of each outcome (settle, release, the internal credit).
type history struct {
	w        *world
	rng      *rand.Rand
	clock    time.Time
	accounts []string
	open     []string // withdrawals that have not ended
	made     int
}

func newHistory(w *world, seed uint64, accounts int) *history {
	h := &history{w: w, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), clock: t0}
	for i := range accounts {
		h.accounts = append(h.accounts, fmt.Sprintf("acct-%02d", i))
	}
	return h
}

func (h *history) tick() time.Time {
	h.clock = h.clock.Add(time.Duration(1+h.rng.IntN(90)) * time.Second)
	return h.clock
}

func (h *history) amount(lo, hi int) aggregate.Amount {
	cents := lo*100 + h.rng.IntN((hi-lo)*100+1)
	return usdt(fmt.Sprintf("%d.%02d", cents/100, cents%100))
}

func (h *history) pick(xs []string) string { return xs[h.rng.IntN(len(xs))] }

// step performs one random action.
func (h *history) step() {
	switch r := h.rng.IntN(100); {
	case r < 10 || len(h.open) == 0 && r < 40:
		a := h.pick(h.accounts)
		h.w.acct(a, aggregate.Credit{Account: a, CreditID: fmt.Sprintf("credit-%d", h.rng.Uint64()), Amount: h.amount(100, 4000), At: h.tick()})
	case r < 30 || len(h.open) == 0:
		h.request()
	default:
		h.advance(h.pick(h.open))
	}
}

func (h *history) request() {
	h.made++
	id := fmt.Sprintf("%08x-0000-4000-8000-%012x", h.made, h.rng.Uint64()&0xffffffffffff)
	account := h.pick(h.accounts)
	amount := h.amount(1, 2500) // some above 1000: four eyes
	at := h.tick()
	h.w.do(id, aggregate.RequestWithdrawal{ID: id, Account: account, ToAddress: toAddr, Amount: amount,
		Asset: aggregate.USDT.Code, RequestedBy: h.pick([]string{"alice", "dave"}), Policy: h.w.policy, At: at})
	_, err := h.w.tryAcct(account, aggregate.Reserve{Account: account, WithdrawalID: id, Amount: amount, At: at})
	if errors.Is(err, aggregate.ErrInsufficientFunds) {
		h.w.do(id, aggregate.Reject{Reason: aggregate.ReasonInsufficientFunds, At: at})
		return
	}
	if err != nil {
		h.w.t.Fatal(err)
	}
	// Now and then intake "crashes" between reserving and recording it; a
	// later step completes it, so unreserved requests exist for a while.
	if h.rng.IntN(5) > 0 {
		h.w.do(id, aggregate.RecordReservation{At: at})
	}
	h.open = append(h.open, id)
}

func (h *history) end(id string, settle bool, reason string) {
	wd, _ := h.w.loadWithdrawal(id)
	at := h.tick()
	if wd.Reserved || settle {
		if settle {
			h.w.acct(wd.Account, aggregate.Settle{Account: wd.Account, WithdrawalID: id, At: at})
		} else {
			h.w.acct(wd.Account, aggregate.Release{Account: wd.Account, WithdrawalID: id, Reason: reason, At: at})
		}
	} else {
		// The account holds the money even when the withdrawal never
		// recorded it (intake crashed in between): release it there.
		if a, _ := h.w.loadAccount(wd.Account); hasHeld(a, id) {
			h.w.acct(wd.Account, aggregate.Release{Account: wd.Account, WithdrawalID: id, Reason: reason, At: at})
		}
	}
	h.open = slices.DeleteFunc(h.open, func(s string) bool { return s == id })
}

func hasHeld(a aggregate.Account, id string) bool {
	r, ok := a.Reservation(id)
	return ok && r.Status == aggregate.ReservationHeld
}

func (h *history) advance(id string) {
	w := h.w
	wd, _ := w.loadWithdrawal(id)
	roll := h.rng.IntN(100)
	switch wd.State {
	case aggregate.StateRequested:
		switch {
		case !wd.Reserved && roll < 50:
			w.do(id, aggregate.RecordReservation{At: h.tick()})
		case roll < 10:
			w.do(id, aggregate.Cancel{By: wd.RequestedBy, At: h.tick()})
			h.end(id, false, aggregate.ReasonCancelled)
		default:
			by := h.pick([]string{"bob", "carol", "erin"})
			w.do(id, aggregate.Approve{By: by, Policy: w.policy, At: h.tick()})
		}
	case aggregate.StateApproved:
		switch {
		case !wd.Reserved:
			w.do(id, aggregate.RecordReservation{At: h.tick()})
		case roll < 5:
			w.do(id, aggregate.Cancel{By: "operator", At: h.tick()})
			h.end(id, false, aggregate.ReasonCancelled)
		case roll < 40 || wd.Claim.Worker == "":
			h.claim(id, wd)
		case wd.Route.IsZero():
			route := externalRoute(w.t)
			if roll < 55 {
				route, _ = aggregate.InternalRoute(h.pick(h.accounts), "custodied destination")
			}
			w.do(id, aggregate.ChooseRoute{Route: route, At: h.tick()})
		case wd.Route.IsInternal():
			w.do(id, aggregate.SettleInternally{Policy: w.policy, At: h.tick()})
			h.end(id, true, "")
			to := wd.Route.Account()
			w.acct(to, aggregate.Credit{Account: to, CreditID: "transfer-" + id, Amount: wd.Amount, At: h.clock})
		default:
			env := envelope(fmt.Sprintf("%s-1", id), h.clock.Add(time.Minute).UnixMilli())
			w.do(id, aggregate.BuildEnvelope{Envelope: env, Policy: w.policy, At: h.tick()})
		}
	case aggregate.StateSigning:
		switch {
		case roll < 10:
			w.do(id, aggregate.Fail{Reason: "signer_refused", At: h.tick()})
			h.end(id, false, aggregate.ReasonNodeRejected)
		case roll < 25:
			h.claim(id, wd)
		default:
			w.do(id, aggregate.RecordSignature{Policy: w.policy, TxID: wd.TxID(), Signature: signature(byte(h.rng.IntN(256))), At: h.tick()})
		}
	case aggregate.StateSigned:
		w.do(id, aggregate.RecordBroadcastIntent{TxID: wd.TxID(), Send: 1, At: h.tick()})
	case aggregate.StateBroadcasting, aggregate.StateBroadcast:
		switch {
		case roll < 10:
			h.rebuild(id, wd)
		case roll < 20:
			h.claim(id, wd)
		case roll < 30:
			w.do(id, aggregate.RecordBroadcastIntent{TxID: wd.TxID(), Send: wd.Sends + 1, At: h.tick()})
		case wd.State == aggregate.StateBroadcasting:
			w.do(id, aggregate.RecordAccepted{TxID: wd.TxID(), Send: wd.Sends, Result: "SUCCESS", At: h.tick()})
		case roll < 40:
			w.do(id, aggregate.Fail{Reason: aggregate.ReasonReverted, TxID: wd.TxID(), At: h.tick(),
				Receipt: &aggregate.FailureReceipt{BlockNumber: 1000, BlockTime: h.clock.UnixMilli(), Result: "REVERT"}})
			h.end(id, false, aggregate.ReasonReverted)
		default:
			w.do(id, aggregate.Confirm{TxID: wd.TxID(), BlockNumber: 1000 + h.rng.Int64N(1000), BlockTime: h.clock.UnixMilli(),
				Receipt: aggregate.ReceiptSuccess, At: h.tick()})
			h.end(id, true, "")
		}
	default:
		h.w.t.Fatalf("withdrawal %s is %s but listed as open", id, wd.State)
	}
}

func (h *history) claim(id string, wd aggregate.Withdrawal) {
	at := h.tick()
	worker := h.pick([]string{"worker-1", "worker-2"})
	if wd.Claim.HeldAt(at) {
		worker = wd.Claim.Worker // a renewal: another worker would be refused
	}
	h.w.do(id, aggregate.ClaimWithdrawal{Worker: worker, LeaseUntil: at.Add(time.Duration(1+h.rng.IntN(10)) * time.Minute), At: at})
}

func (h *history) rebuild(id string, wd aggregate.Withdrawal) {
	ev := proof(wd.Envelope.Expiration)
	env := envelope(fmt.Sprintf("%s-%d", id, wd.Attempt+1), ev.SolidBlockTime+60_000)
	h.w.do(id, aggregate.Rebuild{RetiredTxID: wd.TxID(), Evidence: ev, Envelope: env, At: h.tick()})
}

// The property the issue asks for: a projection that followed the log live —
// and was stopped and restarted from its checkpoint along the way, and
// compacted its accounts on its own schedule — equals one rebuilt from zero,
// and both agree with every aggregate folded on its own from its stream.
func TestRebuildFromZeroEqualsLiveProjection(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			w := newWorld(t)
			ctx := testCtx(t)
			h := newHistory(w, seed, 4)
			cp := w.checkpoints()
			live := w.start(Options{Checkpoints: cp, CheckpointEvery: 37, CompactAccountsAfter: 3})
			// A second live projector that never stops or checkpoints.
			steady := w.start(Options{CompactAccountsAfter: -1})

			for i := range 300 {
				h.step()
				if i == 150 {
					// Restart mid-history: the final checkpoint on Stop,
					// then a new projector resumes from it.
					if err := live.Stop(ctx); err != nil {
						t.Fatal(err)
					}
					live = w.start(Options{Checkpoints: cp, CheckpointEvery: 37, CompactAccountsAfter: 3})
				}
			}
			last := w.last()
			if last < 300 {
				t.Fatalf("history wrote only %d events", last)
			}
			waitFor(t, live, last)
			waitFor(t, steady, last)

			fromZero := w.rebuilt()
			want := fromZero.Snapshot()
			if want.Applied != last {
				t.Fatalf("rebuild applied %d, log ends at %d", want.Applied, last)
			}
			sameSnapshot(t, "live (restarted from checkpoint) vs rebuilt", want, live.Snapshot())
			sameSnapshot(t, "steady vs rebuilt", want, steady.Snapshot())

			// Rebuilding the running projector in place changes nothing and
			// it keeps following the log.
			if err := live.Rebuild(ctx); err != nil {
				t.Fatal(err)
			}
			sameSnapshot(t, "after Rebuild in place", want, live.Snapshot())

			checkAgainstStreams(t, w, h, fromZero)
			if len(want.Withdrawals) == 0 || len(want.Ended) == 0 {
				t.Fatalf("the history should leave some withdrawals open and end others: %d open, ended %v", len(want.Withdrawals), want.Ended)
			}

			for range 40 {
				h.step()
			}
			last = w.last()
			waitFor(t, live, last)
			waitFor(t, steady, last)
			sameSnapshot(t, "after more events", w.rebuilt().Snapshot(), live.Snapshot())
			sameSnapshot(t, "steady after more events", live.Snapshot(), steady.Snapshot())
		})
	}
}

// checkAgainstStreams is the independent oracle: each aggregate loaded and
// folded on its own must equal what the projection holds for it.
func checkAgainstStreams(t *testing.T, w *world, h *history, p *Projector) {
	t.Helper()
	open := map[string]bool{}
	for _, id := range h.open {
		open[id] = true
	}
	snap := p.Snapshot()
	if len(snap.Withdrawals) != len(h.open) {
		t.Fatalf("projection holds %d open withdrawals, the history %d", len(snap.Withdrawals), len(h.open))
	}
	for _, e := range snap.Withdrawals {
		if !open[e.Withdrawal.ID] {
			t.Fatalf("withdrawal %s is open in the projection but ended in the history", e.Withdrawal.ID)
		}
		wd, _ := w.loadWithdrawal(e.Withdrawal.ID)
		if got, want := mustJSON(t, e.Withdrawal), mustJSON(t, wd); got != want {
			t.Fatalf("withdrawal %s:\nprojection %s\nstream     %s", wd.ID, got, want)
		}
	}
	for _, a := range snap.Accounts {
		acct, _ := w.loadAccount(a.ID)
		if got, want := a.View(), acct.View(); got != want {
			t.Fatalf("account %s: projection %+v, stream %+v", a.ID, got, want)
		}
	}
	var ended uint64
	for _, n := range snap.Ended {
		ended += n
	}
	if int(ended)+len(h.open) != h.made {
		t.Fatalf("%d ended + %d open != %d requested", ended, len(h.open), h.made)
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
