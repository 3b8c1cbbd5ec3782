// Package tron is the TRON rail: addresses, the byte-exact protobuf encoding
// of TRC-20 transfer transactions and their txid, the signer boundary, the
// Node interface the broadcast saga talks to, and a fault-injecting simulated
// node (SimNode) that stands in for java-tron in tests, the demo and the
// default `weir serve`.
//
// What this room is for:
//
//   - Turning (owner, to, amount, reference block, times) into raw_data bytes
//     whose sha256 is the txid. Those bytes are produced once and are then the
//     thing that is stored, signed and sent: nothing here re-serialises a
//     decoded transaction for hashing or sending (DecodeRaw keeps the original
//     bytes; EncodeRaw exists to prove byte compatibility, not to rebuild).
//
//   - Classifying what a node says (BroadcastResult, TxStatus) without
//     over-trusting it: DUP, "expired", SERVER_BUSY, unknown codes and
//     timeouts are ambiguous, never proof that a transaction did or did not
//     land. Only chain time from solid blocks can prove death; the saga owns
//     that proof, this package only supplies honest inputs for it.
//
//   - Serving solid blocks with their transaction ids (Node.SolidBlockByNum),
//     so that absence can be shown over blocks a backend really has
//     (ErrBlockNotSolid when it has not), never by one lookup's "unknown".
//     A head block's receipts (Node.TxInfosByBlockNum) are served too, for
//     what they are: a hint that a transaction was included, which a fork
//     can undo.
//
//   - Knowing the hot wallet and the chain (WalletReader, ChainReader):
//     token balance, TRX, energy and bandwidth, the energy a transfer would
//     use, the chain's prices, the genesis block, and the transfers solid
//     blocks hold. SimNode charges energy, bandwidth and the memo fee as
//     mainnet does (sim_wallet.go names its figures), so failed receipts
//     and drained wallets can be tested.
//
//   - Keeping a simulated chain across restarts (sim_persist.go):
//     MarshalState/LoadSimNode and SaveFile (atomic, 0600)/LoadSimNodeFile,
//     which refuses a file it cannot read rather than starting over.
//
//   - Observed: one wrapper that watches every Node call (per-worker counts,
//     before/after hooks) for the demo, the bench and tests.
//
// What it must not do: know about withdrawals, accounts, policies or the
// event store (it imports only the standard library and crypto libraries),
// read the wall clock to decide anything about the chain, or log key material.
package tron
