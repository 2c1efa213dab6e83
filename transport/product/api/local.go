package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/bitmap"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/transport/frontend/httpgit"
	"github.com/rgit/rgit/transport/product/lfs"
	"github.com/rgit/rgit/transport/service/admission"
	"github.com/rgit/rgit/transport/service/gitserve"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

// browsable is what the read API needs from a session's backend beyond
// gitproto.Backend: the objects, and which of them the refs reach
// (transport/service/engine's backend has both).
type browsable interface {
	Objects() *pack.Set
	Reachable(ctx context.Context) (*bitmap.Reach, error)
}

// Local answers read-API requests from this node's repositories. Access
// is gitserve.Gate's decision, the same as a clone's, taken from metadata
// before anything is opened; a repository another node owns is forwarded
// there (cluster mode, peer port only).
type Local struct {
	Gate *gitserve.Gate
	// Forward and Rerouter carry requests for repositories owned
	// elsewhere; nil Forward: such requests answer 503.
	Forward  gitserve.Forwarder
	Rerouter gitserve.Rerouter
	// BlobCap bounds blob content (0: DefaultBlobCap).
	BlobCap int
	// Limits bound each answer's work (zero fields: the defaults).
	Limits Limits
	// Reads admits the expensive answers (archive, commit, compare,
	// blame, log with a path) against the node's memory budget and a concurrency
	// limit; nil admits everything.
	Reads *admission.Reads
	// Metrics counts the answers' work; nil: not counted.
	Metrics *Metrics
	// LFS serves the files Git LFS pointers stand for in raw answers;
	// nil: a pointer's raw answer is the pointer.
	LFS *lfs.Content
	// Walks keeps what history walks learn of commits across requests;
	// nil: every walk reads its commits again.
	Walks *WalkMemo
	Log   *zap.Logger
}

// ServeAPI implements Origin.
func (l *Local) ServeAPI(w http.ResponseWriter, r *http.Request, q *Request, id auth.Identity) error {
	ctx, end, err := l.Gate.Begin(r.Context(), actors.KindAPI)
	defer end()
	if err != nil {
		l.fail(w, r, err)
		return nil
	}
	r = r.WithContext(ctx)
	rt, err := l.Gate.Route(ctx, gitserve.UploadPack, q.Repo, id)
	if err == nil && rt.Session == nil {
		local, err := l.forward(w, r, rt)
		if !local {
			return err
		}
		// The failover moved the repository here: this node's answer
		// is final (Open forwards nothing).
		if rt.Session, err = l.Gate.Open(ctx, gitserve.UploadPack, rt.Repo, id); err != nil {
			l.fail(w, r, err)
			return nil
		}
	}
	if err != nil && gitserve.Hops(ctx) > 0 && gitserve.IsMoved(err) {
		gitserve.WriteMoved(w)
		return nil
	}
	if err != nil {
		l.fail(w, r, err)
		return nil
	}
	sess := rt.Session
	defer sess.Close()
	b := sess.Backend()
	objs, ok := b.(browsable)
	if !ok {
		l.fail(w, r, errors.New("backend cannot be browsed"))
		return nil
	}
	public := false
	if a, ok := b.(gitserve.Authoritative); ok {
		public = a.RepoInfo().Public
	}
	s := &serving{l: l, w: w, r: r, q: q, repo: sess.Repo, public: public, rd: newReader(ctx, objs.Objects(), l.Limits)}
	s.rd.memo = l.Walks
	defer l.Metrics.done(q.Endpoint, s.rd.w)
	if q.Immutable() {
		if err := reachable(ctx, objs, q); err != nil {
			l.fail(w, r, err)
			return nil
		}
		etag := etagFor(q)
		s.headers(etag)
		if notModified(r, etag) {
			w.WriteHeader(http.StatusNotModified)
			return nil
		}
	}
	if err := s.serve(b); err != nil {
		if le, ok := asLimit(err); ok {
			l.Metrics.limit(q.Endpoint, le.Setting)
		}
		l.fail(w, r, err)
	}
	return s.cut
}

