package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/repo"
)

// Messages between the node, its supervisor and repo actors. They stay in
// process for now; pack bytes never travel in them, only handles.
//
// Each mailbox has a sealed marker: a request implements its actor's
// marker and names its reply type by embedding toRepo[R],
// toSupervisor[R] or toTransport[R], so the compiler
// refuses a message sent to the wrong actor and call reads the answer as
// R. Receive's ctx.Message() is protoactor's untyped boundary: one type
// switch per actor.

// repoMessage is a message a repo actor handles.
type repoMessage interface{ repoMessage() }

// repoReply is a repo actor's answer to a request.
type repoReply interface{ repoReply() }

func (*acquired) repoReply()        {}
func (*refsUpdated) repoReply()     {}
func (*written) repoReply()         {}
func (*repackCommitted) repoReply() {}
func (*gcPlanned) repoReply()       {}
func (*accessChanged) repoReply()   {}
func (*locksAnswered) repoReply()   {}
func (*outboxRead) repoReply()      {}
func (*hookRemoved) repoReply()     {}
func (*redelivered) repoReply()     {}

// repoRequest is a repoMessage answered with R.
type repoRequest[R repoReply] interface {
	repoMessage
	answeredBy(R)
}

// toRepo, embedded in a message, makes it a repoRequest answered with R.
type toRepo[R repoReply] struct{}

func (toRepo[R]) repoMessage() {}
func (toRepo[R]) answeredBy(R) {}

// supervisorRequest is a request to the repos supervisor answered with R.
type supervisorRequest[R any] interface {
	supervisorMessage()
	answeredBy(R)
}

// toSupervisor makes a message a supervisorRequest answered with R.
type toSupervisor[R any] struct{}

func (toSupervisor[R]) supervisorMessage() {}
func (toSupervisor[R]) answeredBy(R)       {}

// transportRequest is a request to the transport supervisor answered
// with R.
type transportRequest[R any] interface {
	transportMessage()
	answeredBy(R)
}

// toTransport makes a message a transportRequest answered with R.
type toTransport[R any] struct{}

func (toTransport[R]) transportMessage() {}
func (toTransport[R]) answeredBy(R)      {}

// delivery is deliver[R] for any R: what the supervisor's type switch
// sees.
type delivery interface {
	target() names.Repo
	payload() repoMessage
}

// deliver asks the supervisor to hand msg to the repo actor of key
// (spawning it on a single node), which answers the original sender with
// R. A request passes through the supervisor so that it is ordered before
// the PoisonPill the supervisor sends a closing actor: it is answered
// (errRetry) rather than lost in a stopping mailbox.
type deliver[R repoReply] struct {
	toSupervisor[R]
	key names.Repo
	msg repoRequest[R]
}

func (d *deliver[R]) target() names.Repo   { return d.key }
func (d *deliver[R]) payload() repoMessage { return d.msg }

// notHeld answers deliver in cluster mode when this node holds no lease on
// the repository: route (and claim) again.
type notHeld struct{}

// idle tells the supervisor that a repo actor is closing; the supervisor
// forgets it so the next request spawns a fresh one, and then stops it
// (PoisonPill: after every request it handed it).
type idle struct {
	key names.Repo
	pid *actor.PID
	why closeWhy
}

// closeWhy says why a repo actor closed; in cluster mode it decides what
// happens to the lease.
type closeWhy uint8

const (
	whyIdle       closeWhy = iota // idle TTL or max warm (single node)
	whyFenced                     // a newer writer fenced the database
	whyOpenFailed                 // the database could not be opened
	whyClosed                     // CloseRepo (delete-repo): release the lease
	whyShutdown                   // Shutdown: keep the lease, like a crash
	whyLeaseEnded                 // drain over or renewal declined
	whyLingered                   // sessions over after the drain: release the entry again
)

var whyNames = [...]string{whyIdle: "idle", whyFenced: "fenced", whyOpenFailed: "open failed",
	whyClosed: "closed", whyShutdown: "shutdown", whyLeaseEnded: "lease ended", whyLingered: "sessions over after the drain"}

func (w closeWhy) String() string { return whyNames[w] }

// evictIfIdle asks a repo actor to close if no session is using it.
type evictIfIdle struct{}

// acquire opens a session: the actor hands back a read view and counts the
// session so the database is not closed under it.
type acquire struct{ toRepo[*acquired] }

// acquired answers acquire: the session's view, and the actor (and its
// lease's epoch, 0 on a single node) that the session's writes go to.
type acquired struct {
	snap  *repo.Snapshot
	info  auth.RepoInfo
	pid   *actor.PID
	epoch uint64
}

// release ends a session started by acquire.
type release struct{}

// errRetry answers a message that reached an actor already closing; the
// caller asks the supervisor again.
type errRetry struct{}

// failed answers any request to a repo actor that could not run it: the
// database did not open, or the session's snapshot could not be taken.
type failed struct{ err error }

