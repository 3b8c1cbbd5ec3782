package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
)

// maxURLLen bounds a webhook URL.
const maxURLLen = 2048

// ErrPrivateTarget: a delivery would connect to an address the Guard does
// not allow (checked on the address dialled).
var ErrPrivateTarget = errors.New("webhook: target address is not public")

// Guard is the rule for webhook targets (the SSRF defence). With
// AllowPrivate every address is allowed (a receiver on the same host or
// network, e.g. in development); the scheme and credential rules hold
// either way.
type Guard struct {
	AllowPrivate bool
	// Resolver looks up host names at registration; nil: net.DefaultResolver.
	Resolver interface {
		LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
	}
}

// sharedAddressSpace (RFC 6598, carrier-grade NAT) and other ranges
// netip's predicates do not name but that are no public destination.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("100.64.0.0/10"),   // shared address space
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, broadcast
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("fec0::/10"),       // deprecated site-local
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
}

// Public reports whether addr is a public unicast address.
func Public(addr netip.Addr) bool {
	addr = addr.Unmap()
	if !addr.IsValid() || addr.IsLoopback() || addr.IsPrivate() || addr.IsLinkLocalUnicast() ||
		addr.IsLinkLocalMulticast() || addr.IsInterfaceLocalMulticast() || addr.IsMulticast() || addr.IsUnspecified() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(addr) {
			return false
		}
	}
	return true
}

// CheckURL validates a webhook URL at registration and returns it
// normalised. A host name must resolve, and every address it resolves to
// must be public (unless AllowPrivate).
func (g Guard) CheckURL(ctx context.Context, raw string) (string, error) {
	if raw == "" {
		return "", invalidURL("required")
	}
	if len(raw) > maxURLLen {
		return "", invalidURL("longer than %d characters", maxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", invalidURL("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", invalidURL("only http and https URLs")
	}
	if u.User != nil {
		return "", invalidURL("credentials in the URL are refused (they would be stored and shown); authenticate deliveries by their signature")
	}
	if u.Fragment != "" {
		return "", invalidURL("a fragment is never sent; drop it")
	}
	host := u.Hostname()
	if host == "" {
		return "", invalidURL("no host")
	}
	if g.AllowPrivate {
		return u.String(), nil
	}
	if addr, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		if !Public(addr) {
			return "", invalidURL("%s is not a public address (loopback, private and link-local targets need serve --webhook-allow-private)", addr)
		}
		return u.String(), nil
	}
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return "", invalidURL("%s is loopback (needs serve --webhook-allow-private)", host)
	}
	var res interface {
		LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
	} = net.DefaultResolver
	if g.Resolver != nil {
		res = g.Resolver
	}
	addrs, err := res.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return "", invalidURL("host %s does not resolve", host)
	}
	for _, a := range addrs {
		if !Public(a) {
			return "", invalidURL("host %s resolves to %s, which is not a public address (needs serve --webhook-allow-private)", host, a.Unmap())
		}
	}
	return u.String(), nil
}

// Control is a net.Dialer Control hook: it refuses a connection to an
// address that is not public, after name resolution, so whatever a name
// resolves to at delivery time (DNS rebinding) is judged, not what it
// resolved to at registration.
func (g Guard) Control(network, address string, _ syscall.RawConn) error {
	if g.AllowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrPrivateTarget, address, err)
	}
	if !Public(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrPrivateTarget, ap.Addr())
	}
	return nil
}
