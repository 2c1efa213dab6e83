package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/transport/frontend/httpgit"
	"github.com/rgit/rgit/transport/frontend/httpmetrics"
	"github.com/rgit/rgit/transport/wire/clientlimit"
)

// Origin answers a parsed request for an authenticated caller: the node
// itself (Local) or the fleet behind api-serve (Upstream). It writes the
// whole answer, errors included, and returns an error only when an answer
// it started could not be finished (a failed read, an upstream that went
// away): the client may hold part of it, and it must never be stored.
type Origin interface {
	ServeAPI(w http.ResponseWriter, r *http.Request, q *Request, id auth.Identity) error
}

// Visibility tells whether a repository (any spelling) is public now;
// storage/repo.MetaCache answers it from the name index, cached for a few
// seconds like every node's access check. A missing repository is not
// public.
type Visibility interface {
	Public(ctx context.Context, r names.Repo) (bool, error)
}

// Config configures the front handler.
type Config struct {
	// Auth looks up tokens. Required.
	Auth auth.TokenSource
	// Origin answers what the cache does not. Required.
	Origin Origin
	// Cache is the shared answer cache; nil: none.
	Cache *Cache
	// Visibility is asked before the cache is: answers are served from
	// it, and stored in it, only for a repository that is public now, so
	// a repository made private stops being served from the cache even
	// where nothing could purge it. Required with Cache.
	Visibility Visibility
	// Metrics counts requests and cache lookups; nil: not counted.
	Metrics *Metrics
	Log     *zap.Logger
}

// Handler is the read API's front: it parses the path once, authenticates
// the caller (a bad token is 401 before anything else is asked), answers
// from the cache when it can and asks the origin otherwise, storing
// public answers it may share.
type Handler struct {
	auth       auth.TokenSource
	origin     Origin
	cache      *Cache
	visibility Visibility
	metrics    *Metrics
	log        *zap.Logger
}

// New returns the front handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Auth == nil || cfg.Origin == nil {
		return nil, errors.New("api: Config.Auth and Config.Origin are required")
	}
	if cfg.Cache != nil && cfg.Visibility == nil {
		return nil, errors.New("api: Config.Visibility is required with a Cache")
	}
	log := cfg.Log
	if log == nil {
		log = zap.NewNop()
	}
	return &Handler{auth: cfg.Auth, origin: cfg.Origin, cache: cfg.Cache, visibility: cfg.Visibility, metrics: cfg.Metrics, log: log}, nil
}

// Mount routes paths under Prefix to api and everything else to rest. It
// sits in front of a ServeMux rather than in it: the mux would clean the
// path (turning ".." into a redirect) before the API refuses it, and a
// "/api/" pattern conflicts with the git routes' "/{owner}/{repo}/…".
func Mount(api, rest http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, Prefix) {
			api.ServeHTTP(w, r)
			return
		}
		rest.ServeHTTP(w, r)
	})
}

// LimitUnauthenticated caps per client address the requests without
// credentials api has in flight (p: RGIT_MAX_ANON_PER_ADDR, the budget
// git requests and SSH connections share): more are answered 429 with
// Retry-After, before the path is parsed. It belongs in front of a public
// port's API only: the browse page calls the API in process, all from
// one address.
func LimitUnauthenticated(p *clientlimit.PerAddr, api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release, ok := p.AcquireRequest(r)
		if !ok {
			w.Header().Set("Retry-After", httpgit.RetryAfter)
			writeError(w, http.StatusTooManyRequests, p.Refusal())
			return
		}
		defer release()
		api.ServeHTTP(w, r)
	})
}

// Refused answers every read-API request on a cluster node's public port:
// in a cluster the API is rgit api-serve's, and a node never forwards it
// from the public side.
var Refused = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	writeError(w, http.StatusNotFound, "the read API is served by rgit api-serve in cluster mode")
})

// errorBody is every error answer's JSON.
type errorBody struct {
	Error string `json:"error"`
}

