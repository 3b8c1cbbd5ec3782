// Package hotwallet watches the hot wallet on chain and decides whether
// sending may go on.
//
// A Monitor reads the wallet's USDT, TRX, energy and bandwidth, the
// chain's prices and the energy a transfer would use (tron.WalletReader)
// on an interval; GET /v1/wallet and the metrics show its last reading. As
// the broadcast worker's send gate (sagas.SendGate) it answers, before a
// withdrawal is claimed and its envelope built, whether the wallet can pay
// for that transfer: its USDT, and the TRX the transfer may burn within
// the fee limit. While it cannot, sending is paused (the withdrawal stays
// approved) and Status says why; the next reading that shows the funds
// resumes it.
//
// The gate counts the transfers built and not yet ended (Config.InFlight)
// and those it let through since, against the reading: a reading at the
// head does not show a transfer still in the pool. Low marks crossed and
// sending pausing or resuming are told to Config.OnChange, which weir
// serve announces on WEIR_NOTIFY (notify.WalletAnnouncer).
//
// It must not: decide anything about a withdrawal already built or
// broadcast (those are followed to their outcome whatever the wallet
// holds), write to the log, or send anything to the chain. A reading is a
// view at the node's head and proves nothing about the past.
package hotwallet
