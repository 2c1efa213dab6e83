package api

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/object"
)

// Prefix starts every read-API path.
const Prefix = "/api/"

// Endpoint is what a request asks for.
type Endpoint string

// The endpoints. Only Refs takes names; every other one takes object ids,
// so its answer never changes.
const (
	Refs    Endpoint = "refs"
	Tree    Endpoint = "tree"
	Blob    Endpoint = "blob"
	Raw     Endpoint = "raw"
	Log     Endpoint = "log"
	Commit  Endpoint = "commit"
	Compare Endpoint = "compare"
	Archive Endpoint = "archive"
	Blame   Endpoint = "blame"
	// Tag is an annotated tag object; AheadBehind counts how far two
	// commits have diverged (refinfo.go).
	Tag         Endpoint = "tag"
	AheadBehind Endpoint = "ahead-behind"
	Search      Endpoint = "search"
	// LastCommit answers each entry of a directory with the newest
	// commit that changed it (lastcommit.go).
	LastCommit Endpoint = "lastcommit"
	// Commits answers several commits at once (refinfo.go).
	Commits Endpoint = "commits"
)

// Limits of log paging (the n clamp).
const (
	DefaultLogN = 50
	MaxLogN     = 200
)

// Request is one parsed read-API request. The same value decides access
// (Owner, Name), names the cache entry (CacheSuffix) and is sent upstream
// (Path), so the three can never disagree about what was asked.
type Request struct {
	Repo     names.Repo
	Endpoint Endpoint
	// OID is the object of tree, blob, raw, log, commit, tag and
	// archive; the head of compare and ahead-behind.
	OID object.ID
	// Base is compare's and ahead-behind's base.
	Base object.ID
	// Heads are ahead-behind's heads after the first (OID), at most
	// MaxAheadBehindHeads in all; commits' ids after the first, at most
	// MaxCommits in all.
	Heads []object.ID
	// Sub is the path inside the tree (tree, blob, raw, blame) or log's
	// path filter, as validated segments.
	Sub []string
	// N is log's page size, clamped to 1..MaxLogN.
	N int
	// Format is archive's "tar.gz" or "zip".
	Format string
	// Search is search's query (search.go).
	Search *SearchQuery
	// Timeout is lastcommit's time budget as asked (timeout_ms; 0: the
	// server's). It bounds the work, not the answer: a whole answer is
	// the same whatever the budget, so the cache key leaves it out.
	Timeout time.Duration
}

// ErrBadRequest wraps every parse failure (HTTP 400).
var ErrBadRequest = errors.New("bad request")

func bad(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, args...))
}

