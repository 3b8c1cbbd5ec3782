// Package history is the withdrawal history's read model: the index behind
// GET /v1/withdrawals (filters, newest first, terminal withdrawals too)
// that does not keep every withdrawal in memory.
//
// What it is for:
//   - an Indexer that follows the event log and appends one entry per
//     withdrawal (at its withdrawal.requested event) to the JetStream
//     stream WEIR_HISTORY, on subject weir.history.withdrawal.<account>,
//     with the event's log sequence (its durable position: it resumes after
//     the stream's last entry, so a restart neither skips nor repeats one)
//     and the sequence of the account's previous entry (a back-pointer, so
//     an account's entries are walked newest first one direct get each);
//   - a Reader that pages that index newest first (the cursor is an entry's
//     sequence), by account or over all accounts, and hands back only
//     withdrawal ids: the caller loads each withdrawal from the log, which
//     verifies it, and filters on what it loaded (state, account,
//     requester). An index entry is therefore never trusted for what a
//     withdrawal is; at worst a tampered index hides or repeats one.
//
// What it must not do: append events, decide anything, hold the
// withdrawals in memory, or serve a withdrawal's content from the index.
package history
