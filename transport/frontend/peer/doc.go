// Package peer is the node-to-node side of an rgit cluster: the peer ports
// and what travels over them.
//
//   - Directory: where a node's peer ports are (RGIT_PEER_SVC or the static
//     RGIT_PEERS map).
//   - Secret checks: both peer ports refuse anything without
//     RGIT_PEER_SECRET (compared in constant time) with 401.
//   - Typed messages (envelope.go): one envelope on the peer stream port
//     carries a Go value both nodes know, with a hop limit, and brings back
//     its handler's typed reply (streamed after progress lines for
//     HandleStream handlers; a classified failure as a *CodedError). The
//     leader's messages (cluster.ClaimLease, RenewLeases, ReleaseLease,
//     ForceGrantLease) travel this way, the same values the leader actor
//     receives in process; LeaderClient sends them. So do the admin
//     messages (transport/product/admin: rgit-admin to a node, a node to the
//     repository's owner).
//   - HTTPForwarder / PeerHTTP: smart-HTTP requests reverse-proxied, fully
//     streaming, to the owner's peer HTTP port, with a hop limit.
//   - SessionForwarder / SessionHandler: one git session (SSH sessions are
//     forwarded this way) carried over an authenticated HTTP Upgrade on the
//     peer stream port, with backpressure and fixed buffers.
//   - Moved answers: an owner that drained answers a forwarded request for
//     a repository it released with gitserve's moved signal before reading
//     anything; both forwarders report gitserve.ErrMoved for requests they
//     can send again and delegate Moved to the node (a gitserve.Mover).
//
// It imports cluster/, transport/service/gitserve, storage/auth, zap and the
// standard library, and actors only for actors.Route; actors are reached
// through the small interfaces here.
package peer
