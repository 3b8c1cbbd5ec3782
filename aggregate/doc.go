// Package aggregate is the domain of weir as pure values: money, the approval
// policy, the routing decision, and the two deciders that own every rule about
// when money may move — the withdrawal (one stream per operation_id) and the
// account (one stream per account id). A small policy aggregate records who
// changed the policy in force, and when.
//
// What this room is for:
//   - Deciders in the functional style: Decide(state, command) returns the
//     events a command causes (at most one per decision, so the store never
//     needs a batch on the hot path) or a typed *Error with a stable code;
//     Evolve(state, event) returns the next state; Fold replays a stream.
//     Replaying a decision whose outcome is already recorded yields no events
//     and no error; the same step with different data is refused
//     (ErrInvalidTransition or ErrIdempotencyConflict), never an overwrite.
//   - The withdrawal state machine as one table (Transitions). Decide, the
//     audit (CheckTransition, NextStateOf, Audit) and State.IsTerminal all
//     read it, so there is no second copy to drift (a signature carrying
//     the first send's intent is two of its edges, not an edge of its own). Audit replays a stored stream through
//     the same rules Decide applies, for `weir audit`.
//   - Exact money: Amount is a shopspring decimal held at its asset's scale
//     (the coefficient is the integer number of base units); weir adds only
//     the rules around it (the narrow string grammar, scale, > 0, the asset's
//     maximum). Nothing here ever touches a float.
//
// What it must not do: perform I/O, read the clock (every command carries its
// own time, supplied by the caller from a clock or from the chain), know about
// NATS, HTTP or TRON encoding, or import anything beyond the standard library,
// shopspring/decimal and google/uuid. Values handed out are never mutated
// afterwards: transitions copy before they change, so a state kept by a caller
// is not altered by a later Evolve on another copy.
package aggregate
