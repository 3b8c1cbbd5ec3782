package aggregate

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func decideErr(t *testing.T, w Withdrawal, c Command, want *Error) {
	t.Helper()
	evs, err := Decide(w, c)
	if !errors.Is(err, want) || len(evs) != 0 {
		t.Fatalf("Decide(%T) in %s: want %s, got %v, %v", c, w.State, want.Code, evs, err)
	}
}

func decideNothing(t *testing.T, w Withdrawal, c Command) {
	t.Helper()
	evs, err := Decide(w, c)
	if err != nil || len(evs) != 0 {
		t.Fatalf("Decide(%T) in %s: want a replay (no events, no error), got %v, %v", c, w.State, evs, err)
	}
}

func TestReplayingEveryStepOfAPayoutRecordsNothingNew(t *testing.T) {
	paths := map[string][]Command{
		"external": happyPath(t, pathOpts{}),
		"internal": append(happyPath(t, pathOpts{internal: true}), SettleInternally{Policy: fourEyes(t), At: at(9)}),
	}
	for name, cmds := range paths {
		t.Run(name, func(t *testing.T) {
			var w Withdrawal
			for i, c := range cmds {
				w = step(t, w, c)
				// The same decision again, now and after every later step.
				for _, prev := range cmds[:i+1] {
					evs, err := Decide(w, prev)
					if err != nil || len(evs) != 0 {
						// Later steps legitimately make some earlier commands
						// stale (an intent once the tx is confirmed); those
						// must be refusals, never new events.
						if len(evs) != 0 {
							t.Fatalf("after %T, replaying %T produced %v", c, prev, evs)
						}
						if prev == c {
							t.Fatalf("replaying %T right after it: %v", c, err)
						}
					}
				}
			}
			if w.State != StateConfirmed {
				t.Fatalf("ended in %s", w.State)
			}
		})
	}
}

func TestSameStepWithDifferentDataIsRefusedNotOverwritten(t *testing.T) {
	env := envelope("one", exp1)
	other := envelope("two", exp1)
	extR, _ := ExternalRoute("not custodied")
	intR, _ := InternalRoute("acct-2", "custodied")
	cases := []struct {
		name  string
		state State
		cmd   Command
		want  *Error
	}{
		{"second request with another amount", StateRequested, func() Command { c := requestCmd(t); c.Amount = usdt("1501"); return c }(), ErrIdempotencyConflict},
		{"second request by another principal", StateRequested, func() Command { c := requestCmd(t); c.RequestedBy = "mallory"; return c }(), ErrIdempotencyConflict},
		{"second request to another address", StateApproved, func() Command { c := requestCmd(t); c.ToAddress = "TOther"; return c }(), ErrIdempotencyConflict},
		{"second route the other way", StateApproved, ChooseRoute{Route: intR, At: at(30)}, ErrInvalidTransition},
		{"second envelope for attempt 1", StateSigning, BuildEnvelope{Envelope: other, Policy: fourEyes(t), At: at(30)}, ErrInvalidTransition},
		{"second signature", StateSigned, RecordSignature{Policy: fourEyes(t), TxID: env.TxID, Signature: signature(0x01), At: at(30)}, ErrInvalidTransition},
		{"signature for another txid", StateSigning, RecordSignature{Policy: fourEyes(t), TxID: other.TxID, Signature: signature(0xaa), At: at(30)}, ErrInvalidTransition},
		{"intent skipping a send", StateSigned, RecordBroadcastIntent{TxID: env.TxID, Send: 3, At: at(30)}, ErrInvalidTransition},
		{"other result for the accepted send", StateBroadcast, RecordAccepted{TxID: env.TxID, Send: 1, Result: "DUP_TRANSACTION_ERROR", At: at(30)}, ErrInvalidTransition},
		{"confirmation in another block", StateConfirmed, Confirm{TxID: env.TxID, BlockNumber: 101, BlockTime: exp1 - 30_000, Receipt: ReceiptSuccess, At: at(30)}, ErrInvalidTransition},
		{"failure with another reason", StateFailed, Fail{Reason: "other", At: at(30)}, ErrInvalidTransition},
		{"rejection with another reason", StateRejected, Reject{Reason: ReasonDailyLimit, At: at(30)}, ErrInvalidTransition},
		{"route replay stays a replay", StateSigning, ChooseRoute{Route: extR, At: at(30)}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := reach(t, tc.state, pathOpts{})
			if tc.want == nil {
				decideNothing(t, w, tc.cmd)
				return
			}
			decideErr(t, w, tc.cmd, tc.want)
		})
	}
}