// reachable refuses the ids a request names unless the refs reach them
// now, exactly as a missing id is refused: the API shows what a fetch
// could get, never a commit of a deleted branch that gc has not removed
// yet. Everything an answer reads from there on (trees, parents, paths)
// is reachable too.
func reachable(ctx context.Context, b browsable, q *Request) error {
	reach, err := b.Reachable(ctx)
	if err != nil {
		return err
	}
	for _, id := range append([]object.ID{q.Base}, q.heads()...) {
		if !id.IsZero() && !reach.Has(id) {
			return notFound("no object %s", id)
		}
	}
	return nil
}

// forward carries the request to the node rt names, following failover
// and moved answers; local reports that the repository moved here
// instead (nothing was answered: the caller serves it). Its error is an
// answer cut short, as ServeAPI's.
func (l *Local) forward(w http.ResponseWriter, r *http.Request, rt gitserve.Routed) (local bool, _ error) {
	if l.Forward == nil {
		l.fail(w, r, gitserve.NotHere(rt))
		return false, nil
	}
	tw := &startedWriter{ResponseWriter: w}
	local, err := gitserve.FollowForward(r.Context(), l.Rerouter, gitserve.MoverOf(l.Forward, l.Rerouter), rt, http.MethodGet,
		func(node string) error { return l.Forward.Forward(tw, r, node) })
	switch {
	case local:
		return true, nil
	case err != nil && !tw.started:
		l.fail(w, r, err)
	case err != nil:
		l.logger().Warn("read API: forwarded answer failed", zap.String("path", r.URL.Path), zap.Error(err))
		return false, err
	}
	return false, nil
}

// fail answers err as a JSON error: denials as gitserve decided them
// (a private repository is 401 anonymous, 404 otherwise, like a missing
// one), unknown ids and paths 404, an answer over a limit 422 (the
// message names the limit and its setting), busy 503 with Retry-After,
// anything else 500 (logged).
func (l *Local) fail(w http.ResponseWriter, r *http.Request, err error) {
	var denied *gitserve.DeniedError
	var over *gitproto.LimitError
	switch {
	case errors.As(err, &denied):
		switch denied.Decision {
		case auth.Unauthorized:
			writeError(w, http.StatusUnauthorized, "authentication required")
		case auth.Forbidden:
			writeError(w, http.StatusForbidden, "forbidden")
		default:
			writeError(w, http.StatusNotFound, "repository not found")
		}
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.As(err, &over):
		writeError(w, http.StatusUnprocessableEntity, over.Error())
	case errors.Is(err, errNotText):
		writeError(w, http.StatusUnprocessableEntity, err.Error())
	case errors.Is(err, gitproto.ErrBusy):
		w.Header().Set("Retry-After", httpgit.RetryAfter)
		writeError(w, http.StatusServiceUnavailable, "server busy, try again")
	case gitserve.Classify(err) == gitserve.Unavailable, errors.Is(err, gitserve.ErrHopLimit):
		// The node's conditions (store down, cache disk full) as git
		// clients are told them, and like them to try again.
		l.logger().Warn("read API request unavailable", zap.String("path", r.URL.Path), zap.Error(err))
		w.Header().Set("Retry-After", httpgit.RetryAfter)
		msg := gitserve.ClientMessage(err)
		if msg == gitserve.Unavailable.Message() {
			msg = "repository temporarily unavailable"
		}
		writeError(w, http.StatusServiceUnavailable, msg)
	case r.Context().Err() != nil:
		// The client is gone; nobody reads the answer.
	default:
		l.logger().Error("read API request failed", zap.String("path", r.URL.Path), zap.Error(err))
		writeError(w, http.StatusInternalServerError, "internal error")
	}
}

// startedWriter records whether an answer has started.
type startedWriter struct {
	http.ResponseWriter
	started bool
}

func (t *startedWriter) WriteHeader(code int) {
	if code >= 200 {
		t.started = true
	}
	t.ResponseWriter.WriteHeader(code)
}

func (t *startedWriter) Write(p []byte) (int, error) {
	t.started = true
	return t.ResponseWriter.Write(p)
}

