package main

import (
	"fmt"
	"net"
)

// checkListeners tries every address `weir serve` will listen on before
// anything starts, so a clash is reported at once naming its flag rather
// than as a start-up that waits and then says "not ready". It holds them
// all at once, so the same address given to two flags is a clash too, and
// closes them before returning (a port taken in between is still reported
// by the listener itself, with its flag).
func checkListeners(cfg serveConfig) error {
	type want struct{ flag, addr string }
	var wants []want
	if cfg.NATSURL == "" && cfg.NATSAddr != "" {
		wants = append(wants, want{"--nats-addr", cfg.NATSAddr})
	}
	wants = append(wants, want{"--http", cfg.HTTP})
	if cfg.TronNode == "" && cfg.TronHTTP != "" {
		wants = append(wants, want{"--tron-http", cfg.TronHTTP})
	}
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			_ = ln.Close()
		}
	}()
	for _, w := range wants {
		ln, err := net.Listen("tcp", w.addr)
		if err != nil {
			return fmt.Errorf("%s %s: cannot listen (%w); is another weir or program using it? choose another address with %s", w.flag, w.addr, err, w.flag)
		}
		held = append(held, ln)
	}
	return nil
}
