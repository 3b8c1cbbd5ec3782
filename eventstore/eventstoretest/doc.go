// Package eventstoretest starts a real embedded nats-server and opens event
// stores on it, for tests outside eventstore: one call gives a test its own
// server (memory storage, or file storage in a directory that survives a
// restart) that is shut down when the test ends.
//
// What it must not do: fake NATS in any way (it is the real server,
// in-process), know anything about withdrawals (the caller passes its
// registry), or be imported by non-test code.
package eventstoretest