func (t *startedWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// serving is one request being answered from local objects.
type serving struct {
	l      *Local
	w      http.ResponseWriter
	r      *http.Request
	q      *Request
	public bool
	rd     reader
	// cut is set when an answer was cut short after it started.
	cut error
	// repo is the repository in its canonical spelling.
	repo names.Repo
}

// headers sets the caching headers: immutable and public for object-id
// answers of public repositories, 5 s for public refs, never stored for
// private repositories.
func (s *serving) headers(etag string) {
	h := s.w.Header()
	switch {
	case !s.public:
		h.Set("Cache-Control", ccPrivate)
	case s.q.Immutable():
		h.Set("Cache-Control", ccImmutable)
	default:
		h.Set("Cache-Control", ccRefs)
	}
	if !s.public {
		h.Set("Vary", "Authorization")
	}
	h.Set("ETag", etag)
	h.Set("X-Content-Type-Options", "nosniff")
}

func (s *serving) json(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode answer: %w", err)
	}
	b = append(b, '\n')
	h := s.w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	s.w.WriteHeader(http.StatusOK)
	s.w.Write(b)
	return nil
}

func (s *serving) blobCap() int {
	if s.l.BlobCap > 0 {
		return s.l.BlobCap
	}
	return DefaultBlobCap
}

// refAnswer is one entry of refs.
type refAnswer struct {
	Name   string `json:"name"`
	OID    string `json:"oid,omitempty"`
	Kind   string `json:"kind"`
	Peeled string `json:"peeled,omitempty"`
	// Target is HEAD's symref target (only on the HEAD entry).
	Target string `json:"target,omitempty"`
}

func refKind(name string) string {
	switch {
	case strings.HasPrefix(name, "refs/heads/"):
		return "branch"
	case strings.HasPrefix(name, "refs/tags/"):
		return "tag"
	}
	return "other"
}

