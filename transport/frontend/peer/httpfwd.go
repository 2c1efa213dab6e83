package peer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/transport/service/gitserve"
	"github.com/rgit/rgit/transport/wire/peertls"
	"github.com/rgit/rgit/transport/wire/reqid"
)

// DialTimeout bounds connecting to a peer. Peers are on the same network;
// a connect that takes longer is a dead node, and the failover path
// (gitserve.FollowForward) is only as fast as this timeout.
const DialTimeout = 500 * time.Millisecond

// HTTPForwarder reverse-proxies smart-HTTP requests to the owner's peer
// HTTP port. Both directions stream with fixed buffers (FlushInterval -1:
// every chunk of pack data or progress is flushed as it arrives; nothing
// is buffered whole), and TCP backpressure paces the sender. Safe for
// concurrent use.
type HTTPForwarder struct {
	dir    *Directory
	secret string
	log    *zap.Logger
	proxy  *httputil.ReverseProxy
	tr     *http.Transport
	scheme string // http, or https with peer TLS (WithTLS)
	// Mover follows moved answers (the front ends find it through
	// gitserve.MoverOf); nil: a moved answer is a 503.
	Mover gitserve.Mover
}

var _ gitserve.Mover = (*HTTPForwarder)(nil)

// Moved implements gitserve.Mover with f.Mover.
func (f *HTTPForwarder) Moved(ctx context.Context, r names.Repo, node string) (actors.Route, error) {
	return moved(ctx, f.Mover, r, node)
}

// moved delegates to m, which may be unset.
func moved(ctx context.Context, m gitserve.Mover, r names.Repo, node string) (actors.Route, error) {
	if m == nil {
		return actors.Route{}, fmt.Errorf("%s moved from %s: no mover configured: %w", r, node, gitserve.ErrUnavailable)
	}
	return m.Moved(ctx, r, node)
}

// errMovedAnswer is what ModifyResponse fails with on the moved signal, so
// the proxy writes nothing and Forward can report gitserve.ErrMoved.
var errMovedAnswer = errors.New("owner answered moved")

type fwdState struct {
	addr       string
	hop        int
	replayable bool      // the request can be sent again (no body, or GetBody)
	body       *sentBody // the body when not replayable
	responded  bool      // the owner's answer arrived (ModifyResponse ran)
	err        error     // what the proxy failed with, if anything
}

// sentBody is a request body that cannot be sent again (a push). Every
// forward attempt of the request shares it, and it counts what the proxy
// consumed: while that is nothing, a failed connect or a moved answer
// still lets the same request go elsewhere or be served here. The server
// closes the body it owns; the proxy's Close is ignored so that a failed
// attempt leaves the body readable.
type sentBody struct {
	io.ReadCloser
	n atomic.Int64
}

