// Package walk computes reachability over a repository's object graph: the
// object set a fetch must send (with negotiation haves, shallow/deepen
// boundaries and partial-clone filters), git's ok_to_give_up test used in
// negotiation, "is this want reachable from our refs", and the connectivity
// check a push must pass before its refs are updated.
//
// Semantics follow git's upload-pack, rev-list and pack-objects closely
// (including where they are deliberately approximate, such as the clock-skew
// slop of the limited commit walk) so that real git clients accept the
// results and tests can compare against `git rev-list`.
//
// Objects are read through object.Reader; a Graph caches parsed commits per
// repository. The package imports only the standard library and
// storage/object.
package walk
