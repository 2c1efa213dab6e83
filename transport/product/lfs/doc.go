// Package lfs is rgit's Git LFS server: the batch API
// ({owner}/{name}.git/info/lfs/objects/batch, the basic transfer, sha256),
// the locks API, the SSH commands git-lfs-authenticate and
// git-lfs-transfer (the pure SSH protocol git-lfs 3 tries first), and the
// content of pointer files for the read API.
//
// The one idea: the node decides, the store moves the bytes. Access is the
// git decision (gitserve.Gate over auth.Decide: download needs read,
// upload write), taken on the repository's owner like a git request (the
// batch and lock endpoints are forwarded there). On a store that can sign
// requests (objstore.Presigner: S3) every action is a presigned URL of
// the store itself, an upload bound to its size and SHA-256, and verify
// confirms both from what the store recorded. On the file and memory
// stores the node serves the same actions under short-lived signed paths
// that any node can answer, streaming with bounded memory and checking
// size and SHA-256 before the object appears (objects.go). Objects live
// under the repository's own prefix (storage/repo.LFSKey); locks in its
// database, written by its repo actor.
//
// Tickets (ticket.go) are what a node hands out instead of credentials:
// HMAC-signed with a key derived from the peer secret, so every node
// accepts every node's, and each names one repository, one operation
// and an expiry.
//
// It imports storage/auth, storage/objstore, storage/repo, storage/names,
// transport/service/gitserve, transport/wire/gitproto (limit errors), transport/wire/pktline,
// transport/wire/clientlimit (the per-address cap of callers without
// credentials), transport/frontend/httpgit (Retry-After),
// transport/frontend/sshgit (the command interface it implements),
// transport/frontend/httpmetrics (the status of an answer), zap, Prometheus
// and the standard library; transport/product/api imports it for pointers, and
// transport/node wires it.
package lfs
