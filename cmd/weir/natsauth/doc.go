// Package natsauth decides who may connect to weir's embedded nats-server
// and what each connection may do there. The NATS server enforces it: this
// is weir's security boundary, because the event log is the source of
// truth and whoever can write it, edit its stream or steal its consumer's
// deliveries decides balances and payouts.
//
// # What it does
//
//   - Authenticator (a server.Authentication) admits a principal that
//     presents its token — as the connect's auth_token (`nats --token T`)
//     or as user NAME with password T — and registers it with the
//     permissions of its roles (Permissions). Anything else is refused.
//   - Permissions: every principal publishes only commands (weir.cmd.>)
//     and service discovery ($SRV.>), subscribes only its inboxes
//     (_INBOX.>) and notifications (weir.notify.>), and may keep consumers
//     on the notification stream (WEIR_NOTIFY): under the names it owns
//     (NotifyConsumerNames: its own name and NAME_1 … NAME_9), and, when
//     not scoped to accounts, under any name no other principal owns
//     (OthersNotifyConsumerDeny) — never another's. The auditor role (an
//     operator is one) may also read the event stream WEIR_EVENTS: stream
//     info, direct and leader gets, and ephemeral ordered consumers — never
//     weir's own durable consumers (WeirDurables).
//
// # What it must not do
//
// Grant anything else: no publish to weir.evt.>, no $JS.API stream or KV
// management, no $JS.ACK, no subscription to weir.cmd.> (commands carry
// bearer tokens) or to weir's internal inboxes. It never logs a token or a
// password. weir's own components do not pass through it: they use the
// embedded server's internal in-process identity (eventstore.Embedded).
package natsauth
