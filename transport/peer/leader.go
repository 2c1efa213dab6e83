package peer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/transport/peertls"
)

// LeaderClient calls the leader's peer stream port. Transport failures
// (no connection, timeout, the leader answering 503) are wrapped in
// Unreachable, which transport/node sets to actors.ErrLeaderUnreachable so
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

// Claim asks the leader for a lease.
func (c *LeaderClient) Claim(ctx context.Context, m cluster.ClaimLease) (cluster.Decision, error) {
	var d cluster.Decision
	err := leaderSend(ctx, c, m, &d)
	return d, err
}

// Renew renews a node's leases in one batch.
func (c *LeaderClient) Renew(ctx context.Context, m cluster.RenewLeases) (cluster.LeasesRenewed, error) {
	var r cluster.LeasesRenewed
	err := leaderSend(ctx, c, m, &r)
	return r, err
}

// Release shortens a node's lease to the drain.
func (c *LeaderClient) Release(ctx context.Context, m cluster.ReleaseLease) (cluster.Decision, error) {
	var d cluster.Decision
	err := leaderSend(ctx, c, m, &d)
	return d, err
}

// ForceGrant asks the leader to move a repository from a dead node.
func (c *LeaderClient) ForceGrant(ctx context.Context, m cluster.ForceGrantLease) (cluster.Decision, error) {
	var d cluster.Decision
	err := leaderSend(ctx, c, m, &d)
	return d, err
}

// leaderSend delivers m in an envelope and decodes the reply into out.
// Every failure but a refused message (a bad name) wraps c.unreachable:
// for the caller the leader could not decide.
func leaderSend[M any](ctx context.Context, c *LeaderClient, m M, out any) error {
	err := Send(ctx, c.hc, c.scheme+"://"+c.addr, c.secret, 0, m, out)
	var refused *RefusedError
	if err != nil && !errors.As(err, &refused) {
		return fmt.Errorf("leader at %s: %w: %w", c.addr, c.unreachable, err)
	}
	return err
}
