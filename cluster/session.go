package cluster

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/rgit/rgit/storage/format"
)

// SessionPrefix is the refdb key prefix of node sessions: "sess/{node}".
// It lies outside KeyPrefix, so scans of entries never see it.
const SessionPrefix = "sess/"

// NodeSession is a node's lease on all its entries at once (etcd's lease
// model): an entry bound to a session (Entry.Session) is live exactly
// while that session is the node's current one and has not expired, so
// one renewal of the session renews every entry bound to it. A node opens
// a new session each time it starts; opening ends the previous one, and
// with it every entry the previous incarnation held.
type NodeSession struct {
	// ID numbers the node's sessions: every open takes the previous ID+1,
	// so a renewal naming an older incarnation is recognised and declined.
	ID uint64
	// Expires is when the session lapses unless renewed.
	Expires time.Time
	// Renewed is when the leader last opened or renewed it. It is not a
	// write of the bound entries: their Written stays the grant's or the
	// release's (force-grant quiet period, Moved's "written anew").
	Renewed time.Time
	// Started is when the session was opened: the entries of the session
	// it replaced lapsed then.
	Started time.Time
}

// SessionKey returns the refdb key of node's session record.
func SessionKey(node string) (string, error) {
	if err := validNode(node); err != nil {
		return "", err
	}
	return SessionPrefix + node, nil
}

// NodeOfSessionKey is the inverse of SessionKey.
func NodeOfSessionKey(key string) (string, error) {
	node, ok := strings.CutPrefix(key, SessionPrefix)
	if !ok {
		return "", fmt.Errorf("key %q lacks prefix %q: %w", key, SessionPrefix, ErrInvalidName)
	}
	if err := validNode(node); err != nil {
		return "", fmt.Errorf("key %q: %w", key, err)
	}
	return node, nil
}

// MarshalBinary encodes the session: version byte, ID (uvarint), expires,
// renewed and started (Unix nanoseconds, varint).
func (s NodeSession) MarshalBinary() ([]byte, error) {
	if s.ID == 0 {
		return nil, fmt.Errorf("encode session: ID 0 is never opened: %w", ErrCorruptEntry)
	}
	b := make([]byte, 0, 1+4*binary.MaxVarintLen64)
	b = append(b, byte(format.OwnershipSession.Write))
	b = binary.AppendUvarint(b, s.ID)
	for _, t := range []time.Time{s.Expires, s.Renewed, s.Started} {
		ns, err := unixNano(t)
		if err != nil {
			return nil, fmt.Errorf("encode session %d: %w", s.ID, err)
		}
		b = binary.AppendVarint(b, ns)
	}
	return b, nil
}

// UnmarshalBinary decodes what MarshalBinary wrote, strictly (anything
// else is ErrCorruptEntry). Times come back in UTC.
func (s *NodeSession) UnmarshalBinary(b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("decode session: empty: %w", ErrCorruptEntry)
	}
	if err := format.OwnershipSession.Check(uint32(b[0])); err != nil {
		return fmt.Errorf("decode session: %w", err)
	}
	b = b[1:]
	id, n := binary.Uvarint(b)
	if n <= 0 || id == 0 {
		return fmt.Errorf("decode session: bad ID: %w", ErrCorruptEntry)
	}
	b = b[n:]
	var ts [3]time.Time
	for i := range ts {
		ns, n := binary.Varint(b)
		if n <= 0 {
			return fmt.Errorf("decode session %d: bad time: %w", id, ErrCorruptEntry)
		}
		ts[i], b = time.Unix(0, ns).UTC(), b[n:]
	}
	if len(b) != 0 {
		return fmt.Errorf("decode session %d: trailing bytes: %w", id, ErrCorruptEntry)
	}
	*s = NodeSession{ID: id, Expires: ts[0], Renewed: ts[1], Started: ts[2]}
	return nil
}

// Bind returns e as its session makes it: s is the record of e.Node's
// session (ok false: none). An entry without a session (Session 0, a
// per-repository lease) is returned unchanged. A bound entry expires with
// its session, or at its drain end (Until) if sooner; an entry of a
// session the node has since replaced lapsed when the new one started
// (when it was written, if the node has no record at all).
//
//	entry.Session   s                       Expires
//	0               any                     entry's own
//	= s.ID          the current session     min(s.Expires, Until)
//	≠ s.ID          replaced                s.Started
//	≠ 0             none                    entry's Written
func Bind(e Entry, s NodeSession, ok bool) Entry {
	switch {
	case e.Session == 0:
		return e
	case ok && s.ID == e.Session:
		e.Expires = s.Expires
		if !e.Until.IsZero() && e.Until.Before(e.Expires) {
			e.Expires = e.Until
		}
	case ok:
		e.Expires = s.Started
	default:
		e.Expires = e.Written
	}
	return e
}

