// Package eventstore is weir's append-only event log on NATS JetStream.
//
// What the room is for:
//   - starting an embedded nats-server (file or memory storage, fsync on
//     every write, in-process connections, optional TCP listener) or
//     connecting to an external one;
//   - creating the one event stream, append-only by configuration
//     (DenyDelete, DenyPurge), with a de-duplication window;
//   - appending to one aggregate's subject (<prefix>.<type>.<id>) with
//     optimistic concurrency, where an append whose outcome is unknown is
//     settled by reading the subject back, so callers get success or a
//     conflict or a hard error, never a guess; with GroupCommit (a
//     one-node server that fsyncs every write), appends that wait behind
//     one another go out as one atomic batch, synced once, each keeping its
//     own expectation and its own answer (PublishAtomic sends such a batch
//     to another stream: the notification publisher's);
//   - loading one aggregate at a cost that grows with its own events, not
//     with the stream (Load; LoadLatest reads the last event through the
//     stream leader, never a lagging replica; LoadSince reads only the
//     events after a known position, for snapshot-based loads);
//   - reading the whole log (or one aggregate type) from a position, for
//     projections (Subscribe, ReadAll), and durable at-least-once delivery
//     for sagas (Consume: acknowledged only after the handler succeeds);
//   - reading the log's end once for all of a process's followers (Tail:
//     one ordered consumer, each record verified once, held in a ring the
//     followers' Subscribes are served from; a follower behind the ring
//     reads the rest itself);
//   - encoding: JSON payloads, event type and schema version in headers, a
//     Registry that refuses unknown types loudly and upcasts old schemas;
//   - authenticating events: with a Sealer (Keyring: HMAC-SHA256, one key
//     signs, older ones verify) every append carries a tag and every read
//     verifies it. An event that does not verify or decode is an
//     *IntegrityError: Load refuses its aggregate, and readers either stop
//     on it or, with OnViolation, go on past it without handling it; the
//     store remembers what it saw (Violations).
//
// eventstore/eventstoretest starts a real embedded server for other
// packages' tests.
//
// What it must not do: know anything about withdrawals, accounts, money or
// chains (event types are opaque strings to it; payloads are opaque JSON);
// decide anything on a caller's behalf (a conflict is reported, never
// retried with a re-decided event); delete, purge or rewrite events; skip
// an event it cannot decode or verify without telling the caller.
//
// Header layout of every stored event: Nats-Msg-Id (event id, a ULID),
// Weir-Event-Type, Weir-Schema, Weir-Version (1..n within the aggregate) and
// Weir-Prev-Seq (stream sequence of the aggregate's previous event), plus
// Nats-Expected-Last-Subject-Sequence as sent, and with a Sealer
// Weir-Key-Id and Weir-Tag (hex HMAC over subject, version, prev-seq, id,
// type, schema and payload).
package eventstore
