package lfs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/transport/frontend/sshgit"
	"github.com/rgit/rgit/transport/service/gitserve"
	"github.com/rgit/rgit/transport/wire/gitproto"
	"github.com/rgit/rgit/transport/wire/pktline"
)

// The SSH commands (sshgit.Extra):
//
//	git-lfs-authenticate <path> upload|download
//	git-lfs-transfer <path> upload|download
//
// Both decide access first, as git over SSH does (a repository the key
// may not see is "not found"; download needs read, upload write).
// git-lfs-authenticate answers the HTTP endpoint and a RemoteAuth header
// valid for AuthTTL; git-lfs-transfer speaks git-lfs's pure SSH protocol
// (docs/proposals/ssh_adapter.md), the bytes going over the connection.
// Its batch and lock commands are the HTTP endpoints called in process
// with a ticket of the session's identity, so they are decided, and
// forwarded to the repository's owner, exactly as HTTP requests are.
const (
	cmdAuthenticate = "git-lfs-authenticate"
	cmdTransfer     = "git-lfs-transfer"
)

// AuthTTL is how long git-lfs-authenticate's header is good for; git-lfs
// asks again when it runs out. A key removed meanwhile keeps it that long.
const AuthTTL = 5 * time.Minute

// SSH is the LFS SSH commands of a Server (sshgit.Extra).
type SSH struct {
	s *Server
	// httpPort is the public HTTP port, for git-lfs-authenticate's href
	// when there is no RGIT_PUBLIC_URL.
	httpPort string
}

var _ sshgit.Extra = (*SSH)(nil)

// SSH returns the SSH commands; httpPort is the HTTP port SSH clients
// are told to use when RGIT_PUBLIC_URL is unset.
func (s *Server) SSH(httpPort string) *SSH { return &SSH{s: s, httpPort: httpPort} }

// Serves implements sshgit.Extra.
func (x *SSH) Serves(verb string) bool { return verb == cmdAuthenticate || verb == cmdTransfer }

// usage is a malformed command line (exit status 1 with the message).
type usage struct{ msg string }

func (e *usage) Error() string { return e.msg }
func (e *usage) Unwrap() error { return gitproto.ErrProtocol }

// parseCommand splits "<verb> <path> <operation>"; the path may be single
// quoted and has no shell characters (as sshgit.ParseCommand).
func parseCommand(line string) (verb, path, op string, err error) {
	f := strings.Split(line, " ")
	if len(f) != 3 {
		return "", "", "", &usage{f[0] + ": want <path> upload|download"}
	}
	verb, path, op = f[0], f[1], f[2]
	if len(path) >= 2 && path[0] == '\'' && path[len(path)-1] == '\'' {
		path = path[1 : len(path)-1]
	}
	if path == "" || strings.ContainsAny(path, "' \t\r\n\\\"`$;&|<>*?~") {
		return "", "", "", &usage{verb + ": invalid repository path"}
	}
	if op != opUpload && op != opDownload {
		return "", "", "", &usage{verb + ": operation must be upload or download, not " + strconv.Quote(op)}
	}
	return verb, path, op, nil
}

// ServeSSH implements sshgit.Extra.
func (x *SSH) ServeSSH(ctx context.Context, c sshgit.Command) error {
	s := x.s
	verb, path, op, err := parseCommand(c.Line)
	if err != nil {
		return err
	}
	*c.Op = strings.TrimPrefix(verb, "git-") + "-" + op
	svc := gitserve.UploadPack
	if op == opUpload {
		svc = gitserve.ReceivePack
	}
	rp, err := gitserve.ParsePath(path)
	if err != nil {
		return gitserve.BadPath(svc, path, c.Identity, err)
	}
	// Access is decided here, before anything is answered; the owner
	// decides again for every batch and lock request.
	rt, err := s.gate.Route(ctx, svc, rp, c.Identity)
	if err != nil {
		return err
	}
	if rt.Session != nil {
		rt.Session.Close()
	}
	id := narrow(c.Identity, rt.Repo, op)
	if verb == cmdAuthenticate {
		return x.authenticate(c, rt.Repo, id)
	}
	t := &transferSession{s: s, ctx: ctx, repo: rt.Repo, op: op, id: id, written: map[string]bool{},
		r: pktline.NewReader(bufio.NewReader(c.In)), bw: bufio.NewWriterSize(c.Out, 64<<10)}
	t.w = pktline.NewWriter(t.bw)
	return t.run()
}

