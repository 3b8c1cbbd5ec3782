// Package audit judges the event log: it replays what is stored and checks
// that it could only have been written by weir's deciders, that money moved
// only with approvals satisfying the policy in force, that every rebuild was
// proven safe, that the accounts add up and agree with the withdrawals, and
// — when a node is given — that the chain agrees.
//
// Its API is small: Withdrawal audits one withdrawal (its stream, the policy
// stream, its accounts, and the cross-stream checks that concern it), All
// audits the whole log; both return a Report whose findings are values
// (severity, check, where, what). The CLI (`weir audit`), the console and
// tests call it; printing, flags and progress bars are theirs.
//
// Every finding says where: the withdrawal or account, the event's version
// and, for what the store could not even decode, its stream sequence. A bad
// event is a finding, never a reason to stop: the audit goes on with
// everything else. Only a log it cannot read at all (no connection, not
// authorised) is an error.
//
// The rules it re-derives come from aggregate/ (transition table, deciders'
// checks via aggregate.AuditRecorded on the server's record times, distinct
// approvals, account folding and invariants via aggregate.ReplayAccount);
// this package adds only what a single decider cannot see: history (the
// policy in force then and now), the envelope's bytes, the agreement
// between streams (back-pointers, reservations, txids written ahead once),
// and the chain. With a node, every proof the log relies on is checked
// again on the solid blocks it cites (sagas.VerifyExpiryProof,
// sagas.VerifyFailure) and every confirmation against its block; a node
// that cannot answer leaves a note, never a violation.
//
// Authority comes from the configuration stream (config.go): each request,
// approval, cancel, decline, credit and policy change is judged against
// the principals and roles in force at its position in the log, each
// envelope's owner and signer against the hot wallets in force, each
// reservation's daily limit against the limit in force. A log with no
// configuration events is judged as before, with a note.
//
// What it must not do: append anything (it only reads), trust a value the
// checked event carries about itself when the log can say otherwise, read
// the wall clock for anything but the settle grace and the report's
// elapsed time, or print.
package audit