func TestIdenticalRequestIsAReplayWhateverTheSpelling(t *testing.T) {
	w := reach(t, StateApproved, pathOpts{})
	c := requestCmd(t)
	c.ID = "{" + strings.ToUpper(opID) + "}"
	c.Amount = MustParseAmount(USDT, "1500.000000")
	c.At = at(99)
	c.Asset = ""
	decideNothing(t, w, c)
}

func TestApprovalRules(t *testing.T) {
	tiers := mustPolicy(t, "tiers", 3,
		Rule{Name: "large", Threshold: usdt("10000"), Approvers: 3},
		Rule{Name: "base", Threshold: Amount{}, Approvers: 1},
		Rule{Name: "medium", Threshold: usdt("1000"), Approvers: 2},
	)
	cases := []struct {
		amount string
		rule   string
		need   int
	}{
		{"0.000001", "base", 1},
		{"999.999999", "base", 1},
		{"1000", "base", 1}, // at the threshold: not above it
		{"1000.000001", "medium", 2},
		{"10000", "medium", 2},
		{"10000.000001", "large", 3},
		{"1000000000000000000000000", "large", 3},
	}
	for _, tc := range cases {
		t.Run(tc.amount, func(t *testing.T) {
			r := tiers.RuleFor(usdt(tc.amount))
			if r.Name != tc.rule || tiers.RuleFor(usdt(tc.amount)).Approvers != tc.need {
				t.Fatalf("got rule %s (%d approvers), want %s (%d)", r.Name, r.Approvers, tc.rule, tc.need)
			}
			// And the decider agrees: the n-th distinct approver approves.
			c := requestCmd(t)
			c.Amount, c.Policy = usdt(tc.amount), tiers
			w := step(t, Withdrawal{}, c)
			if w.RequiredApprovals != tc.need || w.Rule != tc.rule || w.PolicyVersion != 3 {
				t.Fatalf("snapshot: %d %s v%d", w.RequiredApprovals, w.Rule, w.PolicyVersion)
			}
			for i := 1; i <= tc.need; i++ {
				w = step(t, w, Approve{By: "approver" + string(rune('0'+i)), Policy: tiers, At: at(i)})
				if want := i == tc.need; (w.State == StateApproved) != want {
					t.Fatalf("after %d approvals: %s", i, w.State)
				}
			}
		})
	}
}

func TestFourEyesAboveAThousandMeansMoreThanAThousandNeedsTwo(t *testing.T) {
	p := DefaultPolicy()
	for amount, want := range map[string]int{"1": 1, "1000": 1, "1000.000001": 2, "5000": 2} {
		if got := p.RuleFor(usdt(amount)).Approvers; got != want {
			t.Errorf("%s USDT needs %d, want %d", amount, got, want)
		}
	}
}

func TestTheSameApproverTwiceCountsOnce(t *testing.T) {
	w := reach(t, StateRequested, pathOpts{})
	w = step(t, w, Approve{By: "bob", Policy: fourEyes(t), At: at(2)})
	decideNothing(t, w, Approve{By: "bob", Policy: fourEyes(t), At: at(3)})
	if w.State != StateRequested || len(w.Approvals) != 1 {
		t.Fatalf("%s with %d approvals", w.State, len(w.Approvals))
	}
	// …and after approval, a repeat by an approver is still "nothing changes".
	w = step(t, w, Approve{By: "carol", Policy: fourEyes(t), At: at(4)})
	decideNothing(t, w, Approve{By: "bob", Policy: fourEyes(t), At: at(5)})
	decideNothing(t, reach(t, StateConfirmed, pathOpts{}), Approve{By: "carol", Policy: fourEyes(t), At: at(50)})
}

