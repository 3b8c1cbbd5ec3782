package aggregate

// State is where a withdrawal is in its life.
type State string

const (
	// StateNone is the state of a stream with no events yet.
	StateNone         State = ""
	StateRequested    State = "requested"
	StateApproved     State = "approved"
	StateSigning      State = "signing"
	StateSigned       State = "signed"
	StateBroadcasting State = "broadcasting"
	StateBroadcast    State = "broadcast"
	StateConfirmed    State = "confirmed"
	StateRejected     State = "rejected"
	StateFailed       State = "failed"
)

// States lists every state a withdrawal can be in (StateNone excluded), in
// lifecycle order.
func States() []State {
	return []State{StateRequested, StateApproved, StateSigning, StateSigned, StateBroadcasting,
		StateBroadcast, StateConfirmed, StateRejected, StateFailed}
}

// Withdrawal event types: stable names, stored in the log.
const (
	EventRequested            = "withdrawal.requested"
	EventApprovalRecorded     = "withdrawal.approval_recorded"
	EventApproved             = "withdrawal.approved"
	EventApprovalsInvalidated = "withdrawal.approvals_invalidated"
	EventRejected             = "withdrawal.rejected"
	EventFundsReserved        = "withdrawal.funds_reserved"
	EventClaimed              = "withdrawal.claimed"
	EventRouted               = "withdrawal.routed"
	EventSettledInternally    = "withdrawal.settled_internally"
	EventEnvelopeBuilt        = "withdrawal.envelope_built"
	EventSigned               = "withdrawal.signed"
	EventBroadcasting         = "withdrawal.broadcasting"
	EventBroadcastAccepted    = "withdrawal.broadcast_accepted"
	EventRebuilt              = "withdrawal.rebuilt"
	EventEnvelopeReplaced     = "withdrawal.envelope_replaced"
	EventConfirmed            = "withdrawal.confirmed"
	EventFailed               = "withdrawal.failed"
)

// Transition is one legal edge: an event of type Event, applied in state
// From, leads to state To (To == From for events that record without moving).
type Transition struct {
	From  State
	Event string
	To    State
}

// transitionRows is THE state machine — the only copy. Decide, Evolve, the
// audit (CheckTransition, Replay), IsTerminal and IsCancellable all derive
// from it.
var transitionRows = []struct {
	from  []State
	event string
	to    State // StateNone here means "stays where it is"
}{
	{[]State{StateNone}, EventRequested, StateRequested},
	{[]State{StateRequested}, EventApprovalRecorded, StateNone},
	{[]State{StateRequested}, EventApproved, StateApproved},
	// The pre-send re-check: approvals no longer satisfy the policy in force.
	// From signing it also retires the envelope, which was never signed.
	{[]State{StateApproved, StateSigning}, EventApprovalsInvalidated, StateRequested},
	// Rejection (including cancel) only while nothing can have been sent.
	{[]State{StateRequested, StateApproved}, EventRejected, StateRejected},
	// The reservation may complete after approval (a saga finishing intake
	// after a crash), never after the withdrawal ended.
	{[]State{StateRequested, StateApproved}, EventFundsReserved, StateNone},
	// The broadcast saga's fencing claim: from ready-to-send until an outcome.
	{[]State{StateApproved, StateSigning, StateSigned, StateBroadcasting, StateBroadcast}, EventClaimed, StateNone},
	{[]State{StateApproved}, EventRouted, StateNone},
	// An internal route is a ledger transfer: no chain, straight to confirmed.
	{[]State{StateApproved}, EventSettledInternally, StateConfirmed},
	{[]State{StateApproved}, EventEnvelopeBuilt, StateSigning},
	{[]State{StateSigning}, EventSigned, StateSigned},
	// An intent is written before every send, first or resend. The first
	// send's may ride on the signature (signed with send 1): both edges,
	// signing → signed → broadcasting (NextStateOf).
	{[]State{StateSigned, StateBroadcasting, StateBroadcast}, EventBroadcasting, StateBroadcasting},
	{[]State{StateBroadcasting}, EventBroadcastAccepted, StateBroadcast},
	// Recovery: a new envelope, only with proof the old one can never pay:
	// the chain-time proof of death, or its failing receipt in a solid block.
	{[]State{StateSigned, StateBroadcasting, StateBroadcast}, EventRebuilt, StateSigning},
	// An envelope never signed needs no proof to be replaced.
	{[]State{StateSigning}, EventEnvelopeReplaced, StateSigning},
	// Confirmation needs the solid block, not the acceptance before it.
	{[]State{StateBroadcasting, StateBroadcast}, EventConfirmed, StateConfirmed},
	{[]State{StateSigning, StateSigned, StateBroadcasting, StateBroadcast}, EventFailed, StateFailed},
}

var transitionIndex = func() map[State]map[string]State {
	idx := map[State]map[string]State{}
	for _, row := range transitionRows {
		for _, from := range row.from {
			if idx[from] == nil {
				idx[from] = map[string]State{}
			}
			to := row.to
			if to == StateNone {
				to = from
			}
			idx[from][row.event] = to
		}
	}
	return idx
}()

// Transitions lists every legal edge (a fresh copy).
func Transitions() []Transition {
	var out []Transition
	for _, row := range transitionRows {
		for _, from := range row.from {
			to := row.to
			if to == StateNone {
				to = from
			}
			out = append(out, Transition{From: from, Event: row.event, To: to})
		}
	}
	return out
}

// CheckTransition refuses, with invalid_transition, an event of eventType in
// state from when the table has no such edge (the audit's question).
func CheckTransition(from State, eventType string) error {
	_, err := NextState(from, eventType)
	return err
}

// NextState returns the state an event of eventType leads to from `from`, or
// an invalid_transition error if the table has no such edge.
func NextState(from State, eventType string) (State, error) {
	if to, ok := transitionIndex[from][eventType]; ok {
		return to, nil
	}
	name := string(from)
	if from == StateNone {
		name = "(new)"
	}
	return from, newError(CodeInvalidTransition, "", "%s is not allowed in state %s", eventType, name)
}

// NextStateOf is NextState for the event e itself: every event is the one
// edge of its type, but a signature that is also the intent of the first
// send (withdrawal.signed with send 1) is two edges of the table, the
// signature's then the intent's (signing → signed → broadcasting), and is
// legal only where both are.
func NextStateOf(from State, e Event) (State, error) {
	to, err := NextState(from, eventType(e))
	if err != nil {
		return to, err
	}
	if s, ok := e.(Signed); ok && s.Send != 0 {
		return NextState(to, EventBroadcasting)
	}
	return to, nil
}

// LegalTransition reports whether eventType may be applied in state from.
func LegalTransition(from State, eventType string) bool {
	_, ok := transitionIndex[from][eventType]
	return ok
}

// Valid reports whether s is one of States().
func (s State) Valid() bool {
	for _, v := range States() {
		if s == v {
			return true
		}
	}
	return false
}

// IsTerminal reports whether nothing can happen to a withdrawal in state s
// any more: a real state with no outgoing edge in the table.
func (s State) IsTerminal() bool { return s.Valid() && len(transitionIndex[s]) == 0 }

// IsCancellable reports whether a withdrawal in state s may still be
// rejected (the cancellable prefix: requested, approved).
func (s State) IsCancellable() bool { return LegalTransition(s, EventRejected) }

// IsInFlight reports whether s is between the first envelope and an outcome
// (signing … broadcast): a txid exists and may be on the network.
func (s State) IsInFlight() bool {
	return LegalTransition(s, EventFailed)
}
