package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/transport/peertls"
)

// Leader is the ownership-map leader's service: actors.LeaderClient, which
// this package cannot name (actors sit below transport). LeaderClient
// implements it over the network; LeaderHandler exposes one.
type Leader interface {
	Claim(ctx context.Context, repo, node string) (cluster.Decision, error)
	Renew(ctx context.Context, node string, repos []string) (renewed, declined []string, err error)
	Release(ctx context.Context, node, repo string) (cluster.Decision, error)
	ForceGrant(ctx context.Context, repo, requester, deadNode string) (cluster.Decision, error)
}

// Paths of the leader calls on the peer stream port.
const (
	PathClaim   = "/peer/v1/lease/claim"
	PathRenew   = "/peer/v1/lease/renew"
	PathRelease = "/peer/v1/lease/release"
	PathForce   = "/peer/v1/lease/force"
)

// Wire messages. Decisions travel as cluster.Decision's JSON encoding.
type (
	claimReq struct {
		Repo string `json:"repo"`
		Node string `json:"node"`
	}
	renewReq struct {
		Node  string   `json:"node"`
		Repos []string `json:"repos"`
	}
	renewResp struct {
		Renewed  []string `json:"renewed"`
		Declined []string `json:"declined"`
	}
	releaseReq struct {
		Node string `json:"node"`
		Repo string `json:"repo"`
	}
	forceReq struct {
		Repo      string `json:"repo"`
		Requester string `json:"requester"`
		Dead      string `json:"dead"`
	}
)

// maxLeaderBody bounds a leader request or answer (a renewal lists every
// repo a node holds: tens of thousands of names at most).
const maxLeaderBody = 8 << 20

// LeaderHandler serves the leader calls from svc, which returns the
// leader's service or nil on a node that is not the leader (answered 503:
// the caller's directory is wrong or the leader is restarting). Mount it
// behind RequireBearer.
func LeaderHandler(svc func() Leader, log *zap.Logger) http.Handler {
	log = orNop(log)
	mux := http.NewServeMux()
	handle := func(path string, call func(ctx context.Context, l Leader, body []byte) (any, error)) {
		mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
			l := svc()
			if l == nil {
				http.Error(w, "this node is not the ownership leader", http.StatusServiceUnavailable)
				return
			}
			body, err := io.ReadAll(io.LimitReader(r.Body, maxLeaderBody+1))
			if err != nil || len(body) > maxLeaderBody {
				http.Error(w, "bad or oversized request body", http.StatusBadRequest)
				return
			}
			out, err := call(r.Context(), l, body)
			var bad *badRequest
			switch {
			case errors.As(err, &bad):
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			case err != nil:
				log.Warn("leader call failed", zap.String("path", path), zap.Error(err))
				// 503, not 500: the caller treats it as "leader
				// unavailable" and its claim answers 503 in turn.
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(out)
		})
	}
	handle(PathClaim, func(ctx context.Context, l Leader, b []byte) (any, error) {
		var q claimReq
		if err := decode(b, &q); err != nil {
			return nil, err
		}
		return l.Claim(ctx, q.Repo, q.Node)
	})
	handle(PathRenew, func(ctx context.Context, l Leader, b []byte) (any, error) {
		var q renewReq
		if err := decode(b, &q); err != nil {
			return nil, err
		}
		ok, no, err := l.Renew(ctx, q.Node, q.Repos)
		return renewResp{Renewed: ok, Declined: no}, err
	})
	handle(PathRelease, func(ctx context.Context, l Leader, b []byte) (any, error) {
		var q releaseReq
		if err := decode(b, &q); err != nil {
			return nil, err
		}
		return l.Release(ctx, q.Node, q.Repo)
	})
	handle(PathForce, func(ctx context.Context, l Leader, b []byte) (any, error) {
		var q forceReq
		if err := decode(b, &q); err != nil {
			return nil, err
		}
		return l.ForceGrant(ctx, q.Repo, q.Requester, q.Dead)
	})
	return mux
}

