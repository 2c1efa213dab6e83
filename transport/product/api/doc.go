// Package api is rgit's read API: JSON over HTTP under
// /api/{owner}/{name}/… (refs, tree, blob, raw, log, commit, compare,
// commits, tag, ahead-behind, search, archive, blame, lastcommit;
// docs/read-api.md has the reference) and its optional Redis cache.
//
// The one idea: only refs takes names; every other endpoint takes an
// object id, so its answer can never change and may be cached forever by
// anyone. ParseRequest parses a path once, and that one Request drives
// the access decision, the cache key (CacheSuffix) and the upstream
// request (Path).
//
// Pieces:
//   - Handler: the front. Parse, authenticate (a bad token is 401 before
//     anything else is asked), answer from the Cache, else ask the Origin
//     and store what may be shared: whole answers of repositories that
//     Visibility (the name index) calls public now.
//   - Local: the Origin on a git node. Access is transport/service/gitserve's Gate
//     (the same decision as a clone); only ids the refs reach are answered
//     (the snapshot's shared reachable set), as a fetch would; the answers
//     read the session's packs (read.go, diff.go, archive.go), forwarding
//     to the owner in a cluster.
//   - Upstream: the Origin of `rgit api-serve`, asking the fleet's peer
//     HTTP service with the peer secret.
//   - Cache: answers under v1:{gen}:{owner}/{name}:{suffix} with per-
//     repository generation counters (see Cache for the eviction rule).
//
// go-git supplies rename detection, line diffs and the unified patch
// encoder over rgit's packs through a read-only storer (gogit.go); tree
// listing, path walks, logs, the tree diff walk, merge bases, archives
// and blame (with a line matcher that pairs lines as git's xdiff does,
// blamediff.go) are this package's own code.
//
// Every answer works within a budget (budget.go): Limits bound the tree
// entries it visits, the files and bytes of a diff, the time of its line
// diffs, rename detection, the commits a path-filtered log examines and
// an archive's size, the commits, time and file size of a blame, the
// commits and time of a directory's last-commit walk (lastcommit.go);
// each walk checks the request's context as it visits. Over a limit an
// answer is refused (422, the message naming the limit and its RGIT_*
// setting) or, for diffs, blames, last commits and logs, cut short where
// the client can see it. Archives are sized by distinct tree before their
// first byte. A search page (search.go) stops where its bytes, files,
// blobs, entries or time run out, saying where, and the next page goes on
// from there; its regexps are RE2, rewritten never to span a line. The expensive answers are admitted against the node's
// memory budget and a concurrency limit (transport/service/admission.Reads).
//
// Metrics (metrics.go) count requests by endpoint and status class, and
// the cache's hits and misses; no label names a repository.
//
// Requests without credentials share the per-address cap of git's
// (LimitUnauthenticated, on the public port only).
//
// It imports transport/frontend/httpmetrics, transport/service/gitserve, transport/wire/gitproto, transport/wire/clientlimit, transport/frontend/peer (the
// peer headers), transport/service/admission, transport/frontend/httpgit (Retry-After),
// transport/product/lfs (pointers: a blob answer says it is one, raw serves the
// file it stands for), storage/, go-git, go-redis, Prometheus and zap.
package api
