package peer

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/transport/service/gitserve"
	"github.com/rgit/rgit/transport/wire/gitproto"
	"github.com/rgit/rgit/transport/wire/peertls"
	"github.com/rgit/rgit/transport/wire/reqid"
)

// A forwarded git session is an HTTP Upgrade on the peer stream port:
//
//	POST /peer/v1/git  Authorization: Bearer <secret>, Upgrade: rgit-git,
//	  X-Rgit-Hop, X-Rgit-Service, X-Rgit-Repo (owner/name as the client
//	  wrote it), X-Rgit-Identity (the authenticated auth.Identity as JSON,
//	  scope and deploy key included; absent: anonymous),
//	  X-Rgit-Protocol (git protocol version), X-Request-Id (the session's id,
//	  package reqid), X-Rgit-Peer-Version (HeaderVersion)
//	← 101 Switching Protocols
//
// Then the client's stdin flows raw from caller to owner (a TCP half-close
// is its EOF), and the owner answers in frames: a type byte, a 4-byte
// big-endian length, the payload. frameData carries the session's output;
// one frameStatus (JSON status) ends the session. Frames are at most
// maxFrame bytes, so both ends copy with fixed buffers.

// PathGit is the session endpoint on the peer stream port.
const PathGit = "/peer/v1/git"

const (
	upgradeProto = "rgit-git"
	frameData    = 'd'
	frameStatus  = 's'
	maxFrame     = 32 << 10
	headerLen    = 5

	hdrService  = "X-Rgit-Service"
	hdrRepo     = "X-Rgit-Repo"
	hdrIdentity = "X-Rgit-Identity"
	hdrProtocol = "X-Rgit-Protocol"
)

// status ends a forwarded session.
type status struct {
	Class string `json:"class"`
	Msg   string `json:"msg,omitempty"`
}

// SessionClient forwards git sessions to owners' stream ports. It
// implements gitserve.SessionForwarder. Safe for concurrent use.
type SessionClient struct {
	dir    *Directory
	secret string
	tls    *peertls.Config
	// Mover follows moved answers (gitserve.ServeRouted finds it through
	// gitserve.MoverOf); nil: a moved answer is a 503.
	Mover gitserve.Mover
}

var _ gitserve.Mover = (*SessionClient)(nil)

// Moved implements gitserve.Mover with c.Mover.
func (c *SessionClient) Moved(ctx context.Context, r names.Repo, node string) (actors.Route, error) {
	return moved(ctx, c.Mover, r, node)
}

// WithTLS makes c speak peer TLS (tc nil: plaintext); call before use.
func (c *SessionClient) WithTLS(tc *peertls.Config) *SessionClient {
	c.tls = tc
	return c
}

// NewSessionClient returns a session forwarder using dir.
func NewSessionClient(dir *Directory, secret string) *SessionClient {
	return &SessionClient{dir: dir, secret: secret}
}

var _ gitserve.SessionForwarder = (*SessionClient)(nil)

