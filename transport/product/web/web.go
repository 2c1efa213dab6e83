package web

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/transport/frontend/httpmetrics"
)

// Config configures the page.
type Config struct {
	// API answers /api/… requests (the read API). Required.
	API http.Handler
	// PageURL is the page's public URL as people reach it
	// (scheme://host, RGIT_WEB_URL), "" when not configured. With https
	// the sign-in cookie is Secure even though the request reached this
	// server in clear text (a TLS proxy in front); no request header is
	// trusted to say so.
	PageURL string
	// CloneURL is the base of HTTP clone URLs (scheme://host,
	// RGIT_PUBLIC_URL). "": the address the browser used when GitHere,
	// else the page shows no HTTP clone URL.
	CloneURL string
	// GitHere says this server answers git at the address the browser
	// used for the page (a single node), so it may be shown as the clone
	// URL when CloneURL is unset.
	GitHere bool
	// SSHURL is the base of SSH clone URLs (ssh://user@host:port,
	// RGIT_PUBLIC_SSH_URL). "": the browser's host with SSHPort, if set;
	// else none.
	SSHURL string
	// SSHPort is the port advertised in SSH clone URLs when SSHURL is
	// unset; "" shows none.
	SSHPort string
	// Metrics counts requests by view; nil: not counted.
	Metrics *Metrics
	Log     *zap.Logger
}

// Handler is the browse page. It serves every path it is given that is
// not the read API's or git's: mount it at "/".
type Handler struct {
	api                 http.Handler
	cloneURL, sshURL    string
	sshPort             string
	gitHere, secureSite bool
	log                 *zap.Logger
	metrics             *Metrics
	next                http.Handler
}

// New returns the page.
func New(cfg Config) (*Handler, error) {
	if cfg.API == nil {
		return nil, errors.New("web: Config.API is required")
	}
	h := &Handler{api: cfg.API, cloneURL: strings.TrimSuffix(cfg.CloneURL, "/"), sshURL: strings.TrimSuffix(cfg.SSHURL, "/"),
		sshPort: cfg.SSHPort, gitHere: cfg.GitHere, secureSite: strings.HasPrefix(cfg.PageURL, "https://"), log: cfg.Log, metrics: cfg.Metrics}
	if h.log == nil {
		h.log = zap.NewNop()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.index)
	mux.HandleFunc("GET /-/signin", h.signinForm)
	mux.HandleFunc("POST /-/signin", h.signin)
	mux.HandleFunc("POST /-/signout", h.signout)
	mux.HandleFunc("GET /-/static/style.css", serveCSS)
	mux.HandleFunc("GET /{owner}/{name}", h.front)
	// {at...} is {ref}/{path}: a branch, tag or object id, then a path
	// (refs.go).
	mux.HandleFunc("GET /{owner}/{name}/tree/{at...}", h.tree)
	mux.HandleFunc("GET /{owner}/{name}/blob/{at...}", h.blob)
	mux.HandleFunc("GET /{owner}/{name}/raw/{at...}", h.raw)
	mux.HandleFunc("GET /{owner}/{name}/blame/{at...}", h.blame)
	mux.HandleFunc("GET /{owner}/{name}/commits/{at...}", h.history)
	mux.HandleFunc("GET /{owner}/{name}/archive/{file}", h.archive)
	mux.HandleFunc("GET /{owner}/{name}/commit/{at...}", h.commit)
	mux.HandleFunc("GET /{owner}/{name}/compare", h.compare)
	mux.HandleFunc("GET /{owner}/{name}/branches", h.branches)
	mux.HandleFunc("GET /{owner}/{name}/tags", h.tags)
	mux.HandleFunc("GET /{owner}/{name}/search", h.search)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { h.fail(w, r, nil, http.StatusNotFound, "page not found") })
	// Sign-in and sign-out are the only writes; refuse them cross-site
	// (Sec-Fetch-Site / Origin), on top of SameSite=Strict.
	h.next = http.NewCrossOriginProtection().Handler(mux)
	return h, nil
}

