package aggregate

// Decide: the one entry point for withdrawal commands, dispatching to the
// deciders in decide_*.go and checking every event against rules.go.

// Decide returns the events command c causes on withdrawal w: exactly one
// event, or none when c's outcome is already recorded (a replay), or a
// typed *Error. w is not modified. Timestamps are not part of what makes a
// replay: the same step decided again later with the same data is still a
// replay; the same step with different data is refused, never recorded over.
func Decide(w Withdrawal, c Command) ([]Event, error) {
	e, err := decide(w, c)
	if err != nil || e == nil {
		return nil, err
	}
	if err := checkEvent(w, e); err != nil {
		return nil, err
	}
	return []Event{e}, nil
}

func decide(w Withdrawal, c Command) (Event, error) {
	switch c := c.(type) {
	case RequestWithdrawal:
		return decideRequest(w, c)
	case Approve:
		return decideApprove(w, c)
	case RecheckApprovals:
		return decideRecheck(w, c)
	case Cancel:
		return decideCancel(w, c)
	case Reject:
		return decideReject(w, c)
	case Decline:
		return decideDecline(w, c)
	case RecordReservation:
		return decideReservation(w, c)
	case ClaimWithdrawal:
		return decideClaim(w, c)
	case ChooseRoute:
		return decideRoute(w, c)
	case SettleInternally:
		return decideSettleInternally(w, c)
	case BuildEnvelope:
		return decideBuildEnvelope(w, c)
	case RecordSignature:
		return decideSignature(w, c)
	case RecordBroadcastIntent:
		return decideIntent(w, c)
	case RecordAccepted:
		return decideAccepted(w, c)
	case Rebuild:
		return decideRebuild(w, c)
	case ReplaceUnsigned:
		return decideReplaceUnsigned(w, c)
	case Confirm:
		return decideConfirm(w, c)
	case Fail:
		return decideFail(w, c)
	}
	return nil, newError(CodeInvalidCommand, "", "unknown command %T", c)
}
