package cluster

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Session renewals acknowledged from memory while the store fails (see
// the package doc, "Store outages"): the decisions are here, the leader
// actor carries them out.

// HorizonKey is the refdb key of the leader's renewal horizon (Horizon).
// It lies outside KeyPrefix and SessionPrefix, so scans of entries and
// sessions never see it.
const HorizonKey = "meta/renewal-horizon"

// Horizon bounds the session renewals a leader process may acknowledge
// without persisting them. Every commit of the leader writes the horizon
// it starts (HorizonAt), so the stored one is that of the process's last
// commit: after it, the process acknowledged from memory only renewals it
// decided before Until, of sessions live at Since in the stored map. A
// zero Horizon (no commit yet) allows nothing.
type Horizon struct {
	// Since is when the commit that wrote it was composed: every
	// decision made before is durable with it.
	Since time.Time
	// Until: no renewal decided at or after it is acknowledged from memory.
	Until time.Time
}

// HorizonAt is the horizon a commit composed at start writes, with grace
// the leader's Timings.StoreGrace (zero: none, acknowledgements need a
// durable write as before).
func HorizonAt(start time.Time, grace time.Duration) Horizon {
	return Horizon{Since: start, Until: start.Add(max(grace, 0))}
}

// Allows reports whether a renewal decided at t may be acknowledged
// without a durable write under h.
func (h Horizon) Allows(t time.Time) bool { return !t.Before(h.Since) && t.Before(h.Until) }

// Floor returns s, a session record a new leader process loaded, as it
// must read it when the previous process's last commit wrote h: a session
// live at h.Since may have been renewed from memory until h.Until, each
// such renewal ending its TTL later, so it is live until at least
// h.Until+ttl. A session lapsed at h.Since is left lapsed: the previous
// process renewed it no more after (rule 3 of the package doc), and may
// have granted its entries to others, so reviving it would let its node
// serve them again.
//
//	s.Expires      h                 → Expires
//	any            Until ≤ Since     unchanged (no grace, or a drain)
//	≤ Since        Until > Since     unchanged (lapsed)
//	> Since        Until > Since     max(Expires, Until+ttl)
func (h Horizon) Floor(s NodeSession, ttl time.Duration) NodeSession {
	if !h.Until.After(h.Since) || !s.Expires.After(h.Since) {
		return s
	}
	if f := h.Until.Add(ttl); f.After(s.Expires) {
		s.Expires = f
	}
	return s
}

// MarshalBinary encodes the horizon as two decimal Unix nanosecond
// times, "since until".
func (h Horizon) MarshalBinary() ([]byte, error) {
	var ns [2]int64
	for i, t := range []time.Time{h.Since, h.Until} {
		n, err := unixNano(t)
		if err != nil {
			return nil, fmt.Errorf("encode renewal horizon: %w", err)
		}
		ns[i] = n
	}
	b := strconv.AppendInt(nil, ns[0], 10)
	b = append(b, ' ')
	return strconv.AppendInt(b, ns[1], 10), nil
}

// UnmarshalBinary decodes what MarshalBinary wrote, strictly (anything
// else is ErrCorruptEntry). Times come back in UTC.
func (h *Horizon) UnmarshalBinary(b []byte) error {
	a, c, ok := strings.Cut(string(b), " ")
	since, err1 := strconv.ParseInt(a, 10, 64)
	until, err2 := strconv.ParseInt(c, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return fmt.Errorf("decode renewal horizon %q: %w", b, ErrCorruptEntry)
	}
	*h = Horizon{Since: time.Unix(0, since).UTC(), Until: time.Unix(0, until).UTC()}
	return nil
}

// RenewUnpersisted decides whether the leader acknowledges node's renewal
// of session id, decided at t, although its write did not land (failed,
// or still hanging): only while h, the horizon of its last landed commit,
// allows t, and only as RenewSession would at t on m, the map as the
// database holds it with every renewal acknowledged so far from memory
// put back (Unpersisted.Reapply) — never a lapsed or replaced session
// (rules 2 and 3). Opens, claims, releases and grants are never
// acknowledged without a durable write. On ok, m holds the renewed
// session, to be added to the Unpersisted and persisted by the next
// commit.
//
//	h allows t   session at t on m           → ack
//	no           any                         → no
//	yes          none, or ID ≠ id            → no
//	yes          ID = id, Expires ≤ t        → no (lapsed)
//	yes          ID = id, Expires > t        → yes, Expires ≥ t+TTL
func (m *Map) RenewUnpersisted(node string, id uint64, t time.Time, h Horizon) (NodeSession, bool) {
	if !h.Allows(t) {
		return NodeSession{}, false
	}
	return m.RenewSession(node, id, t)
}

// Unpersisted holds the session renewals the leader acknowledged without
// a durable write, node → its session as the latest of them left it. The
// leader puts them back into its map whenever it reloads it from the
// database after a failed write (so no claim, force-grant or move takes
// an entry bound to such a session before its acknowledged expiry), and
// every commit persists them; what a commit persisted leaves.
type Unpersisted map[string]NodeSession

// Add records s, node's session after a renewal acknowledged from memory.
func (u Unpersisted) Add(node string, s NodeSession) {
	if cur, ok := u[node]; ok && cur.ID == s.ID && cur.Expires.After(s.Expires) {
		return // a later one, already here
	}
	u[node] = s
}

// Reapply puts the renewals back into m, just reloaded from the database:
// a session still current there (same ID) keeps the later expiry of the
// two. One the database shows replaced (a newer open landed) is dropped:
// its node was told the new ID and no longer serves under the old one.
func (u Unpersisted) Reapply(m *Map) {
	for node, s := range u {
		cur, ok := m.Session(node)
		switch {
		case !ok || cur.ID != s.ID:
			delete(u, node)
			continue
		case cur.Expires.After(s.Expires):
			s.Expires = cur.Expires
		}
		if cur.Renewed.After(s.Renewed) {
			s.Renewed = cur.Renewed
		}
		m.sessions[node] = s
	}
}

// Persisted drops what a landed commit wrote: written is node → the
// session record the commit held (a newer session replaces the old one
// durably). A renewal acknowledged after the commit was composed (a later
// expiry) stays.
func (u Unpersisted) Persisted(written map[string]NodeSession) {
	for node, s := range u {
		if w, ok := written[node]; ok && (w.ID > s.ID || w.ID == s.ID && !w.Expires.Before(s.Expires)) {
			delete(u, node)
		}
	}
}