// narrow is id limited to r, and to reading for a download: what the
// tickets of an SSH session carry.
func narrow(id auth.Identity, r names.Repo, op string) auth.Identity {
	id.Repos = []string{r.String()}
	if op == opDownload {
		id.ReadOnly = true
	}
	return id
}

// authenticate answers git-lfs-authenticate: the HTTP endpoint and a
// header that authenticates as the key's identity there.
func (x *SSH) authenticate(c sshgit.Command, r names.Repo, id auth.Identity) error {
	s := x.s
	t := ticket{Op: opAuth, Owner: r.Owner(), Name: r.Name(), Exp: s.now().Add(AuthTTL).Unix(), ID: &id}
	ans := struct {
		Href      string            `json:"href"`
		Header    map[string]string `json:"header"`
		ExpiresIn int               `json:"expires_in"`
	}{repoURL(x.base(c.LocalAddr), r), map[string]string{"Authorization": "RemoteAuth " + s.sign.sign(t)}, int(AuthTTL / time.Second)}
	b, _ := json.Marshal(ans) // cannot fail: plain fields only
	_, err := c.Out.Write(append(b, '\n'))
	return err
}

// base is the HTTP base URL for an SSH client: RGIT_PUBLIC_URL, else
// the host it connected to with the HTTP port.
func (x *SSH) base(local net.Addr) string {
	if x.s.publicURL != "" {
		return x.s.publicURL
	}
	host := "localhost"
	if local != nil {
		if h, _, err := net.SplitHostPort(local.String()); err == nil {
			host = h
		}
	}
	return "http://" + net.JoinHostPort(host, x.httpPort)
}

// transferSession is one git-lfs-transfer connection.
type transferSession struct {
	s    *Server
	ctx  context.Context
	repo names.Repo
	op   string
	id   auth.Identity
	// written are the objects this session uploaded, checked as they
	// streamed: verify-object needs no second read of them.
	written map[string]bool
	r       *pktline.Reader
	w       *pktline.Writer
	bw      *bufio.Writer
}

// request is one command: its line, its arguments and whether a delimiter
// (and so lines or data) follows them.
type request struct {
	cmd   string
	args  map[string]string
	delim bool
}

// maxArgs bounds a request's arguments.
const maxArgs = 64

func (t *transferSession) readRequest() (request, error) {
	kind, p, err := t.r.ReadPacket()
	if err != nil {
		return request{}, err
	}
	if kind != pktline.Data {
		return request{}, fmt.Errorf("%w: expected a command, got a %s packet", gitproto.ErrProtocol, kind)
	}
	q := request{cmd: strings.TrimSuffix(string(p), "\n"), args: map[string]string{}}
	for {
		kind, p, err := t.r.ReadPacket()
		switch {
		case err != nil:
			return q, err
		case kind == pktline.Delim:
			q.delim = true
			return q, nil
		case kind != pktline.Data:
			return q, nil
		case len(q.args) == maxArgs:
			return q, fmt.Errorf("%w: more than %d arguments", gitproto.ErrProtocol, maxArgs)
		}
		k, v, _ := strings.Cut(strings.TrimSuffix(string(p), "\n"), "=")
		q.args[k] = v
	}
}