func (s *serving) serve(b gitproto.Backend) error {
	q, rd := s.q, s.rd
	if s.r.Method == http.MethodHead && q.Endpoint != Refs && q.Endpoint != Raw {
		return s.head()
	}
	if est := s.estimate(); est > 0 {
		release, ok := s.l.Reads.Reserve(s.r.Context(), est)
		if !ok {
			return fmt.Errorf("%w: %s answer of about %d MiB refused by read admission", gitproto.ErrBusy, q.Endpoint, est>>20)
		}
		defer release()
	}
	switch q.Endpoint {
	case Refs:
		snap, err := b.Snapshot(s.r.Context())
		if err != nil {
			return fmt.Errorf("refs of %s: %w", q.Repo, err)
		}
		out := make([]refAnswer, 0, len(snap.Refs)+1)
		if snap.Head != "" {
			head := refAnswer{Name: "HEAD", Kind: "other", Target: snap.Head}
			for _, ref := range snap.Refs {
				if ref.Name == snap.Head {
					head.OID = ref.ID.String()
				}
			}
			out = append(out, head)
		}
		for _, ref := range snap.Refs {
			a := refAnswer{Name: ref.Name, OID: ref.ID.String(), Kind: refKind(ref.Name)}
			if !ref.Peeled.IsZero() {
				a.Peeled = ref.Peeled.String()
			}
			out = append(out, a)
		}
		body, err := json.Marshal(out)
		if err != nil {
			return err
		}
		etag := etagOfBody(body)
		s.headers(etag)
		if notModified(s.r, etag) {
			s.w.WriteHeader(http.StatusNotModified)
			return nil
		}
		return s.json(json.RawMessage(body))
	case Tree:
		entries, err := rd.tree(q.OID, q.Sub)
		if err != nil {
			return err
		}
		return s.json(entries)
	case Blob:
		id, data, err := rd.blobAt(q.OID, q.Sub)
		if err != nil {
			return err
		}
		a := newBlobAnswer(id, data, s.blobCap())
		if p, ok := lfs.ParsePointer(data); ok {
			a.LFS = &lfsAnswer{OID: p.OID, Size: p.Size}
		}
		return s.json(a)
	case Raw:
		_, size, rc, err := rd.openBlobAt(q.OID, q.Sub)
		if err != nil {
			return err
		}
		defer rc.Close()
		// The content type is sniffed from the head, as much as
		// isBinary looks at; the rest streams behind it.
		head := make([]byte, min(size, binarySniff))
		if _, err := io.ReadFull(rc, head); err != nil {
			return fmt.Errorf("read %s: %w", q.OID, err)
		}
		if served, err := s.lfsRaw(head, size); served || err != nil {
			return err
		}
		h := s.w.Header()
		h.Set("Content-Type", rawType(head))
		h.Set("Content-Length", strconv.FormatInt(size, 10))
		// Repository content is hostile: opened directly, it runs no
		// script and loads nothing.
		h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
		s.w.WriteHeader(http.StatusOK)
		if s.r.Method == http.MethodHead {
			return nil
		}
		if _, err := s.w.Write(head); err != nil {
			s.logWriteErr(err)
			return nil
		}
		_, err = io.Copy(s.w, rc)
		s.logWriteErr(err)
		return nil
	case Log:
		// A page may end early (Link next, fewer than n commits) where
		// a path filter examined its most commits or entries.
		commits, next, err := rd.log(q.OID, q.N, q.Sub)
		if err != nil {
			return err
		}
		if !next.IsZero() {
			nq := *q
			nq.OID = next
			s.w.Header().Set("Link", "<"+nq.Path()+`>; rel="next"`)
		}
		return s.json(commits)
	case Commit:
		c, err := rd.commitWithDiff(q.OID)
		if err != nil {
			return err
		}
		s.limited(c.cutShort)
		return s.json(c)
	case Blame:
		a, err := rd.blame(q.OID, q.Sub)
		if err != nil {
			return err
		}
		s.limited(a.cutShort)
		return s.json(a)
	case Compare:
		c, err := rd.compare(q.Base, q.OID)
		if err != nil {
			return err
		}
		s.limited(c.cutShort)
		return s.json(c)
	case Tag:
		t, err := rd.tag(q.OID)
		if err != nil {
			return err
		}
		return s.json(t)
	case AheadBehind:
		ab, err := rd.aheadBehind(q.Base, q.heads(), MaxAheadBehindWalk)
		if err != nil {
			return err
		}
		return s.json(ab)
	case Commits:
		cs, err := rd.commits(q.heads())
		if err != nil {
			return err
		}
		return s.json(cs)
	case Search:
		return s.search()
	case LastCommit:
		a, err := rd.lastCommits(q.OID, q.Sub, q.Timeout)
		if err != nil {
			return err
		}
		s.limited(a.cutShort)
		return s.json(a)
	case Archive:
		// Sized first: an archive over its limits is refused before its
		// first byte.
		tree, mtime, err := rd.openArchive(q.OID)
		if err != nil {
			return err
		}
		s.archiveHeaders()
		s.w.WriteHeader(http.StatusOK)
		write := rd.writeTarGz
		if q.Format == "zip" {
			write = rd.writeZip
		}
		// Streamed: after the first byte an error can only cut the
		// answer short (the archive's own trailer is then missing).
		s.logWriteErr(write(s.w, q.Repo.Name(), q.OID, tree, mtime))
		return nil
	}
	return fmt.Errorf("%w: unknown endpoint %q", ErrBadRequest, q.Endpoint)
}

// search answers a search page: its Link names the next page; a page a
// budget stopped says so (partial) and is counted, and one the time
// budget stopped is stored by nobody, since another try may get further.
func (s *serving) search() error {
	a, err := s.rd.search(s.q.OID, s.q.Search, time.Now)
	if err != nil {
		return err
	}
	if a.Next != "" {
		nq := *s.q
		ns := *s.q.Search
		ns.Page, _ = parseCursor(a.Next)
		nq.Search = &ns
		s.w.Header().Set("Link", "<"+nq.Path()+`>; rel="next"`)
	}
	if a.Partial {
		s.l.Metrics.limit(Search, a.limit)
	}
	if a.timedOut {
		s.w.Header().Set("Cache-Control", "no-store")
		s.w.Header().Del("ETag")
	}
	return s.json(a)
}

// lfsRaw answers raw for a Git LFS pointer (blob is all of it) with the
// file it stands for, when the store holds it. Otherwise the pointer is
// served, never cached: its object may be uploaded later.
func (s *serving) lfsRaw(blob []byte, size int64) (bool, error) {
	if s.l.LFS == nil || int64(len(blob)) != size {
		return false, nil
	}
	p, ok := lfs.ParsePointer(blob)
	if !ok {
		return false, nil
	}
	served, err := s.l.LFS.ServeRaw(s.w, s.r, s.repo, p, rawType)
	if !served && err == nil {
		s.w.Header().Set("Cache-Control", ccPrivate)
	}
	return served, err
}

