// Package notify publishes withdrawal state changes to the JetStream stream
// WEIR_NOTIFY, one message per state-changing event of the log, so that
// producers learn of them without polling (a durable consumer on
// WEIR_NOTIFY never misses one across the producer's restarts).
//
// What the room is for:
//   - the notification contract: the stream (WEIR_NOTIFY, subjects
//     weir.notify.withdrawal.<account>.<state>), the body
//     {"event_id","type":"withdrawal.state_changed","at","withdrawal"} and
//     its headers (Nats-Msg-Id = the event id, Weir-Source-Seq = the
//     event's stream sequence in the log);
//   - the Publisher: a follower of the event log (the same verified read
//     path the projections use: a quarantined event is never folded, so it
//     is never announced) whose position is the last withdrawal
//     notification of WEIR_NOTIFY itself. Each publish expects the
//     stream's last sequence as read with that message
//     (Nats-Expected-Last-Sequence: one number for the server to compare,
//     where a last sequence on weir.notify.withdrawal.> made it search
//     every account and state subject), so a message is published once
//     even when the log is replayed long after the de-duplication window,
//     or when two weir processes share one NATS; a wallet notification in
//     between only makes the publish be refused, read again and retried;
//     on a one-node server that fsyncs every write, a backlog of
//     notifications goes out as one atomic batch (one sync, one ack) under
//     the same expectation on its first message (UseBatches);
//   - the wallet notifications (weir.notify.wallet.<topic>.<state>, body
//     {"event_id","type","at","asset","low_mark","wallet"}): the
//     WalletAnnouncer publishes the hot-wallet monitor's changes (a low
//     mark crossed, sending paused or resumed) once per change of the
//     announced state, which is the last message on its topic (see
//     WalletAnnouncer for why that, and not only Nats-Msg-Id).
//
// What it must not do: decide anything, write to the event log, or
// announce an event before it is stored (it reads only the log), or
// announce anything the log does not say (the withdrawal JSON is the fold
// of the log up to the event).
package notify