// readLines reads text lines up to the flush; past max it reads on and
// reports over.
func (t *transferSession) readLines(max int) (lines []string, over bool, err error) {
	for {
		kind, p, err := t.r.ReadPacket()
		if err != nil {
			return nil, false, err
		}
		if kind != pktline.Data {
			return lines, over, nil
		}
		if len(lines) == max {
			over = true
			continue
		}
		lines = append(lines, strings.TrimSuffix(string(p), "\n"))
	}
}

// data reads the binary data packets of a request up to its flush.
type data struct {
	r    *pktline.Reader
	rest []byte
	done bool
}

func (d *data) Read(p []byte) (int, error) {
	for len(d.rest) == 0 {
		if d.done {
			return 0, io.EOF
		}
		kind, b, err := d.r.ReadPacket()
		if err != nil {
			return 0, err
		}
		if kind != pktline.Data {
			d.done = true
			return 0, io.EOF
		}
		d.rest = b
	}
	n := copy(p, d.rest)
	d.rest = d.rest[n:]
	return n, nil
}

// maxDrain bounds what is read past a refused upload's declared size to
// find its end; a client sending more loses the connection.
const maxDrain = 64 << 20

// drain reads d to its flush, at most limit bytes.
func (d *data) drain(limit int64) error {
	n, err := io.Copy(io.Discard, io.LimitReader(d, limit+1))
	if err == nil && n > limit {
		err = fmt.Errorf("%w: upload data runs past its size", gitproto.ErrProtocol)
	}
	return err
}

// status writes a response: its status, arguments, and after a delimiter
// its lines (when lines is not nil), then a flush.
func (t *transferSession) status(code int, args []string, lines []string) error {
	if err := t.w.Writef("status %d\n", code); err != nil {
		return err
	}
	for _, a := range args {
		if err := t.w.WriteString(a + "\n"); err != nil {
			return err
		}
	}
	if lines != nil {
		if err := t.w.Delim(); err != nil {
			return err
		}
		for _, l := range lines {
			if err := t.w.WriteString(l + "\n"); err != nil {
				return err
			}
		}
	}
	if err := t.w.Flush(); err != nil {
		return err
	}
	return t.bw.Flush()
}

// fail answers an error status with its message.
func (t *transferSession) fail(code int, msg string) error {
	return t.status(code, nil, []string{msg})
}

// failErr answers err with the status and message the HTTP API would.
func (t *transferSession) failErr(err error) error {
	rec := &recorder{header: http.Header{}}
	code := t.s.fail(rec, (&http.Request{Method: "SSH", URL: &url.URL{Path: t.repo.String()}}).WithContext(t.ctx), err)
	var m message
	_ = json.Unmarshal(rec.body.Bytes(), &m)
	return t.fail(code, m.Message)
}

func (t *transferSession) run() error {
	if err := t.w.WriteString("version=1\n"); err != nil {
		return err
	}
	if err := t.w.WriteString("locking\n"); err != nil {
		return err
	}
	if err := t.w.Flush(); err != nil {
		return err
	}
	if err := t.bw.Flush(); err != nil {
		return err
	}
	for {
		q, err := t.readRequest()
		if errors.Is(err, io.EOF) {
			return nil // the client went away without quit
		}
		if err != nil {
			return err
		}
		verb, arg, _ := strings.Cut(q.cmd, " ")
		if verb == "quit" {
			return t.status(http.StatusOK, nil, nil)
		}
		if err := t.serve(verb, arg, q); err != nil {
			return err
		}
	}
}

// serve answers one request; its error ends the session.
func (t *transferSession) serve(verb, arg string, q request) error {
	switch verb {
	case "version":
		if arg != "1" {
			return t.fail(http.StatusBadRequest, "unsupported version "+arg+" (version 1 is)")
		}
		return t.status(http.StatusOK, nil, nil)
	case "batch":
		return t.batch(q)
	case "get-object":
		return t.getObject(arg)
	case "put-object":
		return t.putObject(arg, q)
	case "verify-object":
		return t.verifyObject(arg, q)
	case "lock":
		return t.lock(q)
	case "list-lock", "list-locks": // git-lfs 3.3 sends the second for verify
		return t.listLocks(q)
	case "unlock":
		return t.unlock(arg, q)
	}
	if q.delim {
		if _, _, err := t.readLines(0); err != nil {
			return err
		}
	}
	return t.fail(http.StatusBadRequest, "unknown command "+strconv.Quote(verb))
}