func (b *sentBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func (b *sentBody) Close() error { return nil }

// untouched reports whether nothing of the request was consumed.
func (st *fwdState) untouched() bool { return st.replayable || st.body.n.Load() == 0 }

// unreached reports whether the request may go elsewhere: no connection
// could be made, or one was lost before the owner answered (a pooled
// connection to a node that died), while nothing of the request was
// consumed, so nothing was applied. A request the client itself gave up
// (ctx) is not retried.
func (st *fwdState) unreached(ctx context.Context) bool {
	return st.untouched() && ctx.Err() == nil && (isConnectError(st.err) || !st.responded && !errors.Is(st.err, errMovedAnswer))
}

// continueWait bounds how long a forwarded push waits for the owner's
// "100 Continue" before sending its body anyway. The owner answers a
// moved repository before reading the body, so with the wait the push's
// body is still unsent and the push can follow the move; an owner that
// reads late only costs this delay, once.
const continueWait = 10 * time.Second

type fwdKey struct{}

// NewHTTPForwarder returns a forwarder using dir to find owners.
func NewHTTPForwarder(dir *Directory, secret string, log *zap.Logger) *HTTPForwarder {
	f := &HTTPForwarder{dir: dir, secret: secret, log: orNop(log), scheme: "http"}
	f.tr = &http.Transport{
		DialContext:         (&net.Dialer{Timeout: DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		// Pass gzip bodies through untouched; the owner decodes them.
		DisableCompression: true,
		// Keep the write buffer small: pushes stream through it.
		WriteBufferSize:       32 << 10,
		ExpectContinueTimeout: continueWait,
		ReadBufferSize:        32 << 10,
	}
	f.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			st := pr.In.Context().Value(fwdKey{}).(*fwdState)
			pr.Out.URL.Scheme = f.scheme
			pr.Out.URL.Host = st.addr
			pr.Out.Host = st.addr
			pr.Out.Header.Set(HeaderSecret, f.secret)
			pr.Out.Header.Set(HeaderHop, strconv.Itoa(st.hop))
			SetVersion(pr.Out.Header)
			// The id this node gave the request, not whatever the client
			// sent, and the client's own beside it: the owner logs under
			// the same ones.
			pr.Out.Header.Del(reqid.Header)
			pr.Out.Header.Del(reqid.ClientHeader)
			if id := reqid.From(pr.In.Context()); id != "" {
				pr.Out.Header.Set(reqid.Header, id)
			}
			if c := reqid.ClientFrom(pr.In.Context()); c != "" {
				pr.Out.Header.Set(reqid.ClientHeader, c)
			}
			if st.replayable && pr.Out.Method != http.MethodGet {
				// A replayable body (upload-pack requests are reads): let
				// the transport resend it on a reused connection that the
				// owner closed as it shut down. A nil value marks the
				// request without sending the header.
				pr.Out.Header["X-Idempotency-Key"] = nil
			}
			if st.body != nil {
				// Send the body only once the owner wants it: one it
				// refuses (moved) leaves the push free to go elsewhere.
				pr.Out.Header.Set("Expect", "100-continue")
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			resp.Request.Context().Value(fwdKey{}).(*fwdState).responded = true
			if gitserve.IsMovedResponse(resp.StatusCode, resp.Header) {
				return errMovedAnswer
			}
			resp.Header.Del(reqid.Header) // the same id, already set here
			return nil
		},
		Transport:     f.tr,
		FlushInterval: -1,
		ErrorLog:      zap.NewStdLog(f.log),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			st := r.Context().Value(fwdKey{}).(*fwdState)
			st.err = err
			if st.unreached(r.Context()) || errors.Is(err, errMovedAnswer) {
				// Nothing was applied, or the owner refused before
				// answering anything: leave w alone so the caller can
				// retry at another node.
				return
			}
			// Headers may already be out (the proxy calls this only
			// before copying the body, but the upstream may have died
			// mid-response); a 502 is the best left to say.
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	return f
}

// WithTLS makes f speak peer TLS (c nil: plaintext); call before use.
func (f *HTTPForwarder) WithTLS(c *peertls.Config) *HTTPForwarder {
	f.scheme, f.tr.TLSClientConfig, f.tr.TLSHandshakeTimeout = c.Scheme(), c.ClientTLS(), HandshakeTimeout
	return f
}

// HandshakeTimeout bounds a peer TLS handshake. It is longer than
// DialTimeout: the connection is up, and a busy node may take a moment to
// sign.
const HandshakeTimeout = 5 * time.Second

// Close drops idle connections to peers.
func (f *HTTPForwarder) Close() { f.tr.CloseIdleConnections() }

// Forward proxies r to node and writes the answer to w. It returns an
// error wrapping gitserve.ErrPeerConnect, having written nothing, when the
// node could not be reached, or the connection was lost before it
// answered, and nothing of r's body was consumed (the caller may retry
// elsewhere, or serve r here); gitserve.ErrMoved, having
// written nothing, when node answered that it no longer holds the
// repository and r can be sent again (no body, r.GetBody set: each
// Forward then sends a fresh body from it, or a body not yet consumed: a
// push waits for the owner's 100 Continue before sending it);
// gitserve.ErrUnavailable, having written nothing, for the same answer to
// a request that cannot be sent again; gitserve.ErrHopLimit when
// forwarding again is not allowed; any other error once the answer
// (possibly a 502) has been written. A body that cannot be sent again is
// wrapped in r.Body, shared by later attempts and by a local run.
func (f *HTTPForwarder) Forward(w http.ResponseWriter, r *http.Request, node string) error {
	hop, err := gitserve.NextHop(r.Context())
	if err != nil {
		return err
	}
	addr, err := f.dir.HTTPAddr(node)
	if err != nil {
		return fmt.Errorf("forward to %s: %w: %w", node, gitserve.ErrUnavailable, err)
	}
	// The owner may answer (progress, negotiation) before it has read the
	// whole request; HTTP/1 needs full duplex for the proxy to keep
	// reading the body meanwhile.
	_ = http.NewResponseController(w).EnableFullDuplex()
	st := &fwdState{addr: addr, hop: hop, replayable: r.Body == nil || r.Body == http.NoBody || r.GetBody != nil}
	if !st.replayable {
		// Shared by every attempt and by a local run after a failover.
		sb, ok := r.Body.(*sentBody)
		if !ok {
			sb = &sentBody{ReadCloser: r.Body}
			r.Body = sb
		}
		st.body = sb
	}
	out := r.WithContext(context.WithValue(r.Context(), fwdKey{}, st))
	if r.GetBody != nil {
		// The proxy closes what it sent; every attempt gets a fresh copy.
		if out.Body, err = r.GetBody(); err != nil {
			return fmt.Errorf("forward to %s: replay request body: %w: %w", node, gitserve.ErrUnavailable, err)
		}
	}
	f.proxy.ServeHTTP(w, out)
	switch {
	case st.err == nil:
		return nil
	case st.unreached(r.Context()):
		return fmt.Errorf("forward to %s at %s: %w: %w", node, addr, gitserve.ErrPeerConnect, st.err)
	case errors.Is(st.err, errMovedAnswer) && st.untouched():
		return fmt.Errorf("forward to %s at %s: %w", node, addr, gitserve.ErrMoved)
	case errors.Is(st.err, errMovedAnswer):
		return fmt.Errorf("forward to %s at %s: %w (the request body cannot be sent again): %w", node, addr, errMovedAnswer, gitserve.ErrUnavailable)
	}
	return fmt.Errorf("forward to %s at %s: %w", node, addr, st.err)
}

// isConnectError reports a failure to establish the connection (refused,
// unreachable, dial timeout), as opposed to a failure after connecting.
func isConnectError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
