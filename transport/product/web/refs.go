package web

import (
	"net/http"
	"strings"
)

// Names in URLs. A view's URL spells what it shows as
// /{owner}/{name}/{kind}/{ref}/{path}, where {ref} is a full object id, a
// branch or tag name (which may hold "/"), a full ref name or HEAD: the
// forms forges accept. The read API stays id-addressed; a name costs the
// refs read every repository view makes anyway.

// at is what a URL's {ref}/{path} names.
type at struct {
	// Ref is the ref the URL named; its Name is "" when it named an
	// object id.
	Ref Ref
	// Commit is the object the view reads: the ref's commit (a tag
	// peeled), or the id the URL gave.
	Commit string
	// Path is the rest of the URL, a path inside the commit's tree.
	Path string
}

// byName says whether the URL spelled a ref name rather than an id.
func (a at) byName() bool { return a.Ref.Name != "" }

// label is what the page calls the ref it shows: the name asked for, or
// the short id.
func (a at) label() string {
	if a.byName() {
		return a.Ref.Short()
	}
	return shortOID(a.Commit)
}

// refNames finds the refs of one refs answer by the names a URL may
// spell them with.
type refNames map[string]Ref

func newRefNames(refs []Ref) refNames {
	n := make(refNames, len(refs))
	for _, r := range refs {
		if r.Name == "HEAD" && r.OID == "" {
			continue // unborn: HEAD names nothing yet
		}
		n[r.Name] = r
	}
	return n
}

// lookup finds the ref one candidate name means, in git's order
// (gitrevisions: the name itself, refs/tags/, refs/heads/).
func (n refNames) lookup(name string) (Ref, bool) {
	if name == "HEAD" || strings.HasPrefix(name, "refs/") {
		if r, ok := n[name]; ok {
			return r, true
		}
	}
	for _, full := range []string{"refs/tags/" + name, "refs/heads/" + name} {
		if r, ok := n[full]; ok {
			return r, true
		}
	}
	return Ref{}, false
}

// resolve reads the {ref}/{path} segments of a URL. A full object id in
// the first segment is that id, as git reads 40 hex digits before any
// ref. Otherwise the longest run of leading segments that names a ref
// wins, as GitHub reads tree/feature/x/y/file when both feature and
// feature/x/y are branches; the segments after it are the path. ok is
// false when no leading run names a ref.
//
//	refs: feature, feature/x/y (branches), v1 (tag)
//	feature/x/y/a.go  -> feature/x/y, a.go
//	feature/x/z/a.go  -> feature, x/z/a.go
//	v1                -> v1, ""
//	refs/heads/feature/a.go -> feature, a.go
//	{40 hex}/a.go     -> that id, a.go
//	nope/a.go         -> not ok
func (n refNames) resolve(segs []string) (at, bool) {
	if len(segs) == 0 {
		return at{}, false
	}
	if isOID(segs[0]) {
		return at{Commit: segs[0], Path: strings.Join(segs[1:], "/")}, true
	}
	for i := len(segs); i > 0; i-- {
		if r, ok := n.lookup(strings.Join(segs[:i], "/")); ok {
			return at{Ref: r, Commit: r.Commit(), Path: strings.Join(segs[i:], "/")}, true
		}
	}
	return at{}, false
}

// spell is how a URL names ref r so that, followed by path, it reads
// back as r and path: its short name, else its full name, else ("" ok
// false) only its commit id will do (a longer ref shadows it there).
func (n refNames) spell(r Ref, path string) (string, bool) {
	for _, s := range []string{r.Short(), r.Name} {
		segs := strings.Split(s, "/")
		if path != "" {
			segs = append(segs, strings.Split(path, "/")...)
		}
		if got, ok := n.resolve(segs); ok && got.Ref.Name == r.Name && got.Path == path {
			return s, true
		}
	}
	return "", false
}

// splitAt splits the {at...} of a route into its segments.
func splitAt(s string) []string {
	s = strings.Trim(s, "/")
	if s == "" {
		return nil
	}
	return strings.Split(s, "/")
}

// beginAt starts a view whose route ends in {at...} ({ref}/{path}): it
// reads the refs (as begin) and resolves the name, answering 404 when
// nothing is called so. Views that take a ref and a path (tree, blob,
// commits, raw, blame) start here; the view then reads q.at.Commit and
// q.at.Path and builds its links with q.link, which keep the name.
func (h *Handler) beginAt(w http.ResponseWriter, r *http.Request) (*repoReq, bool) {
	q, ok := h.begin(w, r)
	if !ok {
		return nil, false
	}
	segs := splitAt(r.PathValue("at"))
	a, found := q.names.resolve(segs)
	if !found {
		name := "(none)"
		if len(segs) > 0 {
			name = segs[0]
		}
		h.fail(w, r, nil, http.StatusNotFound, "no branch, tag or commit named "+name)
		return nil, false
	}
	q.at = a
	return q, true
}

// link is the view of kind at path, spelled with the ref the request
// named (so browsing by branch stays on the branch), or with the id when
// it named one or the name cannot spell path.
func (q *repoReq) link(kind, path string) string {
	if q.at.byName() {
		if s, ok := q.names.spell(q.at.Ref, path); ok {
			return q.href(kind, s, path)
		}
	}
	return q.href(kind, q.at.Commit, path)
}

// linkRef is the view of kind at path on ref r (the picker's links).
func (q *repoReq) linkRef(kind string, r Ref, path string) string {
	if s, ok := q.names.spell(r, path); ok {
		return q.href(kind, s, path)
	}
	return q.href(kind, r.Commit(), path)
}