// forUpload reports whether the session may change the repository; in a
// session opened for download it has answered 403 when it says no.
func (t *transferSession) forUpload() (bool, error) {
	if t.op == opUpload {
		return true, nil
	}
	return false, t.fail(http.StatusForbidden, "this connection was opened for download (git-lfs-transfer … upload changes the repository)")
}

// call runs one of the HTTP endpoints in process as the session's
// identity (routed, and forwarded to the owner, like any request) and
// returns its status and body.
func (t *transferSession) call(method, path string, body any) (int, []byte) {
	var rd io.Reader = http.NoBody
	if body != nil {
		b, _ := json.Marshal(body) // cannot fail: plain fields only
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.ctx, method, "http://rgit.invalid/"+t.repo.String()+".git/info/lfs/"+path, rd)
	if err != nil {
		return http.StatusInternalServerError, []byte(`{"message":"internal error"}`)
	}
	id := t.id
	tk := ticket{Op: opAuth, Owner: t.repo.Owner(), Name: t.repo.Name(), Exp: t.s.now().Add(time.Minute).Unix(), ID: &id}
	req.Header.Set("Authorization", "RemoteAuth "+t.s.sign.sign(tk))
	req.Header.Set("Content-Type", contentType)
	req.RemoteAddr = "ssh"
	rec := &recorder{header: http.Header{}, limit: maxCallAnswer}
	t.s.mux.ServeHTTP(rec, req)
	if rec.code == 0 {
		rec.code = http.StatusOK
	}
	if rec.over {
		return http.StatusInternalServerError, []byte(`{"message":"answer too large"}`)
	}
	return rec.code, rec.body.Bytes()
}

// maxCallAnswer bounds an in-process answer (a batch of the most objects
// with their actions fits many times over).
const maxCallAnswer = 64 << 20

// messageOf is the message of an error answer.
func messageOf(body []byte) string {
	var m message
	if json.Unmarshal(body, &m) != nil || m.Message == "" {
		return "request failed"
	}
	return m.Message
}

// batch answers the batch command: the HTTP batch with the ssh transfer,
// one line per object and action. A download's missing object is a noop
// line (git-lfs reports it missing); any refused upload fails the batch
// with that object's status and message.
func (t *transferSession) batch(q request) error {
	var lines []string
	var over bool
	var err error
	if q.delim {
		if lines, over, err = t.readLines(t.s.limits.MaxBatchObjects); err != nil {
			return err
		}
	}
	if over {
		return t.failErr(t.s.limits.tooManyObjects())
	}
	req := batchRequest{Operation: t.op, Transfers: []string{transferSSH}, HashAlgo: q.args["hash-algo"]}
	if ref := q.args["refname"]; ref != "" {
		req.Ref = &refSpec{Name: ref}
	}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 2 {
			return t.fail(http.StatusBadRequest, "malformed object line "+strconv.Quote(l))
		}
		size, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return t.fail(http.StatusBadRequest, "malformed object size "+strconv.Quote(f[1]))
		}
		req.Objects = append(req.Objects, objectSpec{OID: f[0], Size: size})
	}
	code, body := t.call(http.MethodPost, "objects/batch", req)
	if code != http.StatusOK {
		return t.fail(code, messageOf(body))
	}
	var resp batchResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return fmt.Errorf("decode batch answer: %w", err)
	}
	out := make([]string, 0, len(resp.Objects))
	for _, o := range resp.Objects {
		prefix := o.OID + " " + strconv.FormatInt(o.Size, 10) + " "
		switch {
		case o.Error != nil && t.op == opUpload:
			return t.fail(o.Error.Code, o.OID+": "+o.Error.Message)
		case len(o.Actions) == 0:
			out = append(out, prefix+"noop")
		}
		for _, kind := range []string{opDownload, opUpload} {
			if a, ok := o.Actions[kind]; ok {
				out = append(out, prefix+kind+" expires-in="+strconv.Itoa(a.ExpiresIn))
			}
		}
	}
	return t.status(http.StatusOK, []string{"hash-algo=sha256"}, out)
}