// ParseRequest parses the escaped path (URL.EscapedPath) and query of a
// read-API request. Each segment is unescaped exactly once; empty, "." and
// ".." segments and segments holding "/", "\" or NUL after unescaping are
// refused, so an encoded slash can never change which object or path a
// request names.
func ParseRequest(escapedPath string, query url.Values) (*Request, error) {
	rest, ok := strings.CutPrefix(escapedPath, Prefix)
	if !ok {
		return nil, bad("not a read-API path")
	}
	raw := strings.Split(rest, "/")
	segs := make([]string, len(raw))
	for i, s := range raw {
		u, err := segment(s)
		if err != nil {
			return nil, err
		}
		segs[i] = u
	}
	if len(segs) < 3 {
		return nil, bad("want /api/{owner}/{name}/{endpoint}")
	}
	rn, err := names.Clean(segs[0], segs[1])
	if err != nil {
		return nil, bad("%v", err)
	}
	q := &Request{Repo: rn, Endpoint: Endpoint(segs[2])}
	args := segs[3:]
	switch q.Endpoint {
	case Refs:
		if len(args) != 0 {
			return nil, bad("refs takes no arguments")
		}
	case Tree, Blob, Raw, LastCommit:
		if len(args) == 0 {
			return nil, bad("%s needs an object id", q.Endpoint)
		}
		if q.OID, err = parseOID(args[0]); err != nil {
			return nil, err
		}
		q.Sub = args[1:]
		if q.Endpoint == LastCommit {
			if q.Timeout, err = parseTimeout(query.Get("timeout_ms")); err != nil {
				return nil, err
			}
		}
	case Blame:
		if len(args) < 2 {
			return nil, bad("blame takes {oid}/{path}")
		}
		if q.OID, err = parseOID(args[0]); err != nil {
			return nil, err
		}
		q.Sub = args[1:]
	case Log:
		if len(args) != 1 {
			return nil, bad("log takes one object id")
		}
		if q.OID, err = parseOID(args[0]); err != nil {
			return nil, err
		}
		if q.N, err = parseN(query.Get("n")); err != nil {
			return nil, err
		}
		if p := query.Get("path"); p != "" {
			if q.Sub, err = splitPath(p); err != nil {
				return nil, err
			}
		}
	case Commit, Tag:
		if len(args) != 1 {
			return nil, bad("%s takes one object id", q.Endpoint)
		}
		if q.OID, err = parseOID(args[0]); err != nil {
			return nil, err
		}
	case Compare, AheadBehind:
		if len(args) != 1 {
			return nil, bad("%s takes {base}...{head}", q.Endpoint)
		}
		b, h, ok := strings.Cut(args[0], "...")
		if !ok {
			return nil, bad("%s takes {base}...{head}", q.Endpoint)
		}
		if q.Base, err = parseOID(b); err != nil {
			return nil, err
		}
		most := 1
		if q.Endpoint == AheadBehind {
			most = MaxAheadBehindHeads
		}
		if err := q.parseIDs(h, most); err != nil {
			return nil, err
		}
	case Commits:
		if len(args) != 1 {
			return nil, bad("commits takes {oid}[,{oid}…]")
		}
		if err := q.parseIDs(args[0], MaxCommits); err != nil {
			return nil, err
		}
	case Archive:
		if len(args) != 1 {
			return nil, bad("archive takes {oid}.tar.gz or {oid}.zip")
		}
		id, format, ok := strings.Cut(args[0], ".")
		if !ok || (format != "tar.gz" && format != "zip") {
			return nil, bad("archive takes {oid}.tar.gz or {oid}.zip")
		}
		if q.OID, err = parseOID(id); err != nil {
			return nil, err
		}
		q.Format = format
	case Search:
		if len(args) != 1 {
			return nil, bad("search takes one object id")
		}
		if q.OID, err = parseOID(args[0]); err != nil {
			return nil, err
		}
		if q.Search, err = parseSearch(query); err != nil {
			return nil, err
		}
	default:
		return nil, bad("unknown endpoint %q", segs[2])
	}
	return q, nil
}

// parseIDs reads a comma-separated list of at most most ids into OID
// (the first) and Heads (the rest).
func (q *Request) parseIDs(s string, most int) error {
	ids := strings.Split(s, ",")
	if len(ids) > most {
		if most == 1 {
			return bad("%s takes {base}...{head}", q.Endpoint)
		}
		return bad("%s takes at most %d ids", q.Endpoint, most)
	}
	for i, s := range ids {
		id, err := parseOID(s)
		if err != nil {
			return err
		}
		if i == 0 {
			q.OID = id
		} else {
			q.Heads = append(q.Heads, id)
		}
	}
	return nil
}

// segment unescapes one path segment and refuses the dangerous ones.
func segment(s string) (string, error) {
	u, err := url.PathUnescape(s)
	if err != nil {
		return "", bad("bad escape in %q", s)
	}
	switch {
	case u == "":
		return "", bad("empty path segment")
	case u == "." || u == "..":
		return "", bad("path segment %q", u)
	case strings.ContainsAny(u, "/\\\x00"):
		return "", bad("path segment %q holds /, \\ or NUL", u)
	}
	return u, nil
}

