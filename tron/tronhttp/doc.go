// Package tronhttp speaks java-tron's HTTP API: Client is a tron.Node (and a
// tron.WalletReader and tron.ChainReader) over a real (or simulated) full
// node's /wallet and /walletsolidity endpoints,
// and NewHandler serves a *tron.SimNode on those same paths with the same
// JSON shapes, so the client is tested against the simulator exactly as it
// would run against java-tron. The handler also serves POST /sim/fund,
// which no java-tron has; the client never calls it.
//
// What this room is for: transport only — exact bytes out (broadcasthex of
// the signed protobuf, never a JSON re-rendering of the transaction),
// java-tron JSON in, and a mapping of transport failures to the tron error
// catalogue (timeouts → tron.ErrTimeout, unreachable/5xx → tron.ErrUnavailable,
// unreadable → tron.ErrBadResponse).
//
// What it must not do: retry broadcasts on its own (a lost answer is
// ambiguous and the saga decides), decide anything about withdrawals, send
// weir's internal headers to a node that is not weir's own, or turn a
// node's word into proof.
package tronhttp
