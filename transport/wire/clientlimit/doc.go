// Package clientlimit bounds what one client can make a node hold while
// the node waits for it: a minimum transfer rate for the bytes it sends
// and reads (Rate, Budget, Reader, Writer), a deadline for a whole request
// on top of it (Reader.SetReadDeadline, which the protocol layer sets),
// and a cap on the concurrent unauthenticated connections and requests of
// one client address (PerAddr).
//
// The rate rule is a pure function of (budget, start, end, bytes), Budget;
// Reader and Writer apply it through the deadline of whatever carries the
// bytes (a net.Conn, an http.ResponseController, a net.Pipe in front of an
// SSH channel). Only time spent waiting on the client counts: a stream the
// server is not reading or writing keeps its budget.
//
// It imports only the standard library.
package clientlimit
