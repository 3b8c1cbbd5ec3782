// Package api holds weir's two transports — the HTTP API (NewHTTPHandler)
// and the NATS micro service "weir" (StartService) — over one application
// layer, sagas.Intake. CONTRACT.md fixes their paths, subjects, statuses,
// codes and fields; acceptance tests outside the repository drive exactly
// those. Client (Dial, NewClient) is the typed NATS client of the service,
// kept beside it: the CLI, demo and bench call weir only through it, and
// it decodes replies into the same view types the service encodes.
//
// # What it does
//
//   - Identity: "Authorization: Bearer <token>" (an HTTP header, or a NATS
//     message header) is resolved against Principals. The authenticated
//     principal's name is who requests, approves, cancels and sets the
//     policy; no request body can name it.
//   - Roles: a write needs the role CONTRACT.md names (commandRoles:
//     requester to request, approver to approve, operator to credit and
//     set the policy; auditor writes nothing here, it only reads the log
//     over NATS, see cmd/weir/natsauth), checked before the body is read. Any authenticated
//     principal may read. Cancel is passed the principal and whether it is
//     an operator; the application layer decides (its requester or an
//     operator).
//   - Decoding: bodies are at most 64 KiB (413 too_large), application/json
//     (415 unsupported_media_type; a charset other than UTF-8 is refused),
//     exactly one JSON object with no unknown members and no trailing data
//     (400 malformed_json, field naming the member at fault). Unknown
//     members are refused rather than ignored: a misspelt "ammount" or
//     "to_adress" must not silently become a default. So are a key given
//     twice and a key that matches a member only when case is ignored
//     (checkKeys): encoding/json would take the last, or fold "AMOUNT" and
//     "aſſet" onto the member, where another parser would not. The policy document
//     is the exception: a body that is JSON but not a valid policy,
//     unknown members included, is 422 invalid_policy, as the --policy
//     file is judged (aggregate.ParsePolicyJSON). Amounts are passed raw to
//     the domain, which refuses a JSON number with 422 invalid_amount.
//   - Error mapping: StatusTable is the one table from error code to HTTP
//     status; the NATS service sends the same status as its micro error
//     code and the same ErrorBody. Codes are typed where they are raised
//     (aggregate, sagas, this package for the transport's own). Contention
//     beyond the retry bound, an unconfirmed append, timeouts and a lost
//     store reach the transport already translated by sagas.Repo
//     (sagas.UnavailableError) and are 503 unavailable;
//     anything not in the table is logged and answered 500 internal without
//     its text.
//   - Edges (edge.go): NewHTTPServer sets every timeout and a header cap;
//     LimitListener caps HTTP connections in total and per client address
//     (evicting idle ones at the total cap); MaxInFlight bounds requests
//     handled at once (503 beyond); RateLimiter gives each principal, and
//     each address's failed authentications, a token bucket shared by
//     both transports (429 rate_limited + Retry-After); a NATS reply that
//     would exceed the max payload is 413 reply_too_large; every queue
//     answers pages (limit, keyset cursor).
//   - Observability: each request is logged with slog (method, path,
//     status, principal, duration) and counted on a private Prometheus
//     registry served on /metrics (Metrics; the wiring adds its own
//     collectors to Metrics.Registry).
//
// # What it must not do
//
// No business rule lives here: no validation of amounts, addresses,
// accounts or policies beyond JSON syntax and types, no state machine, no
// idempotency logic, no balance arithmetic, no reading or writing of the
// event store. Whatever a transport decides on its own (who the caller is,
// whether a body is well-formed JSON) it decides identically on both
// transports, through the shared ops. It never trusts a body for identity,
// never shows an internal error's text, and never lets a client's
// disconnect cut a command short (commands run on a context detached from
// the caller, bounded by CommandTimeout).
package api