// Lost reports whether a node holding repo under epoch (its grant) must
// give it up, judging from its view's entry e (ok false: no entry): the
// map granted it again since, to another node or to another session of
// this one. An entry older than the holder's grant is a view that has not
// caught up yet, never a loss; the holder's own epoch is its own.
func Lost(e Entry, ok bool, self string, session, epoch uint64) bool {
	return ok && e.Epoch > epoch && (e.Node != self || e.Session != session)
}

// Heartbeat is the leader's decision on a RenewLeases.
type Heartbeat struct {
	Reply LeasesRenewed
	// WriteSession: the node's session (Map.Session) changed and must be
	// persisted (key SessionKey) in the same write as Reply.Renewed's
	// entries (Map.Get), before the reply is sent.
	WriteSession bool
}

// Heartbeat applies r at now: it opens or renews r.Node's session, then
// renews r.Repos (Renew). A declined session declines every repo listed.
func (m *Map) Heartbeat(r RenewLeases, now time.Time) (Heartbeat, error) {
	var h Heartbeat
	switch {
	case r.Open:
		s, err := m.OpenSession(r.Node, now)
		if err != nil {
			return Heartbeat{}, err
		}
		h.Reply.Session, h.WriteSession = s.ID, true
	case r.Session != 0:
		s, ok := m.RenewSession(r.Node, r.Session, now)
		if !ok {
			h.Reply.SessionDeclined, h.Reply.Session, h.Reply.Declined = true, s.ID, r.Repos
			return h, nil
		}
		h.Reply.Session, h.WriteSession = s.ID, true
	}
	h.Reply.Renewed, h.Reply.Declined = m.Renew(r.Node, r.Repos, now)
	return h, nil
}

// ServeLease is a node's own bound on serving its repositories: the last
// renewal (or open) of its session Session that the leader acknowledged,
// and when the node sent it. A node serves a repository (reads and
// writes) only while it holds it under its current session and its
// ServeLease has not ended (Serves), measured by its own clock from
// Sent, before which the leader cannot have renewed the session; the
// leader renews a session only while it is live and takes a repository
// bound to it from its node only once it has lapsed (ForceAt, Claim), a
// TTL after the last renewal by the leader's clock. ServeMargin of the
// TTL is kept back, so that a node's clock running slower than the
// leader's by up to that fraction still ends the lease first: whatever
// the network delays, no node serves a repository after another may
// have been granted it. The cost: a node that cannot renew for
// TTL-ServeMargin stops serving until the leader answers again.
type ServeLease struct {
	Session uint64
	Sent    time.Time
}

// ServeMargin is the part of the TTL a ServeLease keeps back for clock
// rates: the node's and the leader's clocks may advance at rates
// differing by up to a tenth (real clocks differ by parts per million;
// a step of the wall clock is not a rate, and the node measures with
// Go's monotonic clock).
func ServeMargin(ttl time.Duration) time.Duration { return ttl / 10 }

// Until is when the lease ends.
func (l ServeLease) Until(ttl time.Duration) time.Time {
	return l.Sent.Add(ttl - ServeMargin(ttl))
}

// Serves reports whether the node may serve at now a repository it holds
// under session (the entry's Session when it was granted or extended).
// A per-repository lease (session 0) is never served: the node claims it
// first, which binds it.
//
//	session             now            → serves
//	0                   any            → no
//	≠ l.Session         any            → no (another incarnation's grant)
//	= l.Session         < Until        → yes
//	= l.Session         ≥ Until        → no
func (l ServeLease) Serves(session uint64, now time.Time, ttl time.Duration) bool {
	return session != 0 && session == l.Session && now.Before(l.Until(ttl))
}

// Acked returns the lease after the leader acknowledged a renewal or open
// of session that the node sent at sent. Acknowledgements may arrive out
// of order: an older session's, or an earlier-sent one's, changes
// nothing.
func (l ServeLease) Acked(session uint64, sent time.Time) ServeLease {
	switch {
	case session < l.Session, session == l.Session && !sent.After(l.Sent):
		return l
	}
	return ServeLease{Session: session, Sent: sent}
}