// getObject streams an object: its size, then its bytes.
func (t *transferSession) getObject(oid string) error {
	if !repo.ValidLFSOID(oid) {
		return t.fail(http.StatusUnprocessableEntity, "invalid object id")
	}
	rc, size, err := t.s.objects.open(t.ctx, t.repo, oid, 0)
	if err != nil {
		return t.failErr(err)
	}
	defer rc.Close()
	if err := t.w.Writef("status %d\n", http.StatusOK); err != nil {
		return err
	}
	if err := t.w.Writef("size=%d\n", size); err != nil {
		return err
	}
	if err := t.w.Delim(); err != nil {
		return err
	}
	buf := make([]byte, pktline.MaxPayload)
	var sent int64
	defer func() { t.s.metrics.nodeBytes(opDownload, sent) }()
	for {
		n, rerr := rc.Read(buf)
		if n > 0 {
			if _, err := t.w.Write(buf[:n]); err != nil {
				return err
			}
			sent += int64(n)
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			// Nothing in the protocol says "failed" mid-object: the
			// connection ends and the client retries.
			return fmt.Errorf("read %s after %d bytes: %w", oid, sent, rerr)
		}
	}
	if sent != size {
		return fmt.Errorf("read %s: %d bytes, not %d", oid, sent, size)
	}
	if err := t.w.Flush(); err != nil {
		return err
	}
	return t.bw.Flush()
}

// objectArgs reads an object command's id and its size argument.
func objectArgs(oid string, q request) (int64, error) {
	if !repo.ValidLFSOID(oid) {
		return 0, fmt.Errorf("%w: invalid object id", errBadRequest)
	}
	size, err := strconv.ParseInt(q.args["size"], 10, 64)
	if err != nil || size < 0 {
		return 0, fmt.Errorf("%w: missing or bad size argument", errBadRequest)
	}
	return size, nil
}

// putObject stores an object from the request's data, checked as it
// streams (objects.put).
func (t *transferSession) putObject(oid string, q request) error {
	if !q.delim {
		return t.fail(http.StatusBadRequest, "put-object: no data")
	}
	d := &data{r: t.r}
	size, err := objectArgs(oid, q)
	if err == nil && size > t.s.limits.MaxObjectSize {
		err = t.s.limits.objectTooLarge()
	}
	if err == nil && t.op != opUpload {
		err = &gitserve.DeniedError{Decision: auth.Forbidden, Identity: t.id}
	}
	if err != nil {
		if derr := d.drain(maxDrain); derr != nil {
			return derr
		}
		return t.failErr(err)
	}
	n, err := t.s.objects.put(t.ctx, t.repo, oid, size, d)
	t.s.metrics.nodeBytes(opUpload, n)
	// A refused body was not read to its end.
	if derr := d.drain(maxDrain); derr != nil {
		return derr
	}
	if err != nil {
		return t.failErr(err)
	}
	t.written[oid] = true
	return t.status(http.StatusOK, nil, nil)
}

// verifyObject confirms an uploaded object (objects.verify).
func (t *transferSession) verifyObject(oid string, q request) error {
	if q.delim {
		if _, _, err := t.readLines(0); err != nil {
			return err
		}
	}
	if ok, err := t.forUpload(); !ok {
		return err
	}
	size, err := objectArgs(oid, q)
	if err == nil {
		err = t.s.objects.verify(t.ctx, t.repo, oid, size, t.written[oid])
	}
	if err != nil {
		return t.failErr(err)
	}
	return t.status(http.StatusOK, nil, nil)
}

