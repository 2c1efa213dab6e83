// Package auth holds rgit's credentials and its access rules (DESIGN.md §3,
// §6): API tokens and SSH public keys stored in the object store under
// auth/token/… and auth/key/…, name validation for owners and repositories,
// and Decide, the pure function that turns (caller, repository, access) into
// allow / 401 / 403 / 404.
//
// It imports storage/objstore, golang.org/x/crypto/ssh and the standard
// library only; front ends (transport/…) import it, never the reverse.
package auth
