package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// refuseDevDefaults keeps dev mode a dev mode. Without --principals weir
// runs with public tokens and funds account "dev" with a million USDT;
// without --custody it treats a published address as an internal one.
// That is fine on one machine against the simulated chain, and a hole
// anywhere else: with a real --tron-node, or a listener (or NATS) others
// can reach, the missing flag must be given instead.
func refuseDevDefaults(cfg serveConfig) error {
	var exposed []string
	if cfg.TronNode != "" {
		exposed = append(exposed, "--tron-node names a real chain")
	}
	if cfg.HTTP != "" && !loopbackAddr(cfg.HTTP) {
		exposed = append(exposed, fmt.Sprintf("--http %s is not a loopback address", cfg.HTTP))
	}
	if cfg.NATSURL == "" && cfg.NATSAddr != "" && !loopbackAddr(cfg.NATSAddr) {
		exposed = append(exposed, fmt.Sprintf("--nats-addr %s is not a loopback address", cfg.NATSAddr))
	}
	if cfg.NATSURL != "" && !loopbackURLs(cfg.NATSURL) {
		exposed = append(exposed, "--nats-url is not on this machine")
	}
	if len(exposed) == 0 {
		return nil
	}
	var missing []string
	if cfg.Principals == "" {
		missing = append(missing, "--principals FILE (the dev principals' tokens are public, and dev mode funds account \"dev\")")
	}
	if cfg.Custody == "" {
		missing = append(missing, "--custody FILE (the dev custody map treats a published address as ours)")
	}
	if len(missing) == 0 {
		return nil
	}
	return errors.New("dev mode is refused here: " + strings.Join(exposed, "; ") + ". Set " + strings.Join(missing, " and "))
}

// loopbackAddr reports whether a listen address (host:port) binds only the
// loopback interface. An empty host binds every interface.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	return loopbackHost(host)
}

func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// loopbackURLs reports whether every URL of a NATS URL list is on this
// machine.
func loopbackURLs(urls string) bool {
	for _, u := range strings.Split(urls, ",") {
		p, err := url.Parse(strings.TrimSpace(u))
		if err != nil || !loopbackHost(p.Hostname()) {
			return false
		}
	}
	return true
}