// lockArgs are a lock's attributes as the SSH protocol carries them.
func lockArgs(l lockJSON) []string {
	name := ""
	if l.Owner != nil {
		name = l.Owner.Name
	}
	return []string{"id=" + l.ID, "path=" + l.Path, "locked-at=" + l.LockedAt, "ownername=" + name}
}

// lockResult answers a lock or unlock call: success and a conflict carry
// the lock as arguments, a conflict its message too.
func (t *transferSession) lockResult(code int, body []byte) error {
	var a lockAnswer
	if (code/100 == 2 || code == http.StatusConflict) && json.Unmarshal(body, &a) == nil && a.Lock != nil {
		var lines []string
		if code == http.StatusConflict {
			lines = []string{a.Message}
		}
		return t.status(code, lockArgs(*a.Lock), lines)
	}
	return t.fail(code, messageOf(body))
}

func (t *transferSession) lock(q request) error {
	if q.delim {
		if _, _, err := t.readLines(0); err != nil {
			return err
		}
	}
	if ok, err := t.forUpload(); !ok {
		return err
	}
	req := createLockRequest{Path: q.args["path"]}
	if ref := q.args["refname"]; ref != "" {
		req.Ref = &refSpec{Name: ref}
	}
	return t.lockResult(t.call(http.MethodPost, "locks", req))
}

func (t *transferSession) unlock(id string, q request) error {
	if q.delim {
		if _, _, err := t.readLines(0); err != nil {
			return err
		}
	}
	if ok, err := t.forUpload(); !ok {
		return err
	}
	return t.lockResult(t.call(http.MethodPost, "locks/"+url.PathEscape(id)+"/unlock", unlockRequest{Force: q.args["force"] == "true"}))
}

// listLocks answers list-lock: each lock as lines naming its id; in an
// upload session each says whether it is the caller's ("owner … ours").
func (t *transferSession) listLocks(q request) error {
	if q.delim {
		if _, _, err := t.readLines(0); err != nil {
			return err
		}
	}
	v := url.Values{}
	for _, k := range []string{"path", "id", "cursor", "limit"} {
		if s := q.args[k]; s != "" {
			v.Set(k, s)
		}
	}
	code, body := t.call(http.MethodGet, "locks?"+v.Encode(), nil)
	if code != http.StatusOK {
		return t.fail(code, messageOf(body))
	}
	var list lockList
	if err := json.Unmarshal(body, &list); err != nil {
		return fmt.Errorf("decode lock list: %w", err)
	}
	var args []string
	if list.NextCursor != "" {
		args = append(args, "next-cursor="+list.NextCursor)
	}
	lines := []string{}
	me := holder(t.id)
	for _, l := range list.Locks {
		name := ""
		if l.Owner != nil {
			name = l.Owner.Name
		}
		lines = append(lines, "lock "+l.ID, "path "+l.ID+" "+l.Path, "locked-at "+l.ID+" "+l.LockedAt, "ownername "+l.ID+" "+name)
		if t.op == opUpload {
			who := "theirs"
			if repo.SameHolder(name, me) {
				who = "ours"
			}
			lines = append(lines, "owner "+l.ID+" "+who)
		}
	}
	return t.status(http.StatusOK, args, lines)
}

// recorder keeps an in-process answer, up to limit bytes (0: none kept).
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
	limit  int
	over   bool
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	if r.limit > 0 && r.body.Len()+len(p) > r.limit {
		r.over = true
		return len(p), nil
	}
	r.body.Write(p)
	return len(p), nil
}

// Flush lets a forwarding proxy flush into it.
func (r *recorder) Flush() {}
