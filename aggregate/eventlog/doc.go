// Package eventlog is how the domain is written to and read from the event
// store: the aggregate types that name its subjects (weir.evt.<type>.<id>),
// the registry of every event type at its current schema, and the decoding
// of stored records into aggregate events. It sits with the domain so that
// the write side (sagas) and the read side (projections) share one codec and
// neither borrows it from the other.
//
// What it must not do: decide, fold, or touch NATS. It only translates
// between eventstore records and aggregate values; the rules stay in
// aggregate and the I/O in eventstore.
package eventlog