func TestTheRequesterCanNeverApprove(t *testing.T) {
	for _, s := range []State{StateRequested, StateApproved, StateBroadcast, StateRejected} {
		w := reach(t, s, pathOpts{})
		decideErr(t, w, Approve{By: requester, Policy: policyNeeding(t, 1, 1), At: at(30)}, ErrSelfApproval)
	}
	// Nor can a forged log make it count.
	w := reach(t, StateRequested, pathOpts{})
	if _, err := Audit([]Event{
		mustEvent(t, Withdrawal{}, requestCmd(t)),
		Approved{Approval: Approval{By: requester, At: at(1), Rule: "single"}, RequiredApprovals: 1, At: at(1)},
	}); !errors.Is(err, ErrSelfApproval) {
		t.Fatalf("audit: %v (state %s)", err, w.State)
	}
}

func TestApprovingAnApprovedWithdrawalByANewApproverIsInvalid(t *testing.T) {
	decideErr(t, reach(t, StateApproved, pathOpts{}), Approve{By: "dave", Policy: fourEyes(t), At: at(30)}, ErrInvalidTransition)
}

func TestTightenedPolicySendsTheWithdrawalBackForApproval(t *testing.T) {
	w := reach(t, StateApproved, pathOpts{})
	stricter := mustPolicy(t, "three above 1000", 2,
		Rule{Name: "single", Threshold: Amount{}, Approvers: 1},
		Rule{Name: "three", Threshold: usdt("1000"), Approvers: 3})

	if err := EnsureApproved(w, fourEyes(t)); err != nil {
		t.Fatalf("still fine under the old policy: %v", err)
	}
	if err := EnsureApproved(w, stricter); !errors.Is(err, ErrApprovalsInsufficient) {
		t.Fatalf("EnsureApproved under v2: %v", err)
	}
	// Nothing moves money on stale approvals.
	decideErr(t, w, BuildEnvelope{Envelope: envelope("one", exp1), Policy: stricter, At: at(20)}, ErrApprovalsInsufficient)

	w = step(t, w, RecheckApprovals{Policy: stricter, At: at(20)})
	if w.State != StateRequested || w.Reason != ReasonPolicyTightened || w.RequiredApprovals != 3 ||
		w.Invalidation == nil || w.Invalidation.PolicyVersion != 2 || !w.ApprovedAt.IsZero() {
		t.Fatalf("after recheck: %+v", w)
	}
	decideNothing(t, w, RecheckApprovals{Policy: stricter, At: at(21)})
	if len(w.Approvals) != 2 {
		t.Fatalf("approvals given stay recorded: %d", len(w.Approvals))
	}
	w = step(t, w, Approve{By: "dave", Policy: stricter, At: at(22)})
	if w.State != StateApproved || w.Reason != "" || w.Approvals[2].PolicyVersion != 2 || w.Approvals[2].Rule != "three" {
		t.Fatalf("third approval under v2: %+v", w)
	}
	if err := EnsureApproved(w, stricter); err != nil {
		t.Fatal(err)
	}
	step(t, w, BuildEnvelope{Envelope: envelope("one", exp1), Policy: stricter, At: at(23)})
}

func TestALoosenedPolicyLeavesApprovalsStanding(t *testing.T) {
	w := reach(t, StateApproved, pathOpts{})
	decideNothing(t, w, RecheckApprovals{Policy: policyNeeding(t, 1, 2), At: at(20)})
}

func TestCancelOnlyInTheCancellablePrefix(t *testing.T) {
	for _, s := range []State{StateRequested, StateApproved} {
		w := step(t, reach(t, s, pathOpts{}), Cancel{By: "ops", At: at(30)})
		if w.State != StateRejected || w.Reason != ReasonCancelled || w.ResolvedBy != "ops" {
			t.Fatalf("cancel from %s: %+v", s, w)
		}
		decideNothing(t, w, Cancel{By: requester, At: at(31)})
	}
	for _, s := range []State{StateSigning, StateSigned, StateBroadcasting, StateBroadcast, StateConfirmed, StateFailed} {
		decideErr(t, reach(t, s, pathOpts{}), Cancel{By: requester, At: at(30)}, ErrNotCancellable)
	}
	w := step(t, reach(t, StateRequested, pathOpts{}), Reject{Reason: ReasonInsufficientFunds, At: at(3)})
	decideErr(t, w, Cancel{By: requester, At: at(30)}, ErrNotCancellable)
}

