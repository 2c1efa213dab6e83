// Package actors is rgit's actor system (protoactor-go): the node
// supervisor, one repo actor per open repository, and the leader actor that
// writes the ownership map. Actors are thin shells doing I/O around the pure
// decisions in cluster/, lifecycle.go and the storage layer; byte streams
// never pass through a mailbox. It may import cluster/ and storage/.
//
// One node's actors:
//
//	root
//	├── repos (supervisor)            children, warm pool, the node's session
//	│   │                             heartbeat to the leader
//	│   ├── alice/web (repoActor)     database handle, sessions, idle timer,
//	│   │                             lease: holder, epoch, drain timer
//	│   ├── bob/tools (repoActor)
//	│   └── … lingering actors: lease ended, sessions finishing
//	├── sessions (transportSupervisor) watches every live git session
//	├── sessionActor …                one per HTTP request, SSH channel,
//	│                                 forwarded session or read-API request
//	└── leader (leaderActor)          the ownership map's writer; leader node only
//
// Messages, one Go type per operation with a typed reply (messages.go,
// access.go, hooks.go, lfslocks.go, sessions.go, leader.go). Each mailbox
// is sealed: a request embeds toRepo[R], toSupervisor[R] or
// toTransport[R] (the leader's are the type set leaderMessage), so the
// compiler refuses a message sent to the wrong actor and the ask
// functions (askRepo, askSupervisor, askTransport, askRepoActor,
// askLeader) return the reply as its type. Receive's
// ctx.Message() is protoactor's untyped boundary, one type switch per
// actor, and await the one place a request crosses its future.
//
//   - to a repo actor: acquire → acquired (a session's snapshot), release;
//     updateRefs → refsUpdated; setVisibility, setHead → written;
//     grantAccess, revokeAccess, protectRef, unprotectRef, readSettings →
//     accessChanged; createLock, deleteLock, listLocks → locksAnswered
//     (Git LFS locks); commitRepack → repackCommitted; planGC → gcPlanned;
//     closeRepo → written; webhooks (hooks.go): readOutbox → outboxRead,
//     finishDeliveries, addHook → written, removeHook → hookRemoved,
//     redeliver → redelivered; evictIfIdle; lease: regranted, startRelease,
//     renewAnswer, drainTick; its own idleTick. A request that cannot run
//     is answered failed (with the error) or errRetry (the actor closes).
//   - to the supervisor: deliver[R] (a repo actor's request, passed on
//     to it, answered R by the repo actor) | notHeld; granted → leaseInfo
//     (the supervisor publishes its children's leases, which routing
//     reads without a message); leaseChanged, idle (from children);
//     listOpen, listDraining → openKeys; drainAll → drainWait; renewTick,
//     renewNow, probeLeader, renewResult.
//   - to the transport supervisor: sessionBegun (BeginSession spawned a
//     session actor, which lives until the git session ends; the
//     supervisor watches it), awaitSessions → sessionsIdle (the drain).
//   - to the leader actor: cluster.ClaimLease, cluster.ReleaseLease,
//     cluster.ForceGrantLease (→ Decision), cluster.RenewLeases (→
//     LeasesRenewed) — the same values other nodes send in a peer envelope
//     (transport/frontend/peer) — and the leader node's own leaderHandOver and
//     leaderPrune; each answered with a leaderReply.
//
// Admin messages (transport/product/admin/messages.go) are the operator's: one Go
// type per command (admin.CreateRepo, DeleteRepo, Fork, Repack, GC,
// SetVisibility, SetHead, PurgeCache, Grant, Revoke, ListAccess, Protect,
// Unprotect, AddToken, ListTokens, RevokeToken, AddKey, AddDeployKey,
// ListKeys, RemoveKey, ListRepos, ShowStatus, WhereIs, Version), each
// with its typed reply (admin.Done, Message, AccessList, TokenList,
// KeyList, Repos, Status, Where). rgit-admin builds them; they travel in
// the peer envelope (transport/frontend/peer), authenticated by the peer secret,
// with the hop limit, and stream progress lines before the reply. The
// node that receives one about a repository owned elsewhere passes the
// admin message itself to the owner, not the repo actor's message it
// becomes there: an admin command is more than one repo-actor message
// (delete-repo closes the actor, deletes the store's keys, removes deploy
// keys and purges the read-API cache; fork takes a session for its
// snapshot; --as checks the caller against the settings the actor holds,
// then writes), and that composite, its audit line and its cache purge
// must run on the owner, next to the actor, as one unit the relaying node
// cannot half-finish. The repo actor's messages stay unexported, in
// process, and carry what only the owner has (a *repo.Repo, progress
// callbacks); exporting them would add a second wire vocabulary for the
// same operations.
//
// Files, one job each:
//
//	node.go        Node: starts the system; RepoSession and the repo writes
//	supervisor.go  the supervisor
//	repoactor.go   the repo actor, carrying out lifecycle.go's decisions
//	               and every cluster.Step action of its lease
//	lifecycle.go   pure decisions: idle, eviction, sessions, lease end
//	cluster.go     cluster mode: configuration, the map follower, the view
//	route.go       Route: serve, forward or claim
//	failover.go    Moved, ConnectFailed and force-grants
//	drain.go       Drain, and the leader's hand-over
//	sessions.go    the transport supervisor and session actors
//	leader.go      the leader actor; leaderbatch.go its group commit
//	               (cluster.WriteQueue); prune.go its pruning pass
//	maintainer.go  background roll-ups and scheduled passes;
//	maintenance.go repack and gc through the actor; gc.go automatic gc
//	access.go      collaborators and protected refs through the actor
//	hooks.go       webhooks: the outbox through the actor, and the
//	               delivery worker (Config.Hooks) an open repository runs
//	lfslocks.go    Git LFS locks through the actor
package actors
