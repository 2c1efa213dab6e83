// Package transport groups rgit's front ends: pkt-line and the git protocol
// state machines (transport/pktline, transport/gitproto), smart HTTP
// (transport/httpgit), SSH (transport/sshgit) and the peer ports. Front ends
// route sessions to repo actors and may import actors/, cluster/ and
// storage/; nothing below them imports transport.
package transport