// splitPath validates log's path filter (a query value, already unescaped
// once by the URL parser): "/"-separated segments, each as strict as a
// path segment.
func splitPath(p string) ([]string, error) {
	parts := strings.Split(p, "/")
	for _, s := range parts {
		switch {
		case s == "":
			return nil, bad("empty segment in path %q", p)
		case s == "." || s == "..":
			return nil, bad("segment %q in path", s)
		case strings.ContainsAny(s, "\\\x00"):
			return nil, bad("path %q holds \\ or NUL", p)
		}
	}
	return parts, nil
}

func parseOID(s string) (object.ID, error) {
	id, ok := object.ParseHex(s)
	if !ok {
		return object.ID{}, bad("%q is not a full lowercase object id", s)
	}
	return id, nil
}

// parseN reads log's n: absent is DefaultLogN, anything else is clamped to
// 1..MaxLogN (a huge value is not an error, but never more work).
func parseN(s string) (int, error) {
	if s == "" {
		return DefaultLogN, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	var ne *strconv.NumError
	if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
		// Out of int64's range is still a number: clamp it too.
		if strings.HasPrefix(s, "-") {
			return 1, nil
		}
		return MaxLogN, nil
	}
	if err != nil {
		return 0, bad("n=%q is not a number", s)
	}
	return int(min(max(n, 1), MaxLogN)), nil
}

// parseTimeout reads lastcommit's timeout_ms: absent is 0 (the
// server's budget); the server caps it at its own.
func parseTimeout(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 31)
	if err != nil || n == 0 {
		return 0, bad("timeout_ms=%q is not a positive number of milliseconds", s)
	}
	return time.Duration(n) * time.Millisecond, nil
}

// heads is ahead-behind's heads in the order asked (compare's one head,
// commits' ids).
func (q *Request) heads() []object.ID { return append([]object.ID{q.OID}, q.Heads...) }

// Path is the request's canonical escaped path, as sent upstream and as
// the log cursor links are built.
func (q *Request) Path() string {
	var b strings.Builder
	b.WriteString(Prefix)
	b.WriteString(url.PathEscape(q.Repo.Owner()) + "/" + url.PathEscape(q.Repo.Name()) + "/" + string(q.Endpoint))
	switch q.Endpoint {
	case Tree, Blob, Raw, Log, Commit, Blame, Tag, Search, LastCommit:
		b.WriteString("/" + q.OID.String())
	case Compare, AheadBehind, Commits:
		b.WriteString("/")
		if q.Endpoint != Commits {
			b.WriteString(q.Base.String() + "...")
		}
		b.WriteString(q.OID.String())
		for _, h := range q.Heads {
			b.WriteString("," + h.String())
		}
	case Archive:
		b.WriteString("/" + q.OID.String() + "." + q.Format)
	}
	if q.Endpoint != Log {
		for _, s := range q.Sub {
			b.WriteString("/" + url.PathEscape(s))
		}
	}
	if qs := q.Query(); qs != "" {
		b.WriteString("?" + qs)
	}
	return b.String()
}

// Query is the canonical query string ("" for none).
func (q *Request) Query() string {
	if q.Endpoint == Search {
		return q.Search.values().Encode()
	}
	if q.Endpoint == LastCommit && q.Timeout > 0 {
		return "timeout_ms=" + strconv.FormatInt(q.Timeout.Milliseconds(), 10)
	}
	if q.Endpoint != Log {
		return ""
	}
	v := url.Values{"n": {strconv.Itoa(q.N)}}
	if len(q.Sub) > 0 {
		v.Set("path", strings.Join(q.Sub, "/"))
	}
	return v.Encode()
}

// CacheSuffix names the answer within its repository and generation. It
// is the canonical path after the repository, so two requests share an
// entry exactly when they ask the same thing.
func (q *Request) CacheSuffix() string {
	whole := *q
	whole.Timeout = 0
	p := whole.Path()
	_, after, _ := strings.Cut(strings.TrimPrefix(p, Prefix), "/")
	_, after, _ = strings.Cut(after, "/")
	return after
}

// Immutable reports whether the answer is fixed by the request alone
// (every endpoint but refs).
func (q *Request) Immutable() bool { return q.Endpoint != Refs }
