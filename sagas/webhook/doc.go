// Package webhook registers signed webhooks and delivers notifications to
// them.
//
// What the room is for:
//   - registrations: events of a webhook aggregate in the log
//     (webhook.registered, webhook.deleted; decided in aggregate/), each
//     secret kept in the KV bucket weir_webhooks — never in the log, which
//     auditors read, never in a log line, and returned only once, by
//     Register;
//   - the URL rule (Guard): only http(s), no credentials in the URL, and no
//     loopback, private, link-local, shared-address or otherwise
//     non-public target unless private targets are allowed — checked at
//     registration on every address the host resolves to, and again on
//     the address actually dialled (a net.Dialer Control hook), so a name
//     that resolves elsewhere later (DNS rebinding) is refused too;
//   - delivery (Dispatcher): one loop per webhook reads WEIR_NOTIFY after
//     the webhook's cursor, POSTs each notification it asked for with
//     Weir-Event-Id and Weir-Signature (t=<unix>,v1=<hex HMAC-SHA256 of
//     "<t>.<body>">), retries non-2xx and timeouts with exponential backoff
//     (first retry after 2 s, capped, given up after MaxRetryAge ≥ 24 h),
//     and records every attempt in the KV bucket weir_webhook_deliveries.
//     The cursor moves past a notification only once it was delivered (or
//     given up), so the order of a withdrawal's states is kept, and a
//     restart resumes where the cursor and the attempts say.
//
// What it must not do: decide anything about withdrawals, write to the
// event log other than its own registrations, follow redirects or a proxy
// from the environment (both would dodge the URL rule), sleep on the wall
// clock in a way tests cannot drive (the Clock is injected), or log a
// secret.
package webhook