// writeError answers with a JSON error that is never cached.
func writeError(w http.ResponseWriter, status int, msg string) {
	h := w.Header()
	for _, k := range []string{"ETag", "Content-Length", "Content-Disposition", "Link"} {
		h.Del(k)
	}
	if status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Basic realm="rgit", Bearer realm="rgit"`)
	}
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "private, no-store")
	w.WriteHeader(status)
	b, _ := json.Marshal(errorBody{Error: msg})
	w.Write(append(b, '\n'))
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &httpmetrics.StatusWriter{ResponseWriter: w}
	ep := badEndpoint
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(sw, http.StatusMethodNotAllowed, "the read API answers GET and HEAD")
	} else if q, err := ParseRequest(r.URL.EscapedPath(), r.URL.Query()); err != nil {
		writeError(sw, http.StatusBadRequest, err.Error())
	} else {
		ep = string(q.Endpoint)
		h.serve(sw, r, q)
	}
	h.metrics.observe(ep, sw.Status, time.Since(start))
}

// serve answers a parsed request.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, q *Request) {
	id, err := auth.FromRequest(r, h.auth)
	if errors.Is(err, auth.ErrBadCredentials) {
		writeError(w, http.StatusUnauthorized, "invalid credentials")
		return
	}
	if err != nil {
		h.log.Warn("read API: token lookup failed", zap.String("path", r.URL.Path), zap.Error(err))
		writeError(w, http.StatusServiceUnavailable, "credentials cannot be checked right now")
		return
	}
	if h.cache == nil {
		h.origin.ServeAPI(w, r, q, id)
		return
	}
	if !cacheable(q) {
		h.metrics.cacheLookup(cacheBypass)
		h.origin.ServeAPI(w, r, q, id)
		return
	}
	// Whatever told Redis of a flip or not, the cache answers only for a
	// repository public now; every other request is the origin's, which
	// applies the access rules (a private and a missing repository cost
	// the same here: one cached index lookup).
	public, err := h.visibility.Public(r.Context(), q.Repo)
	if err != nil {
		h.log.Warn("read API: visibility unreadable; answering uncached", zap.Stringer("repo", q.Repo), zap.Error(err))
	}
	if !public {
		h.metrics.cacheLookup(cacheBypass)
		h.origin.ServeAPI(w, r, q, id)
		return
	}
	repoKey := q.Repo.Key()
	// The generation is read before the origin is asked: an answer is
	// stored under the generation it was computed in, so a purge landing
	// meanwhile leaves it out of reach. No generation, no cache.
	gen, err := h.cache.Generation(r.Context(), repoKey)
	if err != nil {
		h.log.Warn("read API: cache generation unreadable; answering uncached", zap.String("repo", repoKey), zap.Error(err))
		h.metrics.cacheLookup(cacheBypass)
		h.origin.ServeAPI(w, r, q, id)
		return
	}
	if e, ok := h.cache.Get(r.Context(), gen, repoKey, q.CacheSuffix()); ok {
		h.metrics.cacheLookup(cacheHit)
		w.Header().Set("X-Cache", "hit")
		e.write(w, r)
		return
	}
	h.metrics.cacheLookup(cacheMiss)
	if r.Method != http.MethodGet {
		// A HEAD answer has no body to store.
		h.origin.ServeAPI(w, r, q, id)
		return
	}
	rec := &recorder{ResponseWriter: w, limit: h.cache.maxEntry}
	// The origin must produce the whole answer to be stored; this
	// request's If-None-Match is applied here instead.
	inner := r.Clone(r.Context())
	inner.Header.Del("If-None-Match")
	w.Header().Set("X-Cache", "miss")
	rec.etagOf = r.Header.Get("If-None-Match")
	err = h.origin.ServeAPI(rec, inner, q, id)
	// A shareable answer is stored before the client sees its end, so
	// a request that follows the answer finds it cached; only a whole
	// one, which the origin finished.
	if e, ok := rec.entry(); ok && err == nil {
		h.cache.Put(r.Context(), gen, repoKey, q.CacheSuffix(), e, ttlOf(q, h.cache))
	}
	rec.release()
}

// cacheable: archives are streamed and large, never cached.
func cacheable(q *Request) bool { return q.Endpoint != Archive }

func ttlOf(q *Request, c *Cache) time.Duration {
	if q.Immutable() {
		return c.objectTTL
	}
	return c.refsTTL
}

// Cache-Control values.
const (
	ccImmutable = "public, max-age=31536000, immutable"
	ccRefs      = "public, max-age=5"
	ccPrivate   = "private, no-store"
)

// etagFor is the strong ETag of an object-id answer: the answer is fixed
// by the canonical request alone, so the request names it.
func etagFor(q *Request) string {
	sum := sha256.Sum256([]byte("rgit-api-v1\x00" + q.CacheSuffix()))
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

// etagOfBody is the strong ETag of a computed answer (refs).
func etagOfBody(b []byte) string {
	sum := sha256.Sum256(b)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

// notModified reports whether If-None-Match names etag.
func notModified(r *http.Request, etag string) bool {
	inm := r.Header.Get("If-None-Match")
	if inm == "" || etag == "" {
		return false
	}
	if strings.TrimSpace(inm) == "*" {
		return true
	}
	for t := range strings.SplitSeq(inm, ",") {
		if strings.TrimSpace(t) == etag {
			return true
		}
	}
	return false
}

// entry is a cached answer: the headers that matter and the body.
type entry struct {
	ContentType  string `json:"t"`
	CacheControl string `json:"c"`
	ETag         string `json:"e"`
	Link         string `json:"l,omitempty"`
	Body         []byte `json:"-"`
}

// write serves a cached entry, or 304 when the client has it.
func (e *entry) write(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", e.ContentType)
	h.Set("Cache-Control", e.CacheControl)
	h.Set("X-Content-Type-Options", "nosniff")
	if e.ETag != "" {
		h.Set("ETag", e.ETag)
	}
	if e.Link != "" {
		h.Set("Link", e.Link)
	}
	if notModified(r, e.ETag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(e.Body)))
	w.WriteHeader(http.StatusOK)
	w.Write(e.Body)
}

// recorder keeps an origin's answer so a shareable one can be stored
// whole. A shareable answer (a public 200) is held until release, up to
// limit bytes; past the limit, and for any other answer, it passes
// straight through. With etagOf set it answers 304 itself when the
// answer's ETag matches.
type recorder struct {
	http.ResponseWriter
	limit    int
	etagOf   string
	status   int
	buf      bytes.Buffer
	holding  bool // the answer is in buf, nothing sent yet
	sent     bool // the status line went to the client
	skipBody bool
}

func (rc *recorder) WriteHeader(code int) {
	if rc.status != 0 {
		return
	}
	rc.status = code
	if code == http.StatusOK && strings.HasPrefix(rc.Header().Get("Cache-Control"), "public") {
		rc.holding = true
		return
	}
	rc.send()
}

// send writes the status line, or 304 when the client has the answer.
func (rc *recorder) send() {
	rc.sent = true
	if rc.status == http.StatusOK && rc.etagOf != "" {
		et := rc.Header().Get("ETag")
		if et != "" && notModified(&http.Request{Header: http.Header{"If-None-Match": {rc.etagOf}}}, et) {
			rc.Header().Del("Content-Length")
			rc.ResponseWriter.WriteHeader(http.StatusNotModified)
			rc.skipBody = true
			return
		}
	}
	rc.ResponseWriter.WriteHeader(rc.status)
}

func (rc *recorder) Write(p []byte) (int, error) {
	if rc.status == 0 {
		rc.WriteHeader(http.StatusOK)
	}
	if rc.holding {
		if rc.buf.Len()+len(p) <= rc.limit {
			return rc.buf.Write(p)
		}
		// Too big to store: what is held goes out, the rest streams.
		if err := rc.release(); err != nil {
			return 0, err
		}
	}
	if rc.skipBody {
		return len(p), nil
	}
	return rc.ResponseWriter.Write(p)
}

// release sends what is held, if anything.
func (rc *recorder) release() error {
	if !rc.holding {
		return nil
	}
	rc.holding = false
	rc.send()
	if rc.skipBody {
		return nil
	}
	_, err := rc.ResponseWriter.Write(rc.buf.Bytes())
	rc.buf = bytes.Buffer{}
	return err
}

// Flush is a no-op while the answer is held: flushing would send it
// before it is stored.
func (rc *recorder) Flush() {
	if rc.holding {
		return
	}
	_ = http.NewResponseController(rc.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (rc *recorder) Unwrap() http.ResponseWriter { return rc.ResponseWriter }

// entry returns the held answer if it may be shared and is whole: its
// body is exactly as long as its Content-Length says (an answer without
// one cannot be checked, and is not stored).
func (rc *recorder) entry() (*entry, bool) {
	if !rc.holding {
		return nil, false
	}
	h := rc.Header()
	if n, err := strconv.Atoi(h.Get("Content-Length")); err != nil || n != rc.buf.Len() {
		return nil, false
	}
	return &entry{ContentType: h.Get("Content-Type"), CacheControl: h.Get("Cache-Control"), ETag: h.Get("ETag"),
		Link: h.Get("Link"), Body: bytes.Clone(rc.buf.Bytes())}, true
}
