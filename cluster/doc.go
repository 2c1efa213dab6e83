// Package cluster holds the pure decisions of rgit's cluster: ownership map
// entries, lease grants, renewals, releases and force-grants, routing and
// placement. Functions take explicit state, message and time and return a
// decision; they do no I/O and read no clock, so the testkit drives them
// deterministically. It may import storage/ types only.
package cluster
