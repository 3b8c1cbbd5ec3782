// Package nodetest is the contract test suite every tron.Node backed by a
// simulated chain must pass: the in-process *tron.SimNode and the tronhttp
// client talking to a tronhttp-served SimNode run the very same tests, so
// what the saga is tested against in process is what it gets over HTTP.
//
// It is test support only: import it from _test.go files. It must not grow
// helpers the production code depends on.
package nodetest
