// Command weir is the one binary of the project: `weir serve` runs the
// engine (embedded NATS, HTTP API, NATS command service, projections,
// broadcast workers, simulated TRON node); the other subcommands are the
// producer and operator CLI and offline tools (tx decode/recover).
//
// This package is wiring and transports only. It must not hold business
// rules: every decision is made in aggregate/ and driven by sagas/.
package main
