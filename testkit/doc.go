// Package testkit holds test infrastructure shared by every package's tests:
// the fault-injecting object store, a local S3 server harness, the
// in-process cluster, and the small leaf helpers every test may import
// without an import cycle (gitrun: the hermetic git runner; freeport;
// syncbuf; scale; need). It may import anything; nothing imports testkit outside
// _test.go files and test commands.
package testkit
