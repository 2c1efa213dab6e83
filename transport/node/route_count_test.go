package node_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rgit/rgit/testkit/freeport"
	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/transport/node"
	"github.com/rgit/rgit/transport/wire/reqid"
)

// maxRoundTrips bounds the actor mailbox round trips one HTTP request of
// a clone crosses before its first byte, on all the nodes it passes.
const maxRoundTrips = 2

// TestCloneThroughNonOwnerRoundTrips clones through each node of a
// two-node cluster and counts, per HTTP request (the request id the
// forwarder and the owner share), the actor mailbox round trips on each
// node (node.WithRoundTripObserver; the count covers the whole request,
// and nothing after its first byte waits on a mailbox). The clone through
// the node that does not own the repository is served by the other one,
// and no request crosses more than maxRoundTrips.
func TestCloneThroughNonOwnerRoundTrips(t *testing.T) {
	const secret = "route-count-secret-0123"
	ports, err := freeport.Runs(2, 2)
	if err != nil {
		t.Fatal(err)
	}
	addr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
	peers := "RGIT_PEERS=rgit-0=" + addr(0) + ",rgit-1=" + addr(1)

	type trip struct{ id, node string }
	var mu sync.Mutex
	trips := map[trip]int{}
	clients := map[string]string{} // request id → client id (the clone)
	observe := func(name string) []node.Option {
		return []node.Option{node.WithRoundTripObserver(func(ctx context.Context) {
			c := reqid.ClientFrom(ctx)
			if !strings.HasPrefix(c, "count-") {
				return // background work, or the test's setup
			}
			mu.Lock()
			defer mu.Unlock()
			trips[trip{reqid.From(ctx), name}]++
			clients[reqid.From(ctx)] = c
		})}
	}
	store := gitenv.FileStore(t)
	var srvs [2]*gitenv.Server
	for i := range srvs {
		name := fmt.Sprintf("rgit-%d", i)
		srvs[i] = gitenv.StartServerOpts(t, store, observe(name), peers, "RGIT_SELF="+name,
			"RGIT_PEER_ADDR="+addr(i), "RGIT_PEER_SECRET="+secret)
	}
	for _, s := range srvs {
		waitServing(t, "http://"+s.HTTPAddr+"/ready")
	}

	env := gitenv.New(t)
	srvs[0].CreateRepo(t, "alice/route")
	tok := srvs[0].AddToken(t, "alice")
	work := env.Scratch(t)
	env.Commit(t, work, "one", map[string]string{"a.txt": "a\n"})
	env.Run(t, work, "push", "-q", srvs[0].HTTPURL(tok, "alice/route"), "main")

	for i, s := range srvs {
		env.Run(t, "", "-c", fmt.Sprintf("http.extraHeader=%s: count-%d", reqid.Header, i),
			"clone", "-q", s.HTTPURL(tok, "alice/route"), filepath.Join(t.TempDir(), "c"))
	}

	mu.Lock()
	defer mu.Unlock()
	forwarded := 0
	for id, client := range clients {
		n0, n1 := trips[trip{id, "rgit-0"}], trips[trip{id, "rgit-1"}]
		t.Logf("%s request %s: %d round trips on rgit-0, %d on rgit-1", client, id, n0, n1)
		// Clone i went to rgit-i: trips on the other node mean the
		// request was forwarded there.
		if client == "count-0" && n1 > 0 || client == "count-1" && n0 > 0 {
			forwarded++
		}
		if n0+n1 > maxRoundTrips {
			t.Errorf("%s request %s crossed %d round trips on rgit-0 and %d on rgit-1, want at most %d",
				client, id, n0, n1, maxRoundTrips)
		}
	}
	// info/refs and git-upload-pack of the clone through the non-owner.
	if forwarded < 2 {
		t.Errorf("%d requests were served by the node they were not sent to, want the clone through the non-owner's", forwarded)
	}
}