func TestMoneyMovesOnlyReservedAndRouted(t *testing.T) {
	env := envelope("one", exp1)
	unreserved := reach(t, StateApproved, pathOpts{unreserved: true})
	if !unreserved.Route.IsExternal() {
		t.Fatal("fixture should be routed")
	}
	decideErr(t, unreserved,
		BuildEnvelope{Envelope: env, Policy: fourEyes(t), At: at(5)}, ErrFundsNotReserved)
	decideErr(t, reach(t, StateApproved, pathOpts{unrouted: true}),
		BuildEnvelope{Envelope: env, Policy: fourEyes(t), At: at(5)}, ErrInvalidRoute)
	decideErr(t, reach(t, StateApproved, pathOpts{internal: true}),
		BuildEnvelope{Envelope: env, Policy: fourEyes(t), At: at(5)}, ErrInvalidRoute)
	decideErr(t, reach(t, StateApproved, pathOpts{}),
		SettleInternally{Policy: fourEyes(t), At: at(5)}, ErrInvalidRoute)
	if !reach(t, StateApproved, pathOpts{}).ReadyToSend() || unreserved.ReadyToSend() {
		t.Fatal("ReadyToSend must mean approved and reserved")
	}
}

func TestInternalRouteConfirmsWithoutAChain(t *testing.T) {
	w := reach(t, StateApproved, pathOpts{internal: true})
	w = step(t, w, SettleInternally{Policy: fourEyes(t), At: at(5)})
	if w.State != StateConfirmed || w.TxID() != "" || w.Attempt != 0 || w.Route.Account() != "acct-2" {
		t.Fatalf("%+v", w)
	}
	decideNothing(t, w, SettleInternally{Policy: fourEyes(t), At: at(6)})
}

func TestEnvelopeWhoseTxidIsNotTheHashOfItsBytesIsRefused(t *testing.T) {
	w := reach(t, StateApproved, pathOpts{})
	bad := envelope("one", exp1)
	bad.TxID = envelope("two", exp1).TxID
	decideErr(t, w, BuildEnvelope{Envelope: bad, Policy: fourEyes(t), At: at(5)}, ErrInvalidEnvelope)
	for _, mutate := range []func(*Envelope){
		func(e *Envelope) { e.Expiration = 0 },
		func(e *Envelope) { e.FeeLimit = 0 },
		func(e *Envelope) { e.RawDataHex = e.RawDataHex[:len(e.RawDataHex)-1] },
		func(e *Envelope) { e.TxID = "zz" + e.TxID[2:] },
	} {
		e := envelope("one", exp1)
		mutate(&e)
		decideErr(t, w, BuildEnvelope{Envelope: e, Policy: fourEyes(t), At: at(5)}, ErrInvalidEnvelope)
	}
	// Upper-case hex is the same envelope.
	up := envelope("one", exp1)
	up.TxID, up.RawDataHex = strings.ToUpper(up.TxID), strings.ToUpper(up.RawDataHex)
	w = step(t, w, BuildEnvelope{Envelope: up, Policy: fourEyes(t), At: at(5)})
	decideNothing(t, w, BuildEnvelope{Envelope: envelope("one", exp1), Policy: fourEyes(t), At: at(6)})
}

func TestRebuildRequiresChainTimeProof(t *testing.T) {
	env := envelope("one", exp1)
	next := envelope("two", exp1+3_600_000)
	good := proof(exp1)
	cases := []struct {
		name string
		ev   func(*Evidence)
		want *Error
	}{
		{"solid chain time before expiration + margin", func(e *Evidence) { e.SolidBlockTime = exp1 + e.Margin - 1 }, ErrInvalidEvidence},
		{"node still knows the txid", func(e *Evidence) { e.Lookup = "pending" }, ErrInvalidEvidence},
		{"node said expired", func(e *Evidence) { e.Lookup = "TRANSACTION_EXPIRATION_ERROR" }, ErrInvalidEvidence},
		{"no solid block", func(e *Evidence) { e.SolidBlockNumber = 0 }, ErrInvalidEvidence},
		{"evidence about another expiration", func(e *Evidence) { e.Expiration = exp1 - 60_000; e.SolidBlockTime = exp1 }, ErrInvalidEvidence},
		{"negative margin", func(e *Evidence) { e.Margin = -1 }, ErrInvalidEvidence},
		{"missing evidence", func(e *Evidence) { *e = Evidence{} }, ErrInvalidEvidence},
		{"exactly at expiration + margin", func(e *Evidence) { e.SolidBlockTime = exp1 + e.Margin; e.Scan.ToTime = exp1 + e.Margin }, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := good
			tc.ev(&ev)
			w := reach(t, StateBroadcast, pathOpts{})
			c := Rebuild{RetiredTxID: env.TxID, Evidence: ev, Envelope: next, At: at(30)}
			if tc.want != nil {
				decideErr(t, w, c, tc.want)
				return
			}
			w = step(t, w, c)
			if w.State != StateSigning || w.Attempt != 2 || w.TxID() != next.TxID ||
				len(w.Retired) != 1 || w.Retired[0].TxID != env.TxID || w.Retired[0].Evidence != ev {
				t.Fatalf("after rebuild: %+v", w)
			}
		})
	}
}

