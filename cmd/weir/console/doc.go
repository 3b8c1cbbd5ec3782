// Package console is weir's web console, served by `weir serve` at
// /console/: approvers and operators see the approvals queue, a
// withdrawal's timeline from the log, what is in flight, accounts and
// their statements, the policy and its history, the hot wallet and (for
// operators) the webhooks and their deliveries; they approve and decline
// as themselves, and the open page updates itself from the notification
// stream WEIR_NOTIFY.
//
// # What it is for
//
//   - One more adapter of the application layer, beside the HTTP API and
//     the NATS service: every read and every decision goes through api.App,
//     the very ops those transports run, with the same principals, the
//     same role checks, the same account scoping and the same refusals
//     (self_approval, forbidden, invalid_transition … shown as readable
//     messages with their code).
//   - Sessions: a principal logs in with its token once; the console
//     keeps a session in memory (lost on restart: everyone logs in again)
//     behind a random cookie (HttpOnly, SameSite=Strict, Path=/console/,
//     Secure over TLS), idle and absolute expiry, logout. Every form
//     carries a per-session CSRF token (the login form a double-submitted
//     one); a POST without it is 403 and changes nothing. Failed logins
//     draw on the API's per-address budget, requests on the principal's.
//   - Pages rendered on the server (html/template, assets embedded), no
//     build step, no CDN. Every action is a plain form POST answered by a
//     redirect, so it works without JavaScript; the one script only keeps
//     the open page current from /console/events (server-sent events),
//     which streams the notifications of the accounts the principal may
//     read and nothing else; WEIR_NOTIFY is consumed only while such a
//     page is open (Follow). Strict security headers (a CSP without
//     inline script, no framing, nosniff, no referrer).
//
// # What it must not do
//
// No business rule: it never decides who may do what, never reads or
// writes the event store itself, never calls weir's HTTP API or NATS
// service over the network. It never logs or shows a token or a session
// id, never renders user-supplied text without html/template's escaping,
// and never acts on a GET.
package console
