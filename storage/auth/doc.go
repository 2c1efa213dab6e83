// Package auth holds rgit's credentials and its access rules (DESIGN.md §3,
// §6): API tokens (scoped, optionally limited to repositories, expiring)
// and SSH keys (a user's, or a repository's deploy keys) stored in the
// object store under auth/token/… and auth/key/…, which authenticate to an
// Identity; name validation for owners; and the pure decisions: Decide
// turns (identity, repository metadata with its collaborators, access) into
// allow / 401 / 403 / 404 for every front end, and CheckUpdate applies
// protected ref patterns to one push command.
//
// It imports storage/objstore, storage/names, storage/ttlcache,
// golang.org/x/crypto/ssh and the standard library only; front ends (transport/…) import it, never the reverse.
package auth
