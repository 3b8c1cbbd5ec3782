package aggregate

import (
	"errors"
	"slices"
	"testing"
)

// allEventTypes is written out here, independently of the package's
// registry, so that adding an event type without covering it fails a test.
var allEventTypes = []string{
	EventRequested, EventApprovalRecorded, EventApproved, EventApprovalsInvalidated, EventRejected,
	EventFundsReserved, EventClaimed, EventRouted, EventSettledInternally, EventEnvelopeBuilt, EventSigned,
	EventBroadcasting, EventBroadcastAccepted, EventRebuilt, EventEnvelopeReplaced, EventConfirmed, EventFailed,
}

// expectedLegal is DESIGN.md's state machine, restated by hand: from → event → to.
var expectedLegal = map[State]map[string]State{
	StateNone: {EventRequested: StateRequested},
	StateRequested: {
		EventApprovalRecorded: StateRequested, EventApproved: StateApproved,
		EventRejected: StateRejected, EventFundsReserved: StateRequested,
	},
	StateApproved: {
		EventApprovalsInvalidated: StateRequested, EventRejected: StateRejected,
		EventFundsReserved: StateApproved, EventClaimed: StateApproved, EventRouted: StateApproved,
		EventSettledInternally: StateConfirmed, EventEnvelopeBuilt: StateSigning,
	},
	StateSigning: {
		EventClaimed: StateSigning, EventSigned: StateSigned, EventFailed: StateFailed,
		EventApprovalsInvalidated: StateRequested, EventEnvelopeReplaced: StateSigning,
	},
	StateSigned: {
		EventClaimed: StateSigned, EventBroadcasting: StateBroadcasting, EventRebuilt: StateSigning,
		EventFailed: StateFailed,
	},
	StateBroadcasting: {
		EventClaimed: StateBroadcasting, EventBroadcasting: StateBroadcasting,
		EventBroadcastAccepted: StateBroadcast, EventRebuilt: StateSigning, EventFailed: StateFailed,
		// A solid block with the txid confirms without an acceptance written first.
		EventConfirmed: StateConfirmed,
	},
	StateBroadcast: {
		EventClaimed: StateBroadcast, EventBroadcasting: StateBroadcasting, EventRebuilt: StateSigning,
		EventConfirmed: StateConfirmed, EventFailed: StateFailed,
	},
	StateConfirmed: {},
	StateRejected:  {},
	StateFailed:    {},
}

func allStates() []State { return append([]State{StateNone}, States()...) }

func TestTransitionTableIsExactlyTheDesignedStateMachine(t *testing.T) {
	if !slices.Equal(sortedCopy(allEventTypes), WithdrawalEventTypes()) {
		t.Fatalf("event types: registry %v, test knows %v", WithdrawalEventTypes(), allEventTypes)
	}
	for _, from := range allStates() {
		for _, ev := range allEventTypes {
			want, legal := expectedLegal[from][ev]
			got, err := NextState(from, ev)
			if cerr := CheckTransition(from, ev); (cerr == nil) != legal {
				t.Errorf("CheckTransition(%q, %s) = %v", from, ev, cerr)
			}
			switch {
			case legal && (err != nil || got != want):
				t.Errorf("%q + %s: want → %s, got %s, %v", from, ev, want, got, err)
			case !legal && !errors.Is(err, ErrInvalidTransition):
				t.Errorf("%q + %s: want invalid_transition, got → %s, %v", from, ev, got, err)
			}
			if LegalTransition(from, ev) != legal {
				t.Errorf("LegalTransition(%q, %s) = %v", from, ev, !legal)
			}
		}
	}
	if n := len(Transitions()); n != countLegal() {
		t.Errorf("Transitions() lists %d edges, the design has %d", n, countLegal())
	}
}