func TestRebuildRetiresTheOldTxidForGood(t *testing.T) {
	env := envelope("one", exp1)
	next := envelope("two", exp1+3_600_000)
	w := reach(t, StateBroadcasting, pathOpts{})
	rb := Rebuild{RetiredTxID: env.TxID, Evidence: proof(exp1), Envelope: next, At: at(30)}
	w = step(t, w, rb)
	decideNothing(t, w, rb)
	// A stale worker still holding the old txid is stopped at every step.
	for _, c := range []Command{
		RecordSignature{Policy: fourEyes(t), TxID: env.TxID, Signature: signature(0xaa), At: at(31)},
		RecordBroadcastIntent{TxID: env.TxID, Send: 2, At: at(31)},
		RecordAccepted{TxID: env.TxID, Send: 1, Result: "SUCCESS", At: at(31)},
		Confirm{TxID: env.TxID, BlockNumber: 100, BlockTime: exp1 - 1, Receipt: ReceiptSuccess, At: at(31)},
		Fail{Reason: "x", TxID: env.TxID, At: at(31)},
		BuildEnvelope{Envelope: env, Policy: fourEyes(t), At: at(31)},
	} {
		decideErr(t, w, c, ErrInvalidTransition)
	}
	// A rebuild can never bring back a used txid.
	w = step(t, w, RecordSignature{Policy: fourEyes(t), TxID: next.TxID, Signature: signature(0xbb), At: at(32)})
	decideErr(t, w, Rebuild{RetiredTxID: next.TxID, Evidence: proof(next.Expiration), Envelope: env, At: at(90)}, ErrInvalidEnvelope)
	// The new envelope goes through the same steps, numbered afresh.
	w = step(t, w, RecordBroadcastIntent{TxID: next.TxID, Send: 1, At: at(33)})
	if w.Attempt != 2 || w.Sends != 1 || w.State != StateBroadcasting {
		t.Fatalf("%+v", w)
	}
}

func TestClaimsFenceWorkers(t *testing.T) {
	w := reach(t, StateApproved, pathOpts{}) // claimed by w1 until at(10)
	decideErr(t, w, ClaimWithdrawal{Worker: "w2", LeaseUntil: at(20), At: at(9)}, ErrClaimHeld)
	decideNothing(t, w, ClaimWithdrawal{Worker: "w1", LeaseUntil: at(10), At: at(9)})
	renewed := step(t, w, ClaimWithdrawal{Worker: "w1", LeaseUntil: at(15), At: at(9)})
	if renewed.Claim.LeaseUntil != at(15) {
		t.Fatal("renewal not recorded")
	}
	taken := step(t, w, ClaimWithdrawal{Worker: "w2", LeaseUntil: at(20), At: at(10)}) // lease lapsed
	if taken.Claim.Worker != "w2" || !taken.Claim.HeldAt(at(19)) || taken.Claim.HeldAt(at(20)) {
		t.Fatalf("%+v", taken.Claim)
	}
	decideErr(t, w, ClaimWithdrawal{Worker: "w2", LeaseUntil: at(9), At: at(9)}, ErrInvalidCommand)
	decideErr(t, reach(t, StateConfirmed, pathOpts{}), ClaimWithdrawal{Worker: "w2", LeaseUntil: at(99), At: at(90)}, ErrInvalidTransition)
}