// csp allows nothing but this origin's stylesheet and images, and no
// script at all: repository content that escaped escaping still cannot run.
const csp = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// rawCSP sandboxes raw file bytes served from this origin (an HTML file
// viewed raw must not run as the page).
const rawCSP = "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src 'self'"

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &httpmetrics.StatusWriter{ResponseWriter: w}
	h.serve(sw, r)
	// The mux set the pattern it matched on r.
	h.metrics.observe(viewOf(r.Pattern), sw.Status, time.Since(start))
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("X-Frame-Options", "DENY")
	if r.URL.Path == "/api" || strings.HasPrefix(r.URL.Path, "/api/") {
		// The owner name api is reserved for the read API: an /api/ path
		// that reaches the page is an unknown endpoint, never a repository.
		writeJSONError(w, http.StatusNotFound, "no such endpoint")
		return
	}
	h.next.ServeHTTP(w, r)
}

// Cookies. The token authorizes API calls; the owner name is only shown.
const (
	tokenCookie = "rgit_token"
	ownerCookie = "rgit_owner"
	cookieAge   = 30 * 24 * 3600
)

func token(r *http.Request) string {
	if c, err := r.Cookie(tokenCookie); err == nil {
		return c.Value
	}
	return ""
}

func viewer(r *http.Request) string {
	if token(r) == "" {
		return ""
	}
	if c, err := r.Cookie(ownerCookie); err == nil {
		return c.Value
	}
	return ""
}

// setCookie sets a sign-in cookie: Secure when the request came over TLS
// here, or the page's configured public URL is https (a TLS proxy in
// front).
func (h *Handler) setCookie(w http.ResponseWriter, r *http.Request, name, value string, age int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: age,
		HttpOnly: true, Secure: r.TLS != nil || h.secureSite, SameSite: http.SameSiteStrictMode})
}

// page is what every view's template gets.
type page struct {
	Title  string
	Viewer string
	Repo   *repoHead
	Status int
	Msg    string
}

// repoHead is the header of every repository view.
type repoHead struct {
	Owner, Name      string
	Home, Log, Cmp   string
	CloneHTTP        string
	CloneSSH         string
	Current          string        // the ref (or short id) being shown
	Permalink        string        // the view at the commit id, when shown by name
	PickerHTML       template.HTML // the picker's items (pickerHTML)
	PickerCut        bool          // more refs than maxPicker: the branches page lists them
	Archive, ArchZip string
	HasCommit        bool
}

type pick struct {
	Name, Href string
	Tag        bool
	Current    bool
}

func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, view string, data any) {
	h.renderAround(w, r, status, view, data, nil)
}

// bulkMark stands in a page for its bulk (a file's numbered source, up to
// megabytes of HTML) while the template runs, and renderAround writes the
// bulk in its place: html/template prints a value through fmt, a copy
// of it in a buffer of its own, then in the page's. The mark holds a
// NUL, which html/template writes as U+FFFD from every value it escapes
// (writeText too), so the first one in a page is the template's own.
const bulkMark template.HTML = "\x00bulk\x00"

