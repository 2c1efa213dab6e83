// Package frontend is the room of the listeners: httpgit (smart HTTP),
// sshgit (SSH) and peer (the node-to-node ports: forwarded sessions, the
// leader's messages, the envelope of typed actor messages), and
// httpmetrics (requests by route and status class, for every HTTP
// surface). Each listener turns a connection into a session for the
// service's gate. Packages here import transport/service and
// transport/wire.
package frontend