// ForwardSession runs req on node, copying in to it and its output to out.
// It returns an error wrapping gitserve.ErrMoved when node answered,
// before the session started and before anything was read from in, that
// it no longer holds the repository, and one wrapping
// gitserve.ErrPeerConnect when node could not be reached or the
// connection was lost before it answered (nothing read from in either).
func (c *SessionClient) ForwardSession(ctx context.Context, node string, req gitserve.SessionRequest,
	in io.Reader, out io.Writer) (gitserve.Stats, error) {
	var st gitserve.Stats
	hop, err := gitserve.NextHop(ctx)
	if err != nil {
		return st, err
	}
	addr, err := c.dir.StreamAddr(node)
	if err != nil {
		return st, fmt.Errorf("forward session to %s: %w: %w", node, gitserve.ErrUnavailable, err)
	}
	d := net.Dialer{Timeout: DialTimeout, KeepAlive: 30 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return st, fmt.Errorf("forward session to %s at %s: %w: %w", node, addr, gitserve.ErrPeerConnect, err)
	}
	defer conn.Close()
	if c.tls != nil {
		tc := tls.Client(conn, c.tls.Client)
		hctx, cancel := context.WithTimeout(ctx, HandshakeTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			// Not a connect failure: the node is up, and a certificate
			// problem is no reason to move its repositories.
			return st, fmt.Errorf("forward session to %s at %s: tls: %w: %w", node, addr, gitserve.ErrUnavailable, err)
		}
		conn = tc
	}
	// Unblock the frame reader if the caller goes away.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	hreq, err := http.NewRequest(http.MethodPost, c.tls.Scheme()+"://"+addr+PathGit, nil)
	if err != nil {
		return st, fmt.Errorf("forward session to %s: %w", node, err)
	}
	h := hreq.Header
	h.Set("Authorization", "Bearer "+c.secret)
	SetVersion(h)
	h.Set("Connection", "Upgrade")
	h.Set("Upgrade", upgradeProto)
	h.Set(HeaderHop, strconv.Itoa(hop))
	h.Set(hdrService, req.Service.String())
	h.Set(hdrRepo, req.Repo.String())
	if req.Identity.Authenticated {
		b, err := json.Marshal(req.Identity)
		if err != nil {
			return st, fmt.Errorf("forward session to %s: encode identity: %w", node, err)
		}
		h.Set(hdrIdentity, string(b))
	}
	h.Set(hdrProtocol, strconv.Itoa(req.Protocol))
	if id := reqid.From(ctx); id != "" {
		h.Set(reqid.Header, id)
	}
	// Until the owner answers the upgrade nothing of in is read and the
	// owner has run nothing: a connection lost before that (the owner
	// died) fails over like a failed connect, unless the caller gave up.
	lost := func(what string, err error) error {
		if ctx.Err() != nil {
			return fmt.Errorf("forward session to %s: %s: %w (%w)", node, what, ctx.Err(), err)
		}
		return fmt.Errorf("forward session to %s at %s: %s: %w: %w", node, addr, what, gitserve.ErrPeerConnect, err)
	}
	if err := hreq.Write(conn); err != nil {
		return st, lost("send request", err)
	}
	br := bufio.NewReaderSize(conn, maxFrame+headerLen)
	resp, err := http.ReadResponse(br, hreq)
	if err != nil {
		return st, lost("read answer", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if gitserve.IsMovedResponse(resp.StatusCode, resp.Header) {
			return st, fmt.Errorf("forward session to %s: %w", node, gitserve.ErrMoved)
		}
		err := fmt.Errorf("forward session to %s: %s: %s", node, resp.Status, msg)
		if resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusLoopDetected {
			err = fmt.Errorf("%w: %w", gitserve.ErrUnavailable, err)
		}
		return st, err
	}

	// stdin → owner. The goroutine may outlive this call while blocked on
	// in (an SSH channel the client keeps open); closing conn makes its
	// next write fail, and the channel closing ends its read.
	var sent atomic.Int64
	go func() {
		n, _ := copyBuffer(conn, in)
		sent.Add(n)
		// TCP and TLS (close_notify) connections both half-close.
		if hc, ok := conn.(interface{ CloseWrite() error }); ok {
			_ = hc.CloseWrite()
		}
	}()

	stRemote, nOut, err := readFrames(br, out)
	st.BytesIn, st.BytesOut = sent.Load(), nOut
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return st, fmt.Errorf("forwarded session on %s: %w", node, err)
	}
	if c := gitserve.ParseClass(stRemote.Class); c != gitserve.OK {
		return st, &gitserve.RemoteError{Node: node, Class: c, Msg: stRemote.Msg}
	}
	return st, nil
}

// errNoStatus: the owner's stream ended without its status frame (it died
// or dropped the connection mid-session).
var errNoStatus = errors.New("session stream ended without a status")

// readFrames copies data frames to out until the status frame.
func readFrames(br *bufio.Reader, out io.Writer) (status, int64, error) {
	var hdr [headerLen]byte
	buf := make([]byte, maxFrame)
	var n int64
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = errNoStatus
			}
			return status{}, n, err
		}
		l := binary.BigEndian.Uint32(hdr[1:])
		if l > maxFrame {
			return status{}, n, fmt.Errorf("frame of %d bytes exceeds %d", l, maxFrame)
		}
		p := buf[:l]
		if _, err := io.ReadFull(br, p); err != nil {
			return status{}, n, fmt.Errorf("read frame: %w", err)
		}
		switch hdr[0] {
		case frameData:
			w, err := out.Write(p)
			n += int64(w)
			if err != nil {
				return status{}, n, fmt.Errorf("write session output: %w", err)
			}
		case frameStatus:
			var s status
			if err := json.Unmarshal(p, &s); err != nil {
				return status{}, n, fmt.Errorf("bad status frame: %w", err)
			}
			return s, n, nil
		default:
			return status{}, n, fmt.Errorf("unknown frame type %q", hdr[0])
		}
	}
}

// frameWriter writes each Write as data frames, header and payload in one
// writev, so a small pkt-line costs one syscall and no copy.
type frameWriter struct {
	conn net.Conn
	mu   sync.Mutex
}

func (f *frameWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	written := 0
	for len(p) > 0 {
		chunk := p
		if len(chunk) > maxFrame {
			chunk = chunk[:maxFrame]
		}
		if err := f.frame(frameData, chunk); err != nil {
			return written, err
		}
		written += len(chunk)
		p = p[len(chunk):]
	}
	return written, nil
}

func (f *frameWriter) frame(typ byte, p []byte) error {
	var hdr [headerLen]byte
	hdr[0] = typ
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(p)))
	bufs := net.Buffers{hdr[:], p}
	_, err := bufs.WriteTo(f.conn)
	return err
}

func (f *frameWriter) status(s status) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.frame(frameStatus, b)
}

// copyBuffer is io.Copy with a fixed 32 KiB buffer (bounded memory per
// session whatever the reader and writer types).
func copyBuffer(dst io.Writer, src io.Reader) (int64, error) {
	buf := make([]byte, 32<<10)
	return io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, buf)
}