// renderAround renders view with bulk written where the template wrote
// bulkMark (nil: no bulk).
func (h *Handler) renderAround(w http.ResponseWriter, r *http.Request, status int, view string, data any, bulk []byte) {
	var b bytes.Buffer
	err := views[view].ExecuteTemplate(&b, "layout", data)
	page, tail := b.Bytes(), []byte(nil)
	if err == nil && bulk != nil {
		if i := bytes.Index(page, []byte(bulkMark)); i >= 0 {
			page, tail = page[:i], page[i+len(bulkMark):]
		} else {
			err = errors.New("no place for the bulk")
		}
	}
	if err != nil {
		h.log.Error("web: render failed", zap.String("view", view), zap.String("path", r.URL.Path), zap.Error(err))
		http.Error(w, "page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "private, no-store")
	w.WriteHeader(status)
	for _, part := range [][]byte{page, bulk, tail} {
		if _, err := w.Write(part); err != nil {
			return
		}
	}
}

// fail answers an error page. err is the API failure, if any: a 401 to a
// signed-in caller means the token no longer works (sign in again); a
// 401 to anyone else reads as not found, as the API meant it (a private
// repository is indistinguishable from a missing one).
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error, status int, msg string) {
	if err != nil {
		switch st := statusOf(err); {
		case st == http.StatusUnauthorized && token(r) != "":
			h.setCookie(w, r, tokenCookie, "", -1)
			h.setCookie(w, r, ownerCookie, "", -1)
			http.Redirect(w, r, "/-/signin?expired=1", http.StatusSeeOther)
			return
		case st == http.StatusUnauthorized || st == http.StatusNotFound:
			status, msg = http.StatusNotFound, "not found"
			if token(r) == "" {
				msg = "not found (sign in to see private repositories)"
			}
		case st == http.StatusBadRequest:
			status, msg = http.StatusBadRequest, "bad request"
		case st == http.StatusUnprocessableEntity:
			// Over a limit of the API: its message names the limit.
			status, msg = st, apiMessage(err)
		case st == http.StatusServiceUnavailable:
			if ra := retryAfterOf(err); ra != "" {
				w.Header().Set("Retry-After", ra)
			}
			status, msg = http.StatusServiceUnavailable, "temporarily unavailable, try again"
		default:
			h.log.Error("web: read API failed", zap.String("path", r.URL.Path), zap.Error(err))
			status, msg = http.StatusBadGateway, "the read API failed"
		}
	}
	h.render(w, r, status, "error", page{Title: http.StatusText(status), Viewer: viewer(r), Status: status, Msg: msg})
}

func serveCSS(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	w.Header().Set("ETag", cssETag)
	if r.Header.Get("If-None-Match") == cssETag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	_, _ = w.Write(styleCSS)
}

var cssETag = func() string {
	s := sha256.Sum256(styleCSS)
	return `"` + hex.EncodeToString(s[:8]) + `"`
}()

// Sign-in.

type signinPage struct {
	page
	Error string
}

func (h *Handler) signinForm(w http.ResponseWriter, r *http.Request) {
	p := signinPage{page: page{Title: "Sign in", Viewer: viewer(r)}}
	if r.URL.Query().Get("expired") != "" {
		p.Error = "Your token is no longer accepted; sign in again."
	}
	h.render(w, r, http.StatusOK, "signin", p)
}

// signin checks the token by asking the API who it belongs to.
func (h *Handler) signin(w http.ResponseWriter, r *http.Request) {
	tok := strings.TrimSpace(r.PostFormValue("token"))
	if tok == "" {
		h.render(w, r, http.StatusBadRequest, "signin", signinPage{page: page{Title: "Sign in"}, Error: "Enter a token."})
		return
	}
	var list RepoList
	_, err := getJSON(r.Context(), h.api, RepoListPath, tok, &list)
	if statusOf(err) == http.StatusUnauthorized || (err == nil && list.Viewer == "") {
		h.render(w, r, http.StatusUnauthorized, "signin", signinPage{page: page{Title: "Sign in"}, Error: "That token is not accepted."})
		return
	}
	if err != nil {
		h.fail(w, r, err, 0, "")
		return
	}
	h.setCookie(w, r, tokenCookie, tok, cookieAge)
	h.setCookie(w, r, ownerCookie, list.Viewer, cookieAge)
	h.log.Info("web: signed in", zap.String("owner", list.Viewer), zap.String("remote", r.RemoteAddr))
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (h *Handler) signout(w http.ResponseWriter, r *http.Request) {
	h.setCookie(w, r, tokenCookie, "", -1)
	h.setCookie(w, r, ownerCookie, "", -1)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// The repository list.

type indexPage struct {
	page
	Mine, Others []RepoItem
	// First: the page holds the start of the list (the caller's own
	// section shows even when empty). Prev and Next link the pages.
	First      bool
	Prev, Next string
	Truncated  bool
}

func (h *Handler) index(w http.ResponseWriter, r *http.Request) {
	pageNo := 1
	if s := r.URL.Query().Get("page"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			h.fail(w, r, nil, http.StatusBadRequest, "bad page number")
			return
		}
		pageNo = n
	}
	var list RepoList
	if _, err := getJSON(r.Context(), h.api, RepoListPath+"?page="+strconv.Itoa(pageNo), token(r), &list); err != nil {
		h.fail(w, r, err, 0, "")
		return
	}
	p := indexPage{page: page{Title: "Repositories", Viewer: list.Viewer}, Truncated: list.Truncated, First: pageNo == 1}
	for _, it := range list.Repos {
		if list.Viewer != "" && strings.EqualFold(it.Owner, list.Viewer) {
			p.Mine = append(p.Mine, it)
		} else {
			p.Others = append(p.Others, it)
		}
	}
	if pageNo > 1 {
		p.Prev = "/?page=" + strconv.Itoa(pageNo-1)
	}
	if list.More {
		p.Next = "/?page=" + strconv.Itoa(pageNo+1)
	}
	h.render(w, r, http.StatusOK, "index", p)
}

// Repository views.

// repoReq is one request for a repository view: its names, the
// caller's token, the refs (for the picker and names in URLs) and what
// the URL names.
type repoReq struct {
	owner, name, token string
	refs               []Ref
	names              refNames
	at                 at
}

// isOID says whether s is a full object id (SHA-1 or SHA-256, lowercase).
func isOID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// begin reads the refs of the repository the request names. ok is false
// when it answered (an error page).
func (h *Handler) begin(w http.ResponseWriter, r *http.Request) (*repoReq, bool) {
	q := &repoReq{owner: r.PathValue("owner"), name: strings.TrimSuffix(r.PathValue("name"), ".git"), token: token(r)}
	if _, err := getJSON(r.Context(), h.api, apiPath(q.owner, q.name, "refs"), q.token, &q.refs); err != nil {
		h.fail(w, r, err, 0, "")
		return nil, false
	}
	q.names = newRefNames(q.refs)
	return q, true
}

func (q *repoReq) base() string {
	return "/" + url.PathEscape(q.owner) + "/" + url.PathEscape(q.name)
}

// href is the page of kind ("tree", "blob", "commits", …) at ref (an
// object id or a ref's spelling, see link) and path.
func (q *repoReq) href(kind, ref, path string) string {
	s := q.base() + "/" + kind + "/" + escapePath(ref)
	if path != "" {
		s += "/" + escapePath(path)
	}
	return s
}

// headRef is the ref HEAD points at, if any.
func (q *repoReq) headRef() (Ref, bool) {
	target := ""
	for _, r := range q.refs {
		if r.Name == "HEAD" {
			target = r.Target
			if target == "" && r.OID != "" {
				return r, true // detached
			}
		}
	}
	for _, r := range q.refs {
		if r.Name == target && target != "" {
			return r, true
		}
	}
	return Ref{}, false
}

// currentRef names the ref a view at commit oid shows: HEAD's branch if
// it is there, else the first branch, else the first tag ("" for none).
func (q *repoReq) currentRef(oid string) string {
	if hr, ok := q.headRef(); ok && hr.Commit() == oid && hr.Name != "HEAD" {
		return hr.Name
	}
	tag := ""
	for _, r := range q.refs {
		switch {
		case r.Commit() != oid:
		case r.Kind == "branch":
			return r.Name
		case r.Kind == "tag" && tag == "":
			tag = r.Name
		}
	}
	return tag
}

// resolve reads what a user typed (a full or short ref name, or an
// object id) as a ref and its commit, with no path after it.
func (q *repoReq) resolve(s string) (at, bool) {
	a, ok := q.names.resolve(strings.Split(s, "/"))
	return a, ok && a.Path == ""
}

// maxPicker bounds the refs the picker lists on every page.
const maxPicker = 100

// head builds the repository header for a view of kind at q.at and
// path (no commit: an empty repository): the picker links each ref to
// the same view on it, and a view by name offers its permanent link.
func (h *Handler) head(r *http.Request, q *repoReq, kind, path string) *repoHead {
	oid := q.at.Commit
	rh := &repoHead{Owner: q.owner, Name: q.name, Home: q.base(), Cmp: q.base() + "/compare", HasCommit: oid != ""}
	rh.CloneHTTP, rh.CloneSSH = h.cloneURLs(r, q.base()+".git")
	if oid == "" {
		return rh
	}
	rh.Log = q.link("commits", "")
	rh.Archive = q.base() + "/archive/" + oid + ".tar.gz"
	rh.ArchZip = q.base() + "/archive/" + oid + ".zip"
	rh.Current = q.at.label()
	if q.at.byName() {
		rh.Permalink = q.href(kind, oid, path)
	}
	cur := q.at.Ref.Name
	if cur == "" || cur == "HEAD" {
		cur = q.currentRef(oid)
	}
	var picks []pick
	for _, ref := range q.refs {
		tag := ref.Kind == "tag"
		if ref.Kind != "branch" && !tag {
			continue
		}
		if len(picks) == maxPicker {
			rh.PickerCut = true
			break
		}
		picks = append(picks, pick{Name: ref.Short(), Tag: tag, Href: q.linkRef(kind, ref, path), Current: ref.Name == cur})
	}
	rh.PickerHTML = pickerHTML(picks)
	return rh
}

// cloneURLs are the HTTP and SSH clone URLs of the repository at path
// ("/owner/name.git"); "" for one the page cannot name. Configured public
// URLs win; otherwise a server that answers git where the browser reached
// the page names that address.
func (h *Handler) cloneURLs(r *http.Request, path string) (httpURL, sshURL string) {
	switch {
	case h.cloneURL != "":
		httpURL = h.cloneURL + path
	case h.gitHere:
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		httpURL = scheme + "://" + r.Host + path
	}
	switch {
	case h.sshURL != "":
		sshURL = h.sshURL + path
	case h.sshPort != "":
		host := r.Host
		if hn, _, err := net.SplitHostPort(r.Host); err == nil {
			host = hn
		}
		sshURL = "ssh://git@" + net.JoinHostPort(host, h.sshPort) + path
	}
	return httpURL, sshURL
}

type crumb struct{ Name, Href string }

// crumbs are the links from the root to path's parent, then path's name.
func (q *repoReq) crumbs(path string) []crumb {
	out := []crumb{{Name: q.name, Href: q.link("tree", "")}}
	if path == "" {
		return out
	}
	segs := strings.Split(path, "/")
	for i, s := range segs {
		c := crumb{Name: s}
		if i < len(segs)-1 {
			c.Href = q.link("tree", strings.Join(segs[:i+1], "/"))
		}
		out = append(out, c)
	}
	return out
}

type treePage struct {
	page
	History    string
	OID        string
	Path       string
	Crumbs     []crumb
	Entries    []entryView
	Readme     template.HTML
	ReadmeText string
	ReadmeName string
	Empty      bool
	Summary    *repoSummary // the repository page's counts and latest commit
	// HasLast: entries carry their last commits (treemeta.go); LastNote
	// says why some have none.
	HasLast  bool
	LastNote string
}

type entryView struct {
	Name, Kind, Href, OID string
	Size                  int64
	Last                  *lastView
}

func (h *Handler) front(w http.ResponseWriter, r *http.Request) {
	q, ok := h.begin(w, r)
	if !ok {
		return
	}
	hr, found := q.headRef()
	if !found {
		// Unborn HEAD: nothing to show but how to push.
		h.render(w, r, http.StatusOK, "tree", treePage{Empty: true,
			page: page{Title: q.owner + "/" + q.name, Viewer: viewer(r), Repo: h.head(r, q, "tree", "")}})
		return
	}
	q.at = at{Ref: hr, Commit: hr.Commit()}
	sum, err := h.summary(r.Context(), q)
	if err != nil {
		h.fail(w, r, err, 0, "")
		return
	}
	h.showTree(w, r, q, sum)
}

func (h *Handler) tree(w http.ResponseWriter, r *http.Request) {
	q, ok := h.beginAt(w, r)
	if !ok {
		return
	}
	h.showTree(w, r, q, nil)
}

func (h *Handler) showTree(w http.ResponseWriter, r *http.Request, q *repoReq, sum *repoSummary) {
	oid, path := q.at.Commit, q.at.Path
	var entries []Entry
	if _, err := getJSON(r.Context(), h.api, apiPath(q.owner, q.name, "tree", oid, path), q.token, &entries); err != nil {
		h.fail(w, r, err, 0, "")
		return
	}
	title := q.owner + "/" + q.name
	if path != "" {
		title = path + " · " + title
	}
	p := treePage{page: page{Title: title, Viewer: viewer(r), Repo: h.head(r, q, "tree", path)},
		OID: oid, Path: path, Crumbs: q.crumbs(path), Summary: sum}
	if path != "" {
		p.History = q.link("commits", path)
	}
	for _, e := range entries {
		ev := entryView{Name: e.Name, Kind: e.Kind, OID: e.OID, Size: e.Size}
		full := strings.TrimPrefix(path+"/"+e.Name, "/")
		switch e.Kind {
		case "tree":
			ev.Href = q.link("tree", full)
		case "blob", "symlink":
			ev.Href = q.link("blob", full)
		}
		p.Entries = append(p.Entries, ev)
	}
	dirsFirst(p.Entries)
	h.addLastCommits(r, q, &p)
	if name := readmeOf(entries); name != "" {
		full := strings.TrimPrefix(path+"/"+name, "/")
		var b Blob
		if _, err := getJSON(r.Context(), h.api, apiPath(q.owner, q.name, "blob", oid, full), q.token, &b); err != nil {
			h.log.Warn("web: README unreadable", zap.String("repo", q.owner+"/"+q.name), zap.String("path", full), zap.Error(err))
		} else if !b.Binary {
			p.ReadmeName = name
			if isMarkdown(name) {
				if p.Readme, err = renderMarkdown(b.Content, q.linkBase(path)); err != nil {
					p.ReadmeText = b.Content
				}
			} else {
				p.ReadmeText = b.Content
			}
		}
	}
	h.render(w, r, http.StatusOK, "tree", p)
}

type blobPage struct {
	page
	OID     string
	Path    string
	Crumbs  []crumb
	Blob    Blob
	File    fileView
	Raw     string
	History string
	Blame   string
}

func (h *Handler) blob(w http.ResponseWriter, r *http.Request) {
	q, ok := h.beginAt(w, r)
	if !ok {
		return
	}
	oid, path := q.at.Commit, q.at.Path
	var b Blob
	_, err := getJSON(r.Context(), h.api, apiPath(q.owner, q.name, "blob", oid, path), q.token, &b)
	if statusOf(err) == http.StatusNotFound && path != "" &&
		headOK(r.Context(), h.api, apiPath(q.owner, q.name, "tree", oid, path), q.token) == nil {
		// A directory: Markdown links one without its trailing "/"
		// (docs), which resolveLink cannot tell from a file's link.
		http.Redirect(w, r, q.link("tree", path), http.StatusFound)
		return
	}
	if err != nil {
		h.fail(w, r, err, 0, "")
		return
	}
	p := blobPage{page: page{Title: path + " · " + q.owner + "/" + q.name, Viewer: viewer(r), Repo: h.head(r, q, "blob", path)},
		OID: oid, Path: path, Crumbs: q.crumbs(path), Blob: b, Raw: q.link("raw", path), History: q.link("commits", path),
		Blame: q.link("blame", path)}
	if p.File, err = h.fileView(q, path, b, r.URL.Query()); err != nil {
		h.fail(w, r, nil, http.StatusBadRequest, err.Error())
		return
	}
	h.renderAround(w, r, http.StatusOK, "blob", p, p.File.Code)
	if p.File.Code != nil {
		releaseCode(p.File.Code)
	}
}

// raw streams a file's bytes from the API, sandboxed. An id needs no
// refs read.
func (h *Handler) raw(w http.ResponseWriter, r *http.Request) {
	owner, name := r.PathValue("owner"), r.PathValue("name")
	if segs := splitAt(r.PathValue("at")); len(segs) > 0 && isOID(segs[0]) {
		h.stream(w, r, apiPath(owner, name, "raw", segs[0], strings.Join(segs[1:], "/")))
		return
	}
	q, ok := h.beginAt(w, r)
	if !ok {
		return
	}
	h.stream(w, r, apiPath(owner, name, "raw", q.at.Commit, q.at.Path))
}

// archive streams a tree archive ({oid}.tar.gz or {oid}.zip) from the API.
func (h *Handler) archive(w http.ResponseWriter, r *http.Request) {
	file := r.PathValue("file")
	oid, ext, _ := strings.Cut(file, ".")
	if !isOID(oid) || (ext != "tar.gz" && ext != "zip") {
		h.fail(w, r, nil, http.StatusNotFound, "no such archive")
		return
	}
	h.stream(w, r, apiPath(r.PathValue("owner"), r.PathValue("name"), "archive", file))
}

// stream passes an API answer through unbuffered. Error answers become
// error pages so a browser never shows the API's JSON.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, path string) {
	req, err := apiRequest(r.Context(), r.Method, path, token(r))
	if err != nil {
		h.fail(w, r, err, 0, "")
		return
	}
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		req.Header.Set("If-None-Match", inm)
	}
	sw := &sandboxWriter{ResponseWriter: w}
	h.api.ServeHTTP(sw, req)
	if sw.failed != 0 {
		h.fail(w, r, &apiError{Status: sw.failed, Msg: errorMessage(sw.failed, sw.errBody), RetryAfter: w.Header().Get("Retry-After")}, 0, "")
	}
}

