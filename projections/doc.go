// Package projections holds weir's read models: what the queues and balance
// endpoints show, folded from the event log.
//
// What the room is for:
//   - a Projector that follows the log (eventstore.Subscribe) and keeps, per
//     open withdrawal, its folded aggregate.Withdrawal and, per account, its
//     aggregate.Account — folded with aggregate.Evolve and EvolveAccount, the
//     same functions the deciders' state comes from, so a view can never
//     disagree with the stream about what an event means;
//   - the views: pending approvals (required vs given), ready to send
//     (approved, reserved, not under a live lease), in flight (signing …
//     broadcast, with txid, attempt, age and an ambiguous flag), balances;
//   - being idempotent under redelivery (the last applied stream sequence is
//     remembered and every aggregate's version is checked), checkpointed to a
//     JetStream KeyValue bucket, and rebuildable from zero with exactly the
//     same result (Snapshot makes that comparable);
//   - read-your-writes for callers that just appended (WaitFor), and lag.
//
// What it must not do: append events, decide anything, or call anything
// beyond reading the log and reading and writing its own checkpoints. A view
// is a convenience that may lag: decisions (claims, approvals, reservations)
// are made by deciders against a stream loaded from the store, never against
// a view, so a stale or rebuilt projection can delay work but never cause a
// wrong decision. A record out of order stops it loudly (Err) rather than
// being skipped: a projection that silently missed an event would be wrong
// forever. A record that fails verification or decoding is quarantined
// (Quarantined): its aggregate leaves every view, nothing of it is folded
// again, the store is told (Violations), and the rest of the log goes on.
// Checkpoints are authenticated with the store's Sealer and size-capped; one
// that fails is discarded and the log replayed.
package projections