// SessionHandler serves PathGit on the peer stream port: it runs the
// forwarded session through the gate as if the client had connected here,
// forwarding once more (up to gitserve.MaxHops) if this node's view says
// the repository moved. Mount it behind RequireBearer.
type SessionHandler struct {
	Gate     *gitserve.Gate
	Forward  gitserve.SessionForwarder // nil: never forward further
	Rerouter gitserve.Rerouter
	Agent    string
	Log      *zap.Logger
}

func (h *SessionHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	log := orNop(h.Log)
	if r.Method != http.MethodPost || r.Header.Get("Upgrade") != upgradeProto {
		http.Error(w, "expected an "+upgradeProto+" upgrade", http.StatusBadRequest)
		return
	}
	hop, ok := hops(r)
	if !ok {
		http.Error(w, "missing or bad "+HeaderHop, http.StatusBadRequest)
		return
	}
	svc, ok := gitserve.ParseService(r.Header.Get(hdrService))
	if !ok {
		http.Error(w, "bad "+hdrService, http.StatusBadRequest)
		return
	}
	repo, err := gitserve.ParsePath(r.Header.Get(hdrRepo))
	if err != nil {
		http.Error(w, "bad "+hdrRepo, http.StatusBadRequest)
		return
	}
	proto, err := strconv.Atoi(r.Header.Get(hdrProtocol))
	if err != nil || proto < 0 || proto > 2 {
		http.Error(w, "bad "+hdrProtocol, http.StatusBadRequest)
		return
	}
	id, err := parseIdentity(r.Header.Get(hdrIdentity))
	if err != nil {
		http.Error(w, "bad "+hdrIdentity, http.StatusBadRequest)
		return
	}
	// Not r.Context(): net/http cancels it when the hijacked reader sees
	// EOF, and EOF here is only the client's stdin ending (half-close)
	// while the owner still works and answers. A caller that goes away
	// shows up as failing writes instead.
	ctx := gitserve.WithHops(context.WithoutCancel(r.Context()), hop)
	ctx = reqid.With(ctx, reqid.Accept(r.Header.Get(reqid.Header)))
	log = log.With(reqid.Field(ctx))
	ctx, end, err := h.Gate.Begin(ctx, actors.KindForwarded)
	defer end()
	if err != nil {
		log.Warn("peer session refused: no session", zap.Error(err))
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	// Open before the upgrade: a repository this draining node no longer
	// holds is answered with the moved signal while the caller can still
	// send the session elsewhere (it has read nothing of the client yet).
	rt, openErr := h.Gate.Route(ctx, svc, repo, id)
	if gitserve.IsMoved(openErr) {
		log.Info("peer session for a repository this node released; answered moved",
			zap.Stringer("repo", repo), zap.Error(openErr))
		gitserve.WriteMoved(w)
		return
	}
	if rt.Session != nil {
		defer rt.Session.Close()
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		log.Error("peer session: hijack failed", zap.Error(err))
		http.Error(w, "cannot upgrade", http.StatusInternalServerError)
		return
	}
	defer conn.Close()
	// The server's deadlines were for the request; the session runs as
	// long as it moves data.
	_ = conn.SetDeadline(time.Time{})
	if _, err := io.WriteString(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+upgradeProto+"\r\n\r\n"); err != nil {
		return
	}
	if err := brw.Flush(); err != nil {
		return
	}
	fw := &frameWriter{conn: conn}
	req := gitserve.SessionRequest{Service: svc, Repo: repo, Identity: id, Protocol: proto}
	// The connection's read deadline bounds each whole fetch request, as
	// the forwarding node's own front end would.
	opt := gitproto.Options{Protocol: proto, Agent: h.Agent, Input: conn}
	// brw.Reader holds whatever of stdin arrived with the request.
	err = openErr
	if err == nil {
		_, err = h.Gate.RunRouted(ctx, h.Forward, h.Rerouter, req, rt, brw.Reader, fw, opt)
	}
	class := gitserve.Classify(err)
	s := status{Class: class.String()}
	if err != nil {
		s.Msg = err.Error()
		log.Info("peer session ended with an error", zap.String("service", svc.String()),
			zap.Stringer("repo", repo), zap.String("class", class.String()), zap.Error(err))
	} else {
		log.Debug("peer session", zap.String("service", svc.String()), zap.Stringer("repo", repo))
	}
	if err := fw.status(s); err != nil {
		log.Debug("peer session: write status", zap.Error(err))
	}
}

// parseIdentity decodes X-Rgit-Identity. A node from before scoped
// credentials sends a bare owner name: its credentials were all
// unrestricted, so that is the full identity.
func parseIdentity(h string) (auth.Identity, error) {
	switch {
	case h == "":
		return auth.Anonymous, nil
	case !strings.HasPrefix(h, "{"):
		return auth.Identity{Owner: h, Authenticated: true}, nil
	}
	var id auth.Identity
	if err := json.Unmarshal([]byte(h), &id); err != nil {
		return auth.Anonymous, err
	}
	return id, nil
}