// updateRefs applies a push's ref updates (repo.Repo.UpdateRefs), staged
// being its pack (nil for a ref-only push); *refsUpdated answers.
type updateRefs struct {
	toRepo[*refsUpdated]
	staged *repo.PackInfo
	cmds   []repo.RefUpdate
	atomic bool
	by     auth.Identity // the pusher
}

// refsUpdated answers updateRefs: errs has one entry per command (nil:
// applied), err a failure of the whole transaction.
type refsUpdated struct {
	errs []error
	err  error
}

// setVisibility makes the repository public or private; *written answers.
type setVisibility struct {
	toRepo[*written]
	public bool
	by     auth.Identity
}

// setHead points HEAD at a branch; *written answers.
type setHead struct {
	toRepo[*written]
	target string
}

// written answers a write that has no result but its error.
type written struct{ err error }

// commitRepack asks the repo actor to switch to a pack built outside it
// (repo.BuildRepack or repo.BuildRollUp, from a session's snapshot);
// *repackCommitted answers.
type commitRepack struct {
	toRepo[*repackCommitted]
	build *repo.RepackBuild
}

// repackCommitted answers commitRepack.
type repackCommitted struct {
	pack repo.PackInfo
	err  error
}

// planGC asks the repo actor for the database half of a garbage collection
// (repo.PlanGC); *gcPlanned answers. The store half runs outside the actor.
type planGC struct {
	toRepo[*gcPlanned]
	now    time.Time
	minAge time.Duration
}

// gcPlanned answers planGC.
type gcPlanned struct {
	plan repo.GCPlan
	err  error
}

// closeRepo closes the repository (delete-repo needs it closed) and stops the
// actor; *written answers once the database is closed. shutdown keeps the
// lease.
type closeRepo struct {
	toRepo[*written]
	shutdown bool
}

// Cluster-mode messages between the node, the supervisor and repo actors.
type (
	// leaseInfo is the lease a repo actor holds (clusterState.leases);
	// it answers granted.
	leaseInfo struct {
		held  bool // Serving or Draining: requests are served here
		epoch uint64
	}
	// granted records a lease the leader granted to this node, holder
	// being its state after the grant (cluster.Step from Claiming);
	// answered with *leaseInfo once the repo actor is spawned.
	granted struct {
		toSupervisor[*leaseInfo]
		key     names.Repo
		epoch   uint64
		session uint64 // the node session the entry is bound to (cluster.ServeLease)
		holder  cluster.Holder
		// release: claimed only to be let go through the drain (a move
		// of a repository never opened here; supervisor.releaseMoved).
		release bool
	}
	// regranted tells a repo actor the lease it holds was granted again
	// under epoch; revive is the new lease of a lingering actor.
	regranted struct {
		epoch   uint64
		session uint64
		revive  *cluster.Holder
	}
	// startRelease tells a repo actor to let its lease go through the
	// drain (the node drains).
	startRelease struct{}
	// drainTick is the end of a repo actor's drain.
	drainTick struct{}
	// leaseChanged tells the supervisor whether a repo actor's lease is
	// still in the renewal batch, and when it ended while sessions linger
	// (released): requests then route and claim anew.
	leaseChanged struct {
		key      names.Repo
		pid      *actor.PID
		renews   bool
		released bool
	}
	// renewTick starts the periodic batched renewal.
	renewTick struct{}
	// renewNow sends a batch at once, outside the period (a node that
	// stops joining announces itself to the leader).
	renewNow struct{}
	// probeLeader: requests are waiting out an unreachable leader
	// (clusterState.waiting): send a heartbeat if none went out within
	// LeaderRetry, and keep doing so every LeaderRetry while anyone
	// waits; its answer (clusterState.answered) tells them to ask again.
	// tick marks the supervisor's own timer.
	probeLeader struct{ tick bool }
	// renewResult is the leader's answer to one heartbeat; sent maps each
	// repo the node held when it left to its epoch, session is the session
	// the heartbeat renewed (0: it opened one).
	renewResult struct {
		listed  map[names.Repo]uint64 // the repositories listed, by epoch
		session uint64
		at      time.Time // when it was sent: the ServeLease it acknowledges starts there
		probe   bool      // sent as a probeLeader
		r       cluster.LeasesRenewed
		err     error
	}
	// renewAnswer tells a repo actor the renewal of its lease under
	// epoch was declined. A renewed lease gets no message: a heartbeat
	// then costs the supervisor no send per repository held.
	renewAnswer struct {
		epoch uint64
	}
	// drainAll releases every lease; *drainWait answers.
	drainAll  struct{ toSupervisor[*drainWait] }
	drainWait struct {
		done     <-chan struct{}
		released []names.Repo // the leases the drain releases
	}
)

// listOpen asks the supervisor for the keys of the open repositories.
type listOpen struct{ toSupervisor[*openKeys] }

// listDraining asks the supervisor for the repositories whose lease is
// being released through the drain (answered with openKeys).
type listDraining struct{ toSupervisor[*openKeys] }

// openKeys answers listOpen and listDraining.
type openKeys struct{ keys []names.Repo }
