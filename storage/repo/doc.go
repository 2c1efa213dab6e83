// Package repo is one git repository as rgit stores it (DESIGN.md §3–4):
// its fenced database under "repo/{owner}/{name}" (refs, HEAD, visibility,
// pack list) and its immutable packs under
// "objects/{owner}/{name}/pack/", its Git LFS objects under
// "objects/{owner}/{name}/lfs/" (lfs.go) and its Git LFS locks in its
// database (lfslocks.go). It implements create/open/delete/fork,
// consistent read snapshots backed by the local pack cache, staging a
// pushed pack and committing ref updates with compare-and-set, repack and
// garbage collection, reachability bitmaps for whole-repository packs
// (bitmap.go), and the set of objects the refs reach, shared per ref state
// (reach.go: what the read API may show).
//
// A *Repo is the writer handle: opening one fences every earlier writer of
// the same repository, so a node opens it only while it owns the repo (the
// repo actor serializes writes). Long work is split so that only the
// database part needs the writer: a repack is built from a Snapshot
// (BuildRepack) and switched by the writer (CommitRepack); a GC is planned
// by the writer (PlanGC) and its store objects deleted by anyone (Collect).
// The repository's webhooks and their outbox (storage/outbox) are in the
// same database: a change's events are committed in its own transaction
// (hooks.go).
// It may import storage/refdb,
// storage/objstore, storage/pack, storage/packcache, storage/bitmap,
// storage/walk, storage/object, storage/outbox, zap
// and the standard library.
package repo
