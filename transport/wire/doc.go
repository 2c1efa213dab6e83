// Package wire is the room of git's and rgit's protocols as bytes and
// rules, with no I/O policy of their own: pktline (framing), gitproto
// (upload-pack and receive-pack state machines over small backend
// interfaces), peertls (the peer ports' mutual TLS), reqid (request ids
// across nodes) and clientlimit (what one client may hold). Packages here
// import nothing else under transport/.
package wire
