package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/transport/service/gitserve"
	"github.com/rgit/rgit/transport/wire/peertls"
)

func testTLS(t *testing.T) *peertls.Config {
	t.Helper()
	dir := t.TempDir()
	if err := peertls.Generate(dir, "test"); err != nil {
		t.Fatal(err)
	}
	c, err := peertls.Load(peertls.Files{Cert: filepath.Join(dir, peertls.PeerFile),
		Key: filepath.Join(dir, peertls.PeerKeyFile), CA: filepath.Join(dir, peertls.CAFile)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tlsServer serves h over peer TLS and returns a directory whose rgit-1
// has it as its stream port.
func tlsServer(t *testing.T, tc *peertls.Config, h http.Handler) (*Directory, string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = tc.Server.Clone()
	srv.StartTLS()
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "https://")
	host, port, _ := net.SplitHostPort(addr)
	var p int
	fmt.Sscan(port, &p)
	dir, err := StaticDirectory(map[string]string{"rgit-1": net.JoinHostPort(host, fmt.Sprint(p-1))})
	if err != nil {
		t.Fatal(err)
	}
	return dir, addr
}

// TestSessionOverTLS: a forwarded session works over peer TLS, the
// client's half-close included (the owner reads the input to its end),
// and a client with a certificate from another CA is refused without
// counting as a dead owner.
func TestSessionOverTLS(t *testing.T) {
	tc := testTLS(t)
	gate, err := gitserve.NewGate(oneRepo{}, echoEngine{}, "")
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := tlsServer(t, tc, RequireBearer(secret, nil, &SessionHandler{Gate: gate}))
	alice := auth.Identity{Owner: "a", Authenticated: true}
	req := gitserve.SessionRequest{Service: gitserve.UploadPack, Repo: names.MustParse("a/private"), Identity: alice, Protocol: 2}
	var out bytes.Buffer
	if _, err := NewSessionClient(dir, secret).WithTLS(tc).ForwardSession(context.Background(), "rgit-1", req,
		strings.NewReader("hello"), &out); err != nil {
		t.Fatalf("ForwardSession over TLS: %v", err)
	}
	if !bytes.HasPrefix(out.Bytes(), []byte("olleh")) {
		t.Errorf("output %q…", out.Bytes()[:min(out.Len(), 10)])
	}
	_, err = NewSessionClient(dir, secret).WithTLS(testTLS(t)).ForwardSession(context.Background(), "rgit-1", req,
		strings.NewReader("hello"), &out)
	if err == nil || errors.Is(err, gitserve.ErrPeerConnect) || gitserve.Classify(err) != gitserve.Unavailable {
		t.Errorf("foreign certificate: %v (class %v), want unavailable, not a connect failure", err, gitserve.Classify(err))
	}
	_, err = NewSessionClient(dir, secret).ForwardSession(context.Background(), "rgit-1", req, strings.NewReader("hello"), &out)
	if err == nil {
		t.Error("plaintext session to a TLS port succeeded")
	}
}

func TestLeaderOverTLS(t *testing.T) {
	tc := testTLS(t)
	h := NewHandlers(nil)
	HandleLeader(h, func() cluster.LeaderService { return &fakeLeader{} })
	_, addr := tlsServer(t, tc, RequireBearer(secret, nil, h))
	c := NewLeaderClient(addr, secret, errTestUnreachable).WithTLS(tc)
	defer c.Close()
	if d, err := c.Claim(context.Background(), cluster.ClaimLease{Repo: names.MustParse("a/b"), Node: "rgit-1"}); err != nil || d.Outcome != cluster.Granted {
		t.Fatalf("Claim over TLS = %+v, %v", d, err)
	}
	f := NewLeaderClient(addr, secret, errTestUnreachable).WithTLS(testTLS(t))
	defer f.Close()
	if _, err := f.Claim(context.Background(), cluster.ClaimLease{Repo: names.MustParse("a/b"), Node: "rgit-1"}); !errors.Is(err, errTestUnreachable) {
		t.Fatalf("Claim with a foreign certificate: %v", err)
	}
}
