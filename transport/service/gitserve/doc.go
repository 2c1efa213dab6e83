// Package gitserve is what the smart HTTP (transport/frontend/httpgit) and SSH
// (transport/frontend/sshgit) front ends share: repository path parsing, the access
// decision, opening a session through the Resolver, running the git
// Protocol, classifying the outcome for the client, and request metrics.
//
// It imports actors (for actors.Route, the one routing answer), storage/auth,
// transport/wire/gitproto, zap and the Prometheus client.
// The Resolver is implemented by the actor layer and handed in by cmd/.
package gitserve