type badRequest struct{ err error }

func (b *badRequest) Error() string { return "bad leader request: " + b.err.Error() }

func decode(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return &badRequest{err}
	}
	return nil
}

// LeaderClient calls the leader's peer stream port. Transport failures
// (no connection, timeout, the leader answering 503) are wrapped in
// Unreachable, which cmd/serve sets to actors.ErrLeaderUnreachable so
// that claims answer 503. Safe for concurrent use.
type LeaderClient struct {
	addr        string
	secret      string
	unreachable error
	hc          *http.Client
	scheme      string // http, or https with peer TLS (WithTLS)
}

// LeaderTimeout bounds one leader call: a claim is on a client's request
// path, so a leader that does not answer quickly is treated as down.
const LeaderTimeout = 5 * time.Second

// NewLeaderClient returns a client of the leader at streamAddr.
// unreachable is the sentinel transport failures wrap (nil: ErrUnreachable).
func NewLeaderClient(streamAddr, secret string, unreachable error) *LeaderClient {
	if unreachable == nil {
		unreachable = ErrUnreachable
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}
	return &LeaderClient{addr: streamAddr, secret: secret, unreachable: unreachable,
		hc: &http.Client{Transport: tr, Timeout: LeaderTimeout}, scheme: "http"}
}

// WithTLS makes c speak peer TLS (tc nil: plaintext); call before use.
func (c *LeaderClient) WithTLS(tc *peertls.Config) *LeaderClient {
	c.scheme = tc.Scheme()
	tr := c.hc.Transport.(*http.Transport)
	tr.TLSClientConfig, tr.TLSHandshakeTimeout = tc.ClientTLS(), HandshakeTimeout
	return c
}

// ErrUnreachable is LeaderClient's default transport-failure sentinel.
var ErrUnreachable = errors.New("peer unreachable")

// Close drops idle connections.
func (c *LeaderClient) Close() { c.hc.CloseIdleConnections() }

func (c *LeaderClient) call(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("leader %s: encode: %w", path, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.scheme+"://"+c.addr+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("leader %s: %w", path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("leader at %s: %w: %w", c.addr, c.unreachable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		err := fmt.Errorf("leader at %s: %s %s: %s", c.addr, path, resp.Status, bytes.TrimSpace(msg))
		if resp.StatusCode >= 500 {
			return fmt.Errorf("%w: %w", c.unreachable, err)
		}
		return err
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxLeaderBody)).Decode(out); err != nil {
		return fmt.Errorf("leader at %s: %w: bad answer to %s: %w", c.addr, c.unreachable, path, err)
	}
	return nil
}

// Claim asks the leader for repo's lease for node.
func (c *LeaderClient) Claim(ctx context.Context, repo, node string) (cluster.Decision, error) {
	var d cluster.Decision
	err := c.call(ctx, PathClaim, claimReq{Repo: repo, Node: node}, &d)
	return d, err
}

// Renew renews node's leases on repos in one call.
func (c *LeaderClient) Renew(ctx context.Context, node string, repos []string) ([]string, []string, error) {
	var r renewResp
	err := c.call(ctx, PathRenew, renewReq{Node: node, Repos: repos}, &r)
	return r.Renewed, r.Declined, err
}

// Release shortens node's lease on repo to the drain.
func (c *LeaderClient) Release(ctx context.Context, node, repo string) (cluster.Decision, error) {
	var d cluster.Decision
	err := c.call(ctx, PathRelease, releaseReq{Node: node, Repo: repo}, &d)
	return d, err
}

// ForceGrant asks the leader to move repo from deadNode to requester.
func (c *LeaderClient) ForceGrant(ctx context.Context, repo, requester, deadNode string) (cluster.Decision, error) {
	var d cluster.Decision
	err := c.call(ctx, PathForce, forceReq{Repo: repo, Requester: requester, Dead: deadNode}, &d)
	return d, err
}
