// Package testkit holds test infrastructure shared by every package's tests:
// the fault-injecting object store, a local S3 server harness, and (later)
// the in-process cluster. It may import anything; nothing imports testkit
// outside _test.go files and test commands.
package testkit