func countLegal() int {
	n := 0
	for _, m := range expectedLegal {
		n += len(m)
	}
	return n
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

func TestTerminalAndCancellableStatesFollowFromTheTable(t *testing.T) {
	terminal := map[State]bool{StateConfirmed: true, StateRejected: true, StateFailed: true}
	cancellable := map[State]bool{StateRequested: true, StateApproved: true}
	inFlight := map[State]bool{StateSigning: true, StateSigned: true, StateBroadcasting: true, StateBroadcast: true}
	for _, s := range allStates() {
		if s.IsTerminal() != terminal[s] {
			t.Errorf("%q.IsTerminal() = %v", s, s.IsTerminal())
		}
		if s.IsInFlight() != inFlight[s] {
			t.Errorf("%q.IsInFlight() = %v", s, s.IsInFlight())
		}
		if s.IsCancellable() != cancellable[s] {
			t.Errorf("%q.IsCancellable() = %v", s, s.IsCancellable())
		}
	}
}

// matrixCase builds, for a state and an event type, a withdrawal in that
// state and a command whose fresh data would produce that event type.
func matrixCase(t *testing.T, from State, ev string) (Withdrawal, Command) {
	t.Helper()
	def := func() Withdrawal { return reach(t, from, pathOpts{}) }
	w := def()
	txid := w.Envelope.TxID
	if txid == "" {
		txid = envelope("one", exp1).TxID
	}
	expiration := w.Envelope.Expiration
	if expiration == 0 {
		expiration = exp1
	}
	switch ev {
	case EventRequested:
		c := requestCmd(t)
		c.Amount = usdt("7") // fresh data: a different request on the same id
		return w, c
	case EventApprovalRecorded:
		return w, Approve{By: "dave", Policy: policyNeeding(t, 3, 2), At: at(30)}
	case EventApproved:
		if from == StateRequested {
			// The fixture's amount needed two approvals at request; a looser
			// policy in force does not lower that, so one comes first.
			w = step(t, w, Approve{By: "erin", Policy: fourEyes(t), At: at(29)})
		}
		return w, Approve{By: "dave", Policy: policyNeeding(t, 1, 2), At: at(30)}
	case EventApprovalsInvalidated:
		return w, RecheckApprovals{Policy: policyNeeding(t, 5, 2), At: at(30)}
	case EventRejected:
		return w, Reject{Reason: ReasonInsufficientFunds, At: at(30)}
	case EventFundsReserved:
		if from == StateRequested || from == StateApproved || from == StateRejected {
			w = reach(t, from, pathOpts{unreserved: true})
		}
		return w, RecordReservation{At: at(30)}
	case EventClaimed:
		return w, ClaimWithdrawal{Worker: "w-fresh", LeaseUntil: at(100), At: at(30)}
	case EventRouted:
		if from == StateApproved {
			w = reach(t, from, pathOpts{unrouted: true})
		}
		r, _ := InternalRoute("acct-9", "custodied")
		return w, ChooseRoute{Route: r, At: at(30)}
	case EventSettledInternally:
		if from == StateApproved {
			w = reach(t, from, pathOpts{internal: true})
		}
		return w, SettleInternally{Policy: fourEyes(t), At: at(30)}
	case EventEnvelopeBuilt:
		return w, BuildEnvelope{Envelope: envelope("fresh", exp1), Policy: fourEyes(t), At: at(30)}
	case EventSigned:
		return w, RecordSignature{Policy: fourEyes(t), TxID: txid, Signature: signature(0x5e), At: at(30)}
	case EventBroadcasting:
		return w, RecordBroadcastIntent{TxID: txid, Send: w.Sends + 1, At: at(30)}
	case EventBroadcastAccepted:
		return w, RecordAccepted{TxID: txid, Send: max(w.Sends, 1), Result: "FRESH", At: at(30)}
	case EventEnvelopeReplaced:
		return w, ReplaceUnsigned{RetiredTxID: txid, Reason: ReasonSignerChanged, Envelope: envelope("fresh", expiration+600_000), At: at(30)}
	case EventRebuilt:
		return w, Rebuild{RetiredTxID: txid, Evidence: proof(expiration), Envelope: envelope("fresh", expiration+600_000), At: at(30)}
	case EventConfirmed:
		return w, Confirm{TxID: txid, BlockNumber: 777, BlockTime: exp1 - 1000, Receipt: ReceiptSuccess, At: at(30)}
	case EventFailed:
		if w.Signature != "" {
			p := proof(expiration)
			return w, Fail{Reason: "fresh_reason", Evidence: &p, At: at(30)}
		}
		return w, Fail{Reason: "fresh_reason", At: at(30)}
	}
	t.Fatalf("no command for %s", ev)
	return w, nil
}

// replayCells are the refused edges where the fixture necessarily already
// holds the command's outcome, so the honest answer is "already recorded":
// every withdrawal past approved has its funds reserved.
var replayCells = map[State]map[string]bool{
	StateSigning: {EventFundsReserved: true}, StateSigned: {EventFundsReserved: true},
	StateBroadcasting: {EventFundsReserved: true}, StateBroadcast: {EventFundsReserved: true},
	StateConfirmed: {EventFundsReserved: true}, StateFailed: {EventFundsReserved: true},
}

func TestEveryStateAndEventPairIsDecidedAsTheTableSays(t *testing.T) {
	for _, from := range allStates() {
		for _, ev := range allEventTypes {
			name := string(from)
			if from == StateNone {
				name = "new"
			}
			t.Run(name+"/"+ev, func(t *testing.T) {
				w, cmd := matrixCase(t, from, ev)
				if w.State != from {
					t.Fatalf("fixture is in %s, want %s", w.State, from)
				}
				evs, err := Decide(w, cmd)
				want, legal := expectedLegal[from][ev]
				switch {
				case legal:
					if err != nil || len(evs) != 1 || evs[0].EventType() != ev {
						t.Fatalf("legal edge: want one %s, got %v, %v", ev, evs, err)
					}
					if got := Evolve(w, evs[0]).State; got != want {
						t.Fatalf("lands in %s, want %s", got, want)
					}
				case replayCells[from][ev]:
					if err != nil || len(evs) != 0 {
						t.Fatalf("already recorded: want no events and no error, got %v, %v", evs, err)
					}
				default:
					if len(evs) != 0 || err == nil {
						t.Fatalf("refused edge: want an error, got %v, %v", evs, err)
					}
					wantErr := ErrInvalidTransition
					if ev == EventRequested {
						wantErr = ErrIdempotencyConflict
					}
					if !errors.Is(err, wantErr) {
						t.Fatalf("want %s, got %v", wantErr.Code, err)
					}
				}
			})
		}
	}
}

func TestEvolveIgnoresAnEventTheTableRefuses(t *testing.T) {
	w := reach(t, StateRequested, pathOpts{})
	env := envelope("x", exp1)
	got := Evolve(w, Signed{TxID: env.TxID, Signature: signature(1), At: at(5)})
	if got.State != StateRequested || got.Signature != "" || got.Version != w.Version+1 {
		t.Fatalf("illegal event applied: %+v", got)
	}
}