func TestTransitionsNeverChangeTheStateTheyStartFrom(t *testing.T) {
	base := reach(t, StateRequested, pathOpts{})
	base = step(t, base, Approve{By: "bob", Policy: policyNeeding(t, 4, 1), At: at(1)})
	// Give the slice spare capacity, the trap for append-based evolve.
	base.Approvals = append(make([]Approval, 0, 8), base.Approvals...)
	snapshot, _ := json.Marshal(base)

	a := Evolve(base, ApprovalRecorded{Approval: Approval{By: "carol", At: at(2), Rule: "flat"}, RequiredApprovals: 4, At: at(2)})
	b := Evolve(base, ApprovalRecorded{Approval: Approval{By: "dave", At: at(2), Rule: "flat"}, RequiredApprovals: 4, At: at(2)})
	if a.Approvals[1].By != "carol" || b.Approvals[1].By != "dave" {
		t.Fatalf("copies share a backing array: %v / %v", a.Approvals, b.Approvals)
	}
	if _, err := Decide(base, Approve{By: "erin", Policy: policyNeeding(t, 4, 1), At: at(3)}); err != nil {
		t.Fatal(err)
	}
	after, _ := json.Marshal(base)
	if string(snapshot) != string(after) {
		t.Fatalf("input changed:\n%s\n%s", snapshot, after)
	}

	w := reach(t, StateBroadcast, pathOpts{})
	before, _ := json.Marshal(w)
	w2 := Evolve(w, Rebuilt{Attempt: 2, RetiredTxID: w.TxID(), Evidence: proof(exp1), Envelope: envelope("two", exp1+1e6), At: at(40)})
	w3 := Evolve(w, Rebuilt{Attempt: 2, RetiredTxID: w.TxID(), Evidence: proof(exp1), Envelope: envelope("three", exp1+1e6), At: at(40)})
	if w2.Retired[0].ReplacedBy == w3.Retired[0].ReplacedBy {
		t.Fatal("retired lists share storage")
	}
	if now, _ := json.Marshal(w); string(now) != string(before) {
		t.Fatal("Evolve changed its input")
	}
}

func TestTimesAreRecordedInUTC(t *testing.T) {
	zone := time.FixedZone("UTC+5", 5*3600)
	c := requestCmd(t)
	c.At = time.Date(2025, 3, 1, 17, 0, 0, 0, zone)
	w := step(t, Withdrawal{}, c)
	w = step(t, w, Approve{By: "bob", Policy: fourEyes(t), At: time.Date(2025, 3, 1, 18, 0, 0, 0, zone)})
	if w.RequestedAt.Location() != time.UTC || w.Approvals[0].At.Location() != time.UTC || !w.RequestedAt.Equal(t0) {
		t.Fatalf("times not UTC: %v %v", w.RequestedAt, w.Approvals[0].At)
	}
	decideErr(t, w, Approve{By: "carol", Policy: fourEyes(t)}, ErrInvalidCommand)
}

func TestRequestValidation(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*RequestWithdrawal)
		want   *Error
	}{
		{"not a uuid", func(c *RequestWithdrawal) { c.ID = "op-1" }, ErrInvalidOperationID},
		{"nil uuid", func(c *RequestWithdrawal) { c.ID = "00000000-0000-0000-0000-000000000000" }, ErrInvalidOperationID},
		{"no account", func(c *RequestWithdrawal) { c.Account = "" }, ErrInvalidAccount},
		{"account with a dot", func(c *RequestWithdrawal) { c.Account = "a.b" }, ErrInvalidAccount},
		{"account with a wildcard", func(c *RequestWithdrawal) { c.Account = "a*" }, ErrInvalidAccount},
		{"no address", func(c *RequestWithdrawal) { c.ToAddress = "" }, ErrInvalidAddress},
		{"address with a space", func(c *RequestWithdrawal) { c.ToAddress = "T abc" }, ErrInvalidAddress},
		{"unknown asset", func(c *RequestWithdrawal) { c.Asset = "usdt-trc20" }, ErrUnsupportedAsset},
		{"zero amount", func(c *RequestWithdrawal) { c.Amount = Amount{} }, ErrInvalidAmount},
		{"amount finer than the asset", func(c *RequestWithdrawal) { c.Amount = newAmount(bigInt(1), 7) }, ErrInvalidAmount},
		{"no requester", func(c *RequestWithdrawal) { c.RequestedBy = "" }, ErrInvalidCommand},
		{"no time", func(c *RequestWithdrawal) { c.At = time.Time{} }, ErrInvalidCommand},
		{"invalid policy", func(c *RequestWithdrawal) { c.Policy = Policy{Name: "x"} }, ErrInvalidPolicy},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := requestCmd(t)
			tc.mutate(&c)
			decideErr(t, Withdrawal{}, c, tc.want)
		})
	}
	c := requestCmd(t)
	c.ID = strings.ToUpper(opID)
	if w := step(t, Withdrawal{}, c); w.ID != opID {
		t.Fatalf("id not canonical: %s", w.ID)
	}
}