// sandboxWriter passes a raw or archive answer through with the sandbox
// CSP, and holds back an error answer (failed) for an error page.
type sandboxWriter struct {
	http.ResponseWriter
	wrote   bool
	failed  int
	errBody []byte // the start of an error answer (its message)
}

// maxErrBody bounds what is kept of an error answer.
const maxErrBody = 4096

func (s *sandboxWriter) WriteHeader(code int) {
	if s.wrote || s.failed != 0 {
		return
	}
	if code >= 400 {
		s.failed = code
		for k := range s.ResponseWriter.Header() {
			if k != "Content-Security-Policy" && k != "X-Content-Type-Options" && k != "Referrer-Policy" && k != "X-Frame-Options" && k != "Retry-After" {
				s.ResponseWriter.Header().Del(k)
			}
		}
		return
	}
	s.wrote = true
	s.Header().Set("Content-Security-Policy", rawCSP)
	s.ResponseWriter.WriteHeader(code)
}

func (s *sandboxWriter) Write(p []byte) (int, error) {
	s.WriteHeader(http.StatusOK)
	if s.failed != 0 {
		// The error body is replaced by a page that shows its message.
		s.errBody = append(s.errBody, p[:min(len(p), maxErrBody-len(s.errBody))]...)
		return len(p), nil
	}
	return s.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (flushes).
func (s *sandboxWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// logSize is the page size of the commit log.
const logSize = 50

type logPage struct {
	page
	Path    string
	Commits []commitView
	Next    string
	Partial bool // the page stopped looking before it was full
}

type commitView struct {
	Commit
	Href string
}

func (q *repoReq) commitViews(cs []Commit) []commitView {
	out := make([]commitView, len(cs))
	for i, c := range cs {
		out[i] = commitView{Commit: c, Href: q.href("commit", c.OID, "")}
	}
	return out
}

// history is the log from {ref}, of commits touching {path} (or the
// older spelling ?path=); ?from= is a later page's first commit, so
// paging keeps the name the log was asked by.
func (h *Handler) history(w http.ResponseWriter, r *http.Request) {
	q, ok := h.beginAt(w, r)
	if !ok {
		return
	}
	oid, path := q.at.Commit, q.at.Path
	if path == "" {
		path = strings.Trim(r.URL.Query().Get("path"), "/")
	}
	if from := r.URL.Query().Get("from"); from != "" {
		if !isOID(from) {
			h.fail(w, r, nil, http.StatusBadRequest, "from is not an object id")
			return
		}
		oid = from
	}
	v := url.Values{"n": {strconv.Itoa(logSize)}}
	if path != "" {
		v.Set("path", path)
	}
	if h.headOnly(w, r, q, apiPath(q.owner, q.name, "log", oid)+"?"+v.Encode()) {
		return
	}
	var commits []Commit
	hdr, err := getJSON(r.Context(), h.api, apiPath(q.owner, q.name, "log", oid)+"?"+v.Encode(), q.token, &commits)
	if err != nil {
		h.fail(w, r, err, 0, "")
		return
	}
	p := logPage{page: page{Title: "Commits · " + q.owner + "/" + q.name, Viewer: viewer(r), Repo: h.head(r, q, "commits", path)},
		Path: path, Commits: q.commitViews(commits)}
	if next := nextPage(hdr.Get("Link")); next != "" {
		p.Next = q.link("commits", path) + "?" + url.Values{"from": {next}}.Encode()
		// A path filter's page examines a bounded number of commits: a
		// short page with a next one stopped looking.
		p.Partial = path != "" && len(commits) < logSize
	}
	h.render(w, r, http.StatusOK, "log", p)
}

// nextPage is the commit id the log's next page starts from, taken from
// its Link header (<…/log/{oid}?…>; rel="next"); "" if there is none.
func nextPage(link string) string {
	target, params, ok := strings.Cut(link, ";")
	if !ok || !strings.Contains(params, `rel="next"`) {
		return ""
	}
	u, err := url.Parse(strings.Trim(strings.TrimSpace(target), "<>"))
	if err != nil {
		return ""
	}
	_, oid, _ := strings.Cut(u.Path, "/log/")
	if !isOID(oid) {
		return ""
	}
	return oid
}

type commitPage struct {
	page
	C       CommitDetail
	Parents []crumb
	Tree    string
	Diff    []diffFile
}

func (h *Handler) commit(w http.ResponseWriter, r *http.Request) {
	q, ok := h.beginAt(w, r)
	if !ok {
		return
	}
	if q.at.Path != "" {
		h.fail(w, r, nil, http.StatusNotFound, "a commit has no path")
		return
	}
	oid := q.at.Commit
	if h.headOnly(w, r, q, apiPath(q.owner, q.name, "commit", oid)) {
		return
	}
	var c CommitDetail
	if _, err := getJSON(r.Context(), h.api, apiPath(q.owner, q.name, "commit", oid), q.token, &c); err != nil {
		h.fail(w, r, err, 0, "")
		return
	}
	if isOID(c.OID) {
		oid = c.OID // a tag id names its commit
	}
	q.at.Commit = oid
	p := commitPage{page: page{Title: c.Subject() + " · " + q.owner + "/" + q.name, Viewer: viewer(r), Repo: h.head(r, q, "commit", "")},
		C: c, Tree: q.href("tree", oid, ""), Diff: splitDiff(c.Diff)}
	for _, par := range c.Parents {
		p.Parents = append(p.Parents, crumb{Name: shortOID(par), Href: q.href("commit", par, "")})
	}
	h.render(w, r, http.StatusOK, "commit", p)
}

// headOnly answers a HEAD request for a page built from the expensive
// answer at path (a diff, a log): the page's status comes from the API's
// HEAD, and nothing is computed or rendered. It reports whether r was
// such a request.
func (h *Handler) headOnly(w http.ResponseWriter, r *http.Request, q *repoReq, path string) bool {
	if r.Method != http.MethodHead {
		return false
	}
	if err := headOK(r.Context(), h.api, path, q.token); err != nil {
		h.fail(w, r, err, 0, "")
		return true
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "private, no-store")
	w.WriteHeader(http.StatusOK)
	return true
}

type comparePage struct {
	page
	Base, Head string
	Refs       []string
	Cmp        *Comparison
	Commits    []commitView
	Diff       []diffFile
	Error      string
}

func (h *Handler) compare(w http.ResponseWriter, r *http.Request) {
	q, ok := h.begin(w, r)
	if !ok {
		return
	}
	base, headName := strings.TrimSpace(r.URL.Query().Get("base")), strings.TrimSpace(r.URL.Query().Get("head"))
	p := comparePage{page: page{Title: "Compare · " + q.owner + "/" + q.name, Viewer: viewer(r)}, Base: base, Head: headName}
	for _, ref := range q.refs {
		if ref.Kind == "branch" || ref.Kind == "tag" {
			p.Refs = append(p.Refs, ref.Short())
		}
	}
	var headOID string
	if base != "" && headName != "" {
		ba, okB := q.resolve(base)
		ha, okH := q.resolve(headName)
		b, hd := ba.Commit, ha.Commit
		switch {
		case !okB:
			p.Error = "no branch, tag or commit named " + base
		case !okH:
			p.Error = "no branch, tag or commit named " + headName
		default:
			if h.headOnly(w, r, q, apiPath(q.owner, q.name, "compare", b+"..."+hd)) {
				return
			}
			var c Comparison
			if _, err := getJSON(r.Context(), h.api, apiPath(q.owner, q.name, "compare", b+"..."+hd), q.token, &c); err != nil {
				if st := statusOf(err); st != http.StatusNotFound && st != http.StatusBadRequest {
					h.fail(w, r, err, 0, "")
					return
				}
				p.Error = "these cannot be compared"
			} else {
				p.Cmp, p.Commits, p.Diff, headOID = &c, q.commitViews(c.Commits), splitDiff(c.Diff), hd
			}
		}
	}
	q.at = at{Commit: headOID}
	p.Repo = h.head(r, q, "tree", "")
	status := http.StatusOK
	if p.Error != "" {
		status = http.StatusNotFound
	}
	h.render(w, r, status, "compare", p)
}
