// Package sagas is weir's application layer and its process managers: the
// code that turns a command or an event into the next decision and appends
// it.
//
//   - Repo is the one path by which anything changes: load an aggregate
//     from its stream, decide with the pure deciders of aggregate/, append
//     with optimistic concurrency. Update* retries a lost race by deciding
//     again (intake, ledger, operators); AppendWithdrawalAt does not — it is
//     the broadcast worker's fence: a worker whose stream moved on is
//     refused and stops before any network call. Accounts load from a
//     snapshot and the events after it (snapshots.go in memory,
//     durable_snapshots.go in KV WEIR_SNAPSHOTS, tagged with the event key
//     and never trusted over the log); the live account state forgets
//     finished reservations, so ReserveFor (reserve.go) asks the
//     withdrawal's own stream whether it was already reserved.
//   - Intake is what both transports call: request (idempotent by
//     operation id), approve, cancel, credit, reads, policy.
//   - Ledger is the saga that keeps accounts in step with withdrawals
//     (reserve on request, release on reject/fail, settle on confirm,
//     credit the destination of an internal transfer; on account.reserved,
//     record the reservation on the withdrawal or give it back if the
//     withdrawal ended). Every step is idempotent; run inline for fast
//     replies and from a durable consumer so a crash between two steps is
//     completed by the next process. It refuses to decide on a read older
//     than the event it handles (the event is redelivered).
//   - Worker is the broadcast saga. It claims a ready withdrawal by
//     appending a lease at the position it read; routes it (custodied
//     destination → ledger transfer, the node is never called); re-checks
//     approvals against the policy in force now; writes the envelope (txid
//     and raw bytes) before signing and a broadcasting intent before every
//     send (an external payout's claim, route and envelope are one event,
//     and its signature is the intent of its first send: 3 appends from
//     approved to confirmed). It drives up to Inflight
//     withdrawals at once, each fenced by its own stream position, and
//     confirms by following the solid blocks (watch.go: one receipts call
//     per block for all its txids; the head and reference block read once
//     per round; the scan's position is the log: a flight taken over is
//     watched from the block after its envelope's reference block), and
//     follows the head blocks the same way only to learn
//     which txids left the pool for a block (a hint that spares a lookup
//     by txid, never a confirmation); classifies the node's answer (accepted; hard reject → stop
//     sending those bytes, and fail only once the chain-time proof below
//     shows they can never land, since another node may still take them;
//     ambiguous → reconcile by txid); resends the same bytes while they can
//     still land; and builds a new envelope only with a proof recorded in
//     the rebuilt event: a chain-time proof of death (every solid block up
//     to expiration + margin scanned, none holds the txid) or a failing
//     receipt (OUT_OF_ENERGY/REVERT) read again from its solid block — the
//     latter only once the send gate (sendgate.go) says the hot wallet can
//     pay. The gate also holds approved withdrawals back while the wallet
//     cannot pay; it never holds one already broadcast. Each state's
//     handler is its own recovery procedure: there is no reaper and no
//     startup scan. Crash points (crash.go) let tests kill a worker
//     between any two of these steps.
//
// Subpackages: audit (the replay and checks behind `weir audit`, findings as
// values), notify (state changes published to WEIR_NOTIFY), webhook (signed
// webhooks, delivered in order per webhook) and hotwallet (watches the hot
// wallet on chain and gates sending). The codec and stream names they share
// with projections live in aggregate/eventlog.
//
// What it must not do: decide anything the deciders decide (it asks them),
// read the wall clock for anything but leases and command timestamps
// (expiry is chain time from the node), trust the node's word ("expired",
// "DUP") as proof of anything, sign or send before the txid is in the log,
// or talk HTTP/NATS to clients (that is cmd/weir).
package sagas