func mustEvent(t *testing.T, w Withdrawal, c Command) Event {
	t.Helper()
	evs, err := Decide(w, c)
	if err != nil || len(evs) != 1 {
		t.Fatalf("%v %v", evs, err)
	}
	return evs[0]
}

func mustExternal(t *testing.T) Route {
	r, err := ExternalRoute("not custodied")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// history decides a whole path and returns its events.
func history(t *testing.T, cmds []Command) []Event {
	var w Withdrawal
	var out []Event
	for _, c := range cmds {
		e := mustEvent(t, w, c)
		out = append(out, e)
		w = Evolve(w, e)
	}
	return out
}

func rebuildPath(t *testing.T) []Command {
	env := envelope("one", exp1)
	next := envelope("two", exp1+3_600_000)
	cmds := happyPath(t, pathOpts{})
	cmds = cmds[:len(cmds)-2] // up to the first intent
	return append(cmds,
		Rebuild{RetiredTxID: env.TxID, Evidence: proof(exp1), Envelope: next, At: at(40)},
		RecordSignature{Policy: fourEyes(t), TxID: next.TxID, Signature: signature(0xbb), At: at(41)},
		RecordBroadcastIntent{TxID: next.TxID, Send: 1, At: at(42)},
		RecordBroadcastIntent{TxID: next.TxID, Send: 2, At: at(43)},
		RecordAccepted{TxID: next.TxID, Send: 2, Result: "SUCCESS", At: at(44)},
		Confirm{TxID: next.TxID, BlockNumber: 200, BlockTime: exp1 + 10, Receipt: ReceiptSuccess, At: at(45)},
	)
}

func TestEveryEventSurvivesTheLogByteForByte(t *testing.T) {
	events := history(t, rebuildPath(t))
	events = append(history(t, append(happyPath(t, pathOpts{internal: true}), SettleInternally{Policy: fourEyes(t), At: at(9)})), events...)
	seen := map[string]bool{}
	var decoded []Event
	for _, e := range events {
		data, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeWithdrawalEvent(e.EventType(), data)
		if err != nil {
			t.Fatalf("%s: %v\n%s", e.EventType(), err, data)
		}
		again, _ := json.Marshal(back)
		if string(again) != string(data) || reflect.TypeOf(back) != reflect.TypeOf(e) {
			t.Fatalf("%s does not round-trip:\n%s\n%s", e.EventType(), data, again)
		}
		seen[e.EventType()] = true
		decoded = append(decoded, back)
	}
	for _, ty := range []string{EventRequested, EventApproved, EventApprovalRecorded, EventRouted, EventSettledInternally,
		EventEnvelopeBuilt, EventSigned, EventBroadcasting, EventBroadcastAccepted, EventRebuilt, EventConfirmed, EventClaimed, EventFundsReserved} {
		if !seen[ty] {
			t.Errorf("not exercised: %s", ty)
		}
	}
	ext := events[len(events)-len(history(t, rebuildPath(t))):]
	dext := decoded[len(decoded)-len(ext):]
	a, _ := json.Marshal(Fold(ext).View())
	b, _ := json.Marshal(Fold(dext).View())
	if string(a) != string(b) {
		t.Fatalf("fold differs after decoding:\n%s\n%s", a, b)
	}
	if u := Fold(dext).Amount.UnitsString(); u != "1500000000" {
		t.Fatalf("decoded amount units: %s", u)
	}
}

func TestDecodingRefusesUnknownTypesAndMembers(t *testing.T) {
	if _, err := DecodeWithdrawalEvent("withdrawal.teleported", []byte(`{}`)); !errors.Is(err, ErrUnknownEvent) {
		t.Fatal(err)
	}
	if _, err := DecodeWithdrawalEvent(EventFailed, []byte(`{"reason":"x","at":"2025-01-01T00:00:00Z","extra":1}`)); !errors.Is(err, ErrInvalidEvent) {
		t.Fatal(err)
	}
	if _, err := DecodeWithdrawalEvent(EventFundsReserved, []byte(`{"account":"a","amount":1.5,"at":"2025-01-01T00:00:00Z"}`)); !errors.Is(err, ErrInvalidEvent) {
		t.Fatal(err)
	}
	if _, err := DecodeEvent("nope.x", nil); !errors.Is(err, ErrUnknownEvent) {
		t.Fatal(err)
	}
	if got := len(EventTypes()); got != len(allEventTypes)+5+3+1 { // 5 account, 3 policy, 1 config event types
		t.Fatalf("EventTypes: %d", got)
	}
	for _, ty := range EventTypes() {
		if _, err := DecodeEvent(ty, []byte(`{}`)); errors.Is(err, ErrUnknownEvent) {
			t.Errorf("%s listed but not decodable", ty)
		}
	}
}

func TestAuditFindsLogsDecideCouldNotHaveWritten(t *testing.T) {
	good := history(t, rebuildPath(t))
	if w, err := Audit(good); err != nil || w.State != StateConfirmed {
		t.Fatalf("a decided log fails audit: %v", err)
	}
	idx := func(ty string) int {
		for i, e := range good {
			if e.EventType() == ty {
				return i
			}
		}
		t.Fatalf("no %s", ty)
		return -1
	}
	tamper := []struct {
		name string
		edit func([]Event) []Event
	}{
		{"rebuild without proof", func(es []Event) []Event {
			i := idx(EventRebuilt)
			rb := es[i].(Rebuilt)
			rb.Evidence.SolidBlockTime = rb.Evidence.Expiration - 1
			es[i] = rb
			return es
		}},
		{"envelope with a foreign txid", func(es []Event) []Event {
			i := idx(EventEnvelopeBuilt)
			eb := es[i].(EnvelopeBuilt)
			eb.Envelope.TxID = envelope("zzz", exp1).TxID
			es[i] = eb
			return es
		}},
		{"confirmation before any broadcast", func(es []Event) []Event {
			i := idx(EventSigned)
			return append(es[:i+1:i+1], Confirmed{TxID: es[i].(Signed).TxID, BlockNumber: 1, BlockTime: 1, Receipt: ReceiptSuccess, At: at(50)})
		}},
		{"a second request", func(es []Event) []Event { return append(es[:1:1], es[0]) }},
	}
	for _, tc := range tamper {
		t.Run(tc.name, func(t *testing.T) {
			es := tc.edit(append([]Event(nil), good...))
			if _, err := Audit(es); err == nil {
				t.Fatal("audit passed a forged log")
			}
		})
	}
}

func TestViewHasTheContractShape(t *testing.T) {
	w := reach(t, StateRequested, pathOpts{})
	data, _ := json.Marshal(w.View())
	var m map[string]any
	_ = json.Unmarshal(data, &m)
	for _, k := range []string{"id", "state", "version", "account", "to_address", "amount", "amount_units", "asset",
		"requested_by", "required_approvals", "approvals", "route", "txid", "attempt", "reason", "terminal"} {
		if _, ok := m[k]; !ok {
			t.Errorf("missing %q", k)
		}
	}
	if m["route"] != nil || m["txid"] != nil || m["reason"] != nil || m["amount"] != "1500" || m["amount_units"] != "1500000000" {
		t.Errorf("absent values must be null, amounts canonical: %s", data)
	}
	if a, ok := m["approvals"].([]any); !ok || len(a) != 0 {
		t.Errorf("approvals must be an empty array: %s", data)
	}
	c, _ := json.Marshal(reach(t, StateConfirmed, pathOpts{}).View())
	if !strings.Contains(string(c), `"route":{"rail":"external","account":null,"reason":"not custodied"}`) ||
		!strings.Contains(string(c), `"terminal":true`) || !strings.Contains(string(c), `"policy_version":1`) {
		t.Errorf("confirmed view: %s", c)
	}
}
