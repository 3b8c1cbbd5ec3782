package sagas

import (
	"errors"
	"sync"
)

// CrashPoint names a place in the broadcast saga where a test can kill a
// worker as if its process died there: between two writes, or between a
// write and the network call it announces. Each point sits where a real
// crash would leave the log and the chain disagreeing in a particular way,
// which is exactly what the next owner's recovery must handle.
type CrashPoint string

const (
	// CrashAfterClaim: the lease is in the log, nothing else was done.
	CrashAfterClaim CrashPoint = "after_claim"
	// CrashAfterRoute: the routing decision is in the log, nothing acted on it.
	CrashAfterRoute CrashPoint = "after_route"
	// CrashBeforeSettleInternal: an internal route, approvals re-checked,
	// the ledger transfer not yet recorded.
	CrashBeforeSettleInternal CrashPoint = "before_settle_internal"
	// CrashAfterBuild: the envelope (txid + raw bytes) is written ahead; it
	// was never signed.
	CrashAfterBuild CrashPoint = "after_build_before_sign"
	// CrashAfterSignBeforeRecord: the signer produced a signature that never
	// reached the log.
	CrashAfterSignBeforeRecord CrashPoint = "after_sign_before_record"
	// CrashAfterSignature: the signature is in the log; no intent, no send.
	CrashAfterSignature CrashPoint = "after_signature_before_intent"
	// CrashAfterIntent: the broadcasting intent is in the log; the bytes
	// were never sent.
	CrashAfterIntent CrashPoint = "after_intent_before_send"
	// CrashAfterSend: the node has the bytes (or not); its answer was lost
	// with the process.
	CrashAfterSend CrashPoint = "after_send_before_record"
	// CrashAfterAccepted: acceptance is in the log; nobody watches for
	// confirmation.
	CrashAfterAccepted CrashPoint = "after_accepted"
	// CrashBeforeConfirm: the solid block with a SUCCESS receipt was seen;
	// the confirmation was never written.
	CrashBeforeConfirm CrashPoint = "before_confirm_write"
	// CrashBeforeFail: a failure was decided (hard reject, revert, attempts
	// exhausted) and never written.
	CrashBeforeFail CrashPoint = "before_fail_write"
	// CrashBeforeRebuild: the chain-time proof of death holds and the new
	// envelope is built; the rebuild was never written.
	CrashBeforeRebuild CrashPoint = "before_rebuild_write"
	// CrashAfterRebuild: the rebuild is in the log; the new envelope was
	// never signed.
	CrashAfterRebuild CrashPoint = "after_rebuild_before_sign"
)

// CrashPoints lists every crash point, in the order a withdrawal meets them.
func CrashPoints() []CrashPoint {
	return []CrashPoint{
		CrashAfterClaim, CrashAfterRoute, CrashBeforeSettleInternal, CrashAfterBuild,
		CrashAfterSignBeforeRecord, CrashAfterSignature, CrashAfterIntent, CrashAfterSend,
		CrashAfterAccepted, CrashBeforeConfirm, CrashBeforeFail, CrashBeforeRebuild, CrashAfterRebuild,
	}
}

// CrashHook is consulted at every crash point a worker passes; returning
// true kills the worker there. A hook may also block, which is how a test
// freezes a worker mid-step (a zombie) and lets it go later. Hooks are
// called from the worker's goroutine and must be safe for concurrent use
// when shared between workers.
type CrashHook func(point CrashPoint, withdrawalID string) bool

// ErrCrashed is returned by every Worker method once a crash hook fired:
// the worker is dead, like a process that exited, and wrote nothing after
// the crash point. Start a new Worker to carry on.
var ErrCrashed = errors.New("sagas: worker crashed at a crash point")

// CrashOnce returns a hook that fires the first time any worker using it
// reaches point (for any withdrawal when id is "", else only for id), and
// never again.
func CrashOnce(point CrashPoint, id string) CrashHook {
	var once sync.Once
	return func(p CrashPoint, wid string) bool {
		if p != point || (id != "" && wid != id) {
			return false
		}
		fired := false
		once.Do(func() { fired = true })
		return fired
	}
}
