package actors

import (
	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
)

// heartbeatCheck is what the supervisor checks its children's leases
// against when a heartbeat is answered (supervisor.renewed).
type heartbeatCheck struct {
	self string
	// session is the session the heartbeat renewed (0: it opened one).
	session uint64
	reply   cluster.LeasesRenewed
	// listed are the repositories the heartbeat listed (its children's
	// per-repository leases), with the epoch each had when it was sent.
	listed map[names.Repo]uint64
	// changed are the repositories whose entry in view changed since the
	// last check, or that were granted to a child since; all: every
	// child is checked (the session changed since the last check).
	changed []names.Repo
	all     bool
	view    cluster.View
}

// toldLease is a child to tell that its lease under epoch is lost.
type toldLease struct {
	key   names.Repo
	epoch uint64
}

// heartbeatLosses lists the children whose lease the answered heartbeat
// shows lost, and records on each child it looks up whether its entry is
// a per-repository lease (unbound: the next heartbeat lists it). It looks
// up only the entries that changed since the last check (c.changed),
// not every repository held, which at thousands held per node was a
// view walk each per heartbeat:
//
//	answer                       child                         → told (epoch)
//	session declined             under that session            → yes (its own)
//	repository declined          listed                        → yes (as listed)
//	entry changed, or all        renewing, cluster.Lost        → yes (its own)
//	otherwise                    any                           → no, not looked up
//
// A lease lost while unchanged in the view cannot happen: only a new
// entry (a grant to another node or session) loses it, and a grant to
// the child is checked once after it (changed), in case the view had
// the newer entry already.
func heartbeatLosses(children map[names.Repo]*child, c heartbeatCheck) []toldLease {
	var out []toldLease
	if c.reply.SessionDeclined {
		for _, k := range sortedKeys(children) {
			if ch := children[k]; ch.session == c.session {
				out = append(out, toldLease{k, ch.epoch})
			}
		}
		return out
	}
	told := make(map[names.Repo]bool, len(c.reply.Declined))
	for _, k := range c.reply.Declined {
		if epoch, ok := c.listed[k]; ok && children[k] != nil {
			out = append(out, toldLease{k, epoch})
			told[k] = true
		}
	}
	check := func(k names.Repo, ch *child) {
		e, ok := c.view.Get(k)
		if ok {
			ch.unbound = e.Session == 0
		}
		if ch.renews && !told[k] && cluster.Lost(e, ok, c.self, c.reply.Session, ch.epoch) {
			out = append(out, toldLease{k, ch.epoch})
			told[k] = true
		}
	}
	if c.all {
		for _, k := range sortedKeys(children) {
			check(k, children[k])
		}
		return out
	}
	for _, k := range c.changed {
		if ch, ok := children[k]; ok {
			check(k, ch)
		}
	}
	return out
}
