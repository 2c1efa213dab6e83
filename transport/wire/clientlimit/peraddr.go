package clientlimit

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
)

// PerAddr caps what one client address holds at once: a unit per
// unauthenticated connection or request. Addresses are compared by IP,
// IPv6 by its /64 (one host's whole allocation), so that a client cannot
// multiply its share by changing ports or interface ids. A nil *PerAddr,
// or one made with max <= 0, admits everything.
type PerAddr struct {
	max     int
	setting string
	mu      sync.Mutex
	n       map[netip.Prefix]int
}

// NewPerAddr allows max units per address; max <= 0 means no limit.
// setting names the variable that raises it, for Refusal.
func NewPerAddr(max int, setting string) *PerAddr {
	return &PerAddr{max: max, setting: setting, n: make(map[netip.Prefix]int)}
}

// Refusal is the message a client over the cap sees, naming the limit
// and its setting.
func (p *PerAddr) Refusal() string {
	return fmt.Sprintf("too many unauthenticated connections from your address (limit %d, set %s)", p.Max(), p.setting)
}

// Max is the limit (0: none).
func (p *PerAddr) Max() int {
	if p == nil || p.max <= 0 {
		return 0
	}
	return p.max
}

// Acquire takes a unit for addr ("ip:port" or "ip", as net.Addr.String
// and http.Request.RemoteAddr give it). If ok, release must be called
// once when the unit ends (it may be called more often; later calls do
// nothing). An address that does not parse shares one unnamed key.
func (p *PerAddr) Acquire(addr string) (release func(), ok bool) {
	if p.Max() == 0 {
		return func() {}, true
	}
	key := Key(addr)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n[key] >= p.max {
		return nil, false
	}
	p.n[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.n[key]--; p.n[key] <= 0 {
				delete(p.n, key)
			}
		})
	}, true
}

// AcquireRequest is Acquire for an HTTP request without credentials, from
// its RemoteAddr. Credentials are an Authorization header, or one of
// cookies that carries a token (the browse page's sign-in). A request
// with credentials holds nothing: they are checked before it costs
// anything, and refused (401) when bad.
func (p *PerAddr) AcquireRequest(r *http.Request, cookies ...string) (release func(), ok bool) {
	if r.Header.Get("Authorization") != "" {
		return func() {}, true
	}
	for _, name := range cookies {
		if c, err := r.Cookie(name); err == nil && c.Value != "" {
			return func() {}, true
		}
	}
	return p.Acquire(r.RemoteAddr)
}

// Held is the number of units addr holds (tests, metrics).
func (p *PerAddr) Held(addr string) int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[Key(addr)]
}

// Key is the prefix addr is counted under: the IPv4 address, or the /64
// of an IPv6 one.
func Key(addr string) netip.Prefix {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}
	}
	ip = ip.Unmap().WithZone("")
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	pfx, _ := ip.Prefix(bits)
	return pfx
}