// estimate is what an expensive answer (archive, commit, compare, blame,
// log with a path) reserves in the node's memory budget before it starts; 0
// for the cheap ones, which are not admitted.
func (s *serving) estimate() int64 {
	switch s.q.Endpoint {
	case Commit, Compare:
		return s.rd.w.lim.diffEstimate()
	case Blame:
		return s.rd.w.lim.blameEstimate()
	case Archive:
		return archiveEstimate
	case Search:
		return s.rd.w.lim.searchEstimate()
	case Log:
		if len(s.q.Sub) > 0 {
			return logEstimate
		}
	case LastCommit:
		return logEstimate
	}
	return 0
}

// limited notes an answer a limit cut short; one the time budget cut is
// not stored by anyone, since another try may get further.
func (s *serving) limited(d cutShort) {
	if d.limit != nil {
		s.l.Metrics.limit(s.q.Endpoint, d.limit.Setting)
	}
	if d.timedOut {
		s.w.Header().Set("Cache-Control", "no-store")
		s.w.Header().Del("ETag")
	}
}

// archiveHeaders are an archive's type and file name.
func (s *serving) archiveHeaders() {
	h := s.w.Header()
	file := archivePrefix(s.q.Repo.Name(), s.q.OID)
	h.Set("Content-Disposition", `attachment; filename="`+file[:len(file)-1]+"."+s.q.Format+`"`)
	h.Set("Content-Type", "application/gzip")
	if s.q.Format == "zip" {
		h.Set("Content-Type", "application/zip")
	}
}

// head answers HEAD for an object-id endpoint: the status and headers a
// GET would get, from the cheap checks alone (the objects exist and are
// what the endpoint needs; a tree or an archive is within its limits).
// No diff, log or archive is computed, so no Content-Length is sent.
func (s *serving) head() error {
	q, rd := s.q, s.rd
	h := s.w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	var err error
	switch q.Endpoint {
	case Tree, LastCommit:
		_, _, _, err = rd.treeData(q.OID, q.Sub)
	case Blob:
		var rc io.ReadCloser
		if _, _, rc, err = rd.openBlobAt(q.OID, q.Sub); err == nil {
			rc.Close()
		}
	case Log, Commit:
		_, _, err = rd.commit(q.OID)
	case Blame:
		err = rd.blameTarget(q.OID, q.Sub)
	case Tag:
		_, err = rd.tag(q.OID)
	case Search:
		_, _, err = rd.peelTo(q.OID, object.Tree)
	case Compare, AheadBehind:
		for _, id := range append([]object.ID{q.Base}, q.heads()...) {
			if _, _, err = rd.commit(id); err != nil {
				break
			}
		}
	case Archive:
		if _, _, err = rd.openArchive(q.OID); err == nil {
			s.archiveHeaders()
		}
	}
	if err != nil {
		return err
	}
	s.w.WriteHeader(http.StatusOK)
	return nil
}

// logWriteErr records an answer cut short after it started (a failed
// read or write), logging it unless the client went away.
func (s *serving) logWriteErr(err error) {
	if err == nil {
		return
	}
	s.cut = fmt.Errorf("answer cut short: %w", err)
	if s.r.Context().Err() == nil {
		s.l.logger().Warn("read API answer cut short", zap.String("path", s.r.URL.Path), zap.Error(err))
	}
}

// rawType is raw's content type: images the browser can show as such,
// text as plain text, everything else as bytes. Never HTML or SVG: the
// bytes are the repository's, not ours.
func rawType(data []byte) string {
	ct := http.DetectContentType(data)
	switch {
	case strings.HasPrefix(ct, "image/") && !strings.Contains(ct, "svg"):
		return ct
	case !isBinary(data):
		return "text/plain; charset=utf-8"
	}
	return "application/octet-stream"
}

func (l *Local) logger() *zap.Logger {
	if l.Log == nil {
		return zap.NewNop()
	}
	return l.Log
}
