package hooks

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// ErrBlockedAddress: a hook's host resolved to an address deliveries may
// not go to (loopback, private, link-local, …) and RGIT_HOOK_ALLOW does
// not list it.
var ErrBlockedAddress = errors.New("address not allowed for webhooks")

// blocked are the ranges that are not the public internet: a webhook URL
// naming them would let whoever may add a hook reach the node's own
// services, its cloud's metadata endpoint or the private network.
var blocked = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",       // "this network"
		"10.0.0.0/8",      // private
		"100.64.0.0/10",   // carrier-grade NAT
		"127.0.0.0/8",     // loopback
		"169.254.0.0/16",  // link-local (cloud metadata)
		"172.16.0.0/12",   // private
		"192.0.0.0/24",    // IETF protocol assignments
		"192.0.2.0/24",    // documentation
		"192.168.0.0/16",  // private
		"198.18.0.0/15",   // benchmarking
		"198.51.100.0/24", // documentation
		"203.0.113.0/24",  // documentation
		"224.0.0.0/4",     // multicast
		"240.0.0.0/4",     // reserved, broadcast
		"::/128",          // unspecified
		"::1/128",         // loopback
		"64:ff9b::/96",    // NAT64: embeds any IPv4 address
		"64:ff9b:1::/48",  // local NAT64
		"100::/64",        // discard
		"2001:db8::/32",   // documentation
		"2002::/16",       // 6to4: embeds any IPv4 address
		"fc00::/7",        // unique local
		"fe80::/10",       // link-local
		"ff00::/8",        // multicast
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// Guard decides which addresses deliveries may connect to: any public
// address, and the blocked ranges that Allow lists (RGIT_HOOK_ALLOW;
// tests allow loopback).
type Guard struct {
	Allow []netip.Prefix
}

// Check returns nil when a delivery may connect to addr.
func (g Guard) Check(addr netip.Addr) error {
	addr = addr.Unmap()
	for _, p := range g.Allow {
		if p.Contains(addr) {
			return nil
		}
	}
	if !addr.IsValid() {
		return fmt.Errorf("%w: invalid address", ErrBlockedAddress)
	}
	for _, p := range blocked {
		if p.Contains(addr) {
			return fmt.Errorf("%w: %s is in %s (RGIT_HOOK_ALLOW can allow it)", ErrBlockedAddress, addr, p)
		}
	}
	return nil
}

// control is the dialer's Control hook: it runs after the name was
// resolved and before the socket connects, on the very address the
// connection will use, so a name cannot resolve to a public address for
// a check and to a private one for the connection.
func (g Guard) control(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBlockedAddress, err)
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBlockedAddress, err)
	}
	return g.Check(addr)
}
