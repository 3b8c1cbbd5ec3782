// Package nodetest is the contract test suite every tron.Node backed by a
// simulated chain must pass: the in-process *tron.SimNode and the tronhttp
// client talking to a tronhttp-served SimNode run the very same tests, so
// what the saga is tested against in process is what it gets over HTTP.
//
// It also holds the node wrappers tests put in front of a SimNode: Lagging
// (a backend that has seen the chain only up to some blocks ago) and
// Balanced (a load balancer routing each call, deterministically, to one of
// several backends), for the proofs that must hold behind hosted endpoints
// (both also read wallets and blocks, tron.WalletReader and
// tron.ChainReader, so the hot-wallet monitor and the audit run behind them);
// and LoadVectors, the one loader of the real transactions in
// testdata/tron/transactions.json for the tron and cmd/weir tests.
//
// It is test support only: import it from _test.go files. It must not grow
// helpers the production code depends on.
package nodetest
