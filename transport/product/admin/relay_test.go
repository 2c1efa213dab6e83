package admin

import (
	"context"
	"errors"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/rgit/rgit/transport/frontend/peer"
	"github.com/rgit/rgit/transport/service/gitserve"
)

// staticPeers maps node names to peer stream addresses.
type staticPeers map[string]string

func (p staticPeers) StreamAddr(node string) (string, error) {
	if a, ok := p[node]; ok {
		return a, nil
	}
	return "", errors.New("unknown node " + node)
}

// TestRelayCarriesTheSameMessage: a message relayed to the owner arrives
// there as the same Go value, with the next hop, through the peer
// envelope; the owner's progress streams back before its typed reply, and
// its classified failure comes back unchanged. A wrong peer secret and an
// exceeded hop limit are refused.
func TestRelayCarriesTheSameMessage(t *testing.T) {
	const secret = "0123456789abcdef0123"
	var (
		got    any
		gotHop int
		fail   error
	)
	owner := peer.NewHandlers(zap.NewNop())
	peer.HandleStream(owner, func(ctx context.Context, m Repack, progress func(string)) (Done, error) {
		got, gotHop = m, gitserve.Hops(ctx)
		progress("writing:  50% (1/2)")
		progress("writing: 100% (2/2)")
		return Done{Output: "repacked " + m.Repo}, fail
	})
	srv := httptest.NewServer(peer.RequireBearer(secret, zap.NewNop(), owner))
	t.Cleanup(srv.Close)
	s := &Server{Secret: secret, Log: zap.NewNop(), Peers: staticPeers{"rgit-1": strings.TrimPrefix(srv.URL, "http://")}}

	sent := Repack{Repo: "alice/web"}
	var (
		reply    Done
		progress []string
	)
	ctx := gitserve.WithHops(t.Context(), 0) // as the operator's node received it
	if err := s.toOwner(ctx, "rgit-1", "alice/web", sent, &reply, func(l string) { progress = append(progress, l) }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, sent) || gotHop != 1 {
		t.Errorf("owner received %#v at hop %d, want %#v at hop 1", got, gotHop, sent)
	}
	if reply.Output != "repacked alice/web" || strings.Join(progress, "|") != "writing:  50% (1/2)|writing: 100% (2/2)" {
		t.Errorf("reply %+v, progress %q", reply, progress)
	}

	fail = &peer.CodedError{Code: CodeNotFound, Msg: "alice/web: repository not found"}
	err := s.toOwner(ctx, "rgit-1", "alice/web", sent, &reply, nil)
	var coded *peer.CodedError
	if !errors.As(err, &coded) || *coded != *fail.(*peer.CodedError) {
		t.Errorf("owner's failure relayed as %v, want %v", err, fail)
	}

	// The last allowed hop: relaying again is refused here, before
	// anything is sent.
	got = nil
	err = s.toOwner(gitserve.WithHops(t.Context(), gitserve.MaxHops), "rgit-1", "alice/web", sent, &reply, nil)
	if !errors.As(err, &coded) || coded.Code != CodeRefused || !strings.Contains(coded.Msg, errHopLimit.Error()) || got != nil {
		t.Errorf("over the hop limit: %v (owner received %v)", err, got)
	}
	// An envelope over the hop limit is refused by the owner itself.
	err = peer.SendProgress(t.Context(), srv.Client(), srv.URL, secret, gitserve.MaxHops+1, sent, &reply, nil)
	var refused *peer.RefusedError
	if !errors.As(err, &refused) || got != nil {
		t.Errorf("envelope at hop %d: %v (owner received %v)", gitserve.MaxHops+1, err, got)
	}

	s.Secret = "wrong-secret-wrong-secret"
	err = s.toOwner(ctx, "rgit-1", "alice/web", sent, &reply, nil)
	if !errors.As(err, &coded) || !strings.Contains(coded.Msg, "401") || got != nil {
		t.Errorf("wrong peer secret: %v (owner received %v)", err, got)
	}
}
