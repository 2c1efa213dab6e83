// Package web is rgit's browse page: server-rendered HTML (html/template)
// over the read API and nothing else. Every page is built from the JSON
// the API answers to the signed-in caller, so the page can never show
// what the API would refuse, and it runs wherever the API handler is
// reachable: in process on a single node (rgit serve), or in front of an
// API tier (Upstream).
//
// URLs name what they show as forges do, /{owner}/{name}/tree/{ref}/{path}
// with {ref} a branch (which may hold "/"), tag or id (refs.go: one pure
// resolver over the refs answer every view reads anyway; views that take
// a ref and a path start with Handler.beginAt). The branches and tags
// pages read one page's worth of commits (refpages.go).
//
// Repository content is hostile input. Templates escape everything;
// highlighting (chroma) and markdown (goldmark, raw HTML dropped, links
// kept inside the repository or on http(s)/mailto, see resolveLink)
// produce escaped markup with classes, never inline styles or scripts;
// line anchors, colour schemes and phone widths are CSS alone; every page
// carries a Content-Security-Policy that allows no script at all and no
// resource from another origin, and raw file bytes are served sandboxed.
// The page works without JavaScript (progressive enhancement, no build).
//
// Sign-in stores the caller's token in a cookie (HttpOnly,
// SameSite=Strict, Secure under TLS or when the page's configured public
// URL is https: behind a TLS proxy no request header is trusted to say
// so); the page presents it to the API as a Bearer token. Clone URLs are
// the configured public git URLs, else the address the browser used when
// the same server answers git there. Elsewhere is what a cluster node's
// public port answers browsers: the page is api-serve's.
//
// Its metrics count requests by view (metrics.go: the route the mux
// matched, never a repository's name).
//
// It imports storage/auth, storage/names, storage/repo (the repository
// list endpoint), transport/frontend/httpmetrics, chroma, goldmark,
// Prometheus, zap and the standard library.
package web
