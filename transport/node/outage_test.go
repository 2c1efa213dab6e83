package node_test

import (
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/testkit/faultstore"
	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/testkit/gitrun"
	"github.com/rgit/rgit/testkit/outage"
	"github.com/rgit/rgit/testkit/s3local"
	"github.com/rgit/rgit/transport/node"
)

// TestStoreOutage runs one node on a real S3 server (versitygw) and takes
// the server away twice: stopped with SIGSTOP (connections accepted,
// nothing answered) and killed (connections refused). Through each
// outage the warm repository serves ls-remote, fetch and clone; a push
// fails within seconds with an ng line naming the store; a cold
// repository answers 503 with Retry-After; /healthz stays 200 while
// /ready and /status say the store is down; the node sends the store a
// bounded number of requests. Once the store is back a push is accepted
// within 5 s, without a restart, and every acknowledged push is there.
func TestStoreOutage(t *testing.T) {
	const opTimeout = 1500 * time.Millisecond
	const outageFor = 6 * time.Second
	s3srv := s3local.Start(t)
	env := gitenv.New(t)
	srv := gitenv.StartServer(t, gitenv.Store{Name: "s3", URL: "s3://" + s3srv.Bucket + "/outage", Env: s3srv.Env()},
		"RGIT_STORE_OP_TIMEOUT_MS="+strconv.Itoa(int(opTimeout/time.Millisecond)))
	tok := srv.AddToken(t, "alice")
	cases := []outage.Fault{
		{Name: "hang", Begin: s3srv.Pause, End: s3srv.Resume},
		{Name: "refuse", Begin: s3srv.Kill, End: s3srv.Restart},
	}
	work := env.Scratch(t)
	env.Commit(t, work, "one", map[string]string{"a.txt": "a\n"})
	for _, repo := range []string{"alice/warm", "alice/cold-hang", "alice/cold-refuse"} {
		srv.CreateRepo(t, repo)
		env.Run(t, work, "push", "-q", srv.HTTPURL(tok, repo), "main")
	}
	// Nothing is open after a restart; the warm repository is opened
	// again (its packs are in the node's cache).
	srv.Restart(t)
	env.Run(t, "", "clone", "-q", "--bare", srv.HTTPURL(tok, "alice/warm"), filepath.Join(t.TempDir(), "c"))

	for _, f := range cases {
		t.Run(f.Name, func(t *testing.T) {
			res, err := outage.Run(t.Context(), outage.Node{HTTPAddr: srv.HTTPAddr, MetricsAddr: srv.MetricsAddr, Token: tok,
				Warm: "alice/warm", Cold: "alice/cold-" + f.Name}, f,
				outage.Options{Duration: outageFor, Git: gitrun.Env{Home: env.Home}, Work: t.TempDir()})
			t.Log(res.Line())
			if err != nil {
				t.Fatal(err)
			}
			if res.Served == 0 || res.Failed > 0 {
				t.Errorf("warm reads during the outage: %d served, %d failed %q", res.Served, res.Failed, res.FailedOps)
			}
			if res.PushOK || !strings.Contains(res.PushMessage, "object store unavailable") {
				t.Errorf("push during the outage: accepted=%v, %q; want rejected naming the store", res.PushOK, res.PushMessage)
			}
			// The pack upload waits one operation deadline; the S3
			// client's retries of a refused connection fit inside it.
			if res.PushFail > 3*opTimeout+2*time.Second {
				t.Errorf("push took %v to fail, want about the operation deadline %v", res.PushFail, opTimeout)
			}
			if res.ColdStatus != http.StatusServiceUnavailable || res.ColdRetryAfter == "" || res.ColdTook > 2*opTimeout {
				t.Errorf("cold repository: %d Retry-After %q after %v; want 503 with Retry-After within %v",
					res.ColdStatus, res.ColdRetryAfter, res.ColdTook, 2*opTimeout)
			}
			if res.HealthzCode != http.StatusOK {
				t.Errorf("/healthz = %d during the outage, want 200 (liveness)", res.HealthzCode)
			}
			if res.ReadyCode != http.StatusOK || !strings.Contains(res.ReadyBody, "store down") {
				t.Errorf("/ready = %d %q, want 200 saying the store is down", res.ReadyCode, res.ReadyBody)
			}
			if res.StatusStore != "down" {
				t.Errorf("/status store state %q, want down", res.StatusStore)
			}
			wantKind := map[string]string{"hang": "timeout", "refuse": "refused"}[f.Name]
			if res.ByResult[wantKind] == 0 {
				t.Errorf("no store request counted as %s: %v", wantKind, res.ByResult)
			}
			// Down after three failures, then one trial a second.
			if limit := 3 + 2*int(outageFor/time.Second) + 4; res.StoreRequests > limit || res.FailedFast == 0 {
				t.Errorf("%d store requests sent in a %v outage (limit %d), %d failed fast", res.StoreRequests, outageFor, limit, res.FailedFast)
			}
			if res.Recover > 5*time.Second {
				t.Errorf("push accepted %v after the store returned, want within 5s", res.Recover)
			}
			if !res.ColdOK || res.Lost != 0 {
				t.Errorf("after the outage: cold clone ok=%v, %d acknowledged pushes lost", res.ColdOK, res.Lost)
			}
		})
	}
}

// TestPushUnconfirmedByStore: the ref update's log write lands in the
// store but the node is told it failed (the ambiguous case of an outage).
// The push gets an ng line naming the store and saying the update is not
// confirmed; the next push writes the same record again before anything
// else, so the update appears whole, and the retry sees it.
func TestPushUnconfirmedByStore(t *testing.T) {
	mem := memstore.New()
	fs := faultstore.New(mem, 1)
	env := gitenv.New(t)
	srv := gitenv.StartServerOpts(t, gitenv.Store{Name: "mem", URL: "mem://"}, []node.Option{node.WithStore(fs)},
		"RGIT_STORE_OP_TIMEOUT_MS=500")
	tok := srv.AddToken(t, "alice")
	srv.CreateRepo(t, "alice/u")
	url := srv.HTTPURL(tok, "alice/u")
	work := env.Scratch(t)
	env.Commit(t, work, "one", map[string]string{"a.txt": "a\n"})
	env.Run(t, work, "push", "-q", url, "main")
	two := env.Commit(t, work, "two", map[string]string{"a.txt": "b\n"})

	fs.FailNext(faultstore.OpPutIfAbsent, "repo/", 1, true)
	res := env.Fail(t, work, "push", "--porcelain", url, "main")
	if !strings.Contains(res.Stdout, "object store unavailable: update not confirmed") {
		t.Fatalf("push whose commit the store did not confirm:\n%s", res)
	}
	// The retry: its own update conflicts with the settled one or
	// succeeds; either way the ref is two afterwards, not lost.
	env.Try(work, "push", "-q", url, "main")
	if got := strings.Fields(env.Run(t, "", "ls-remote", url, "refs/heads/main")); len(got) == 0 || got[0] != two {
		t.Errorf("main after the retry = %v, want %s", got, two)
	}
}

// TestSlowStore: the store answers every request, but only after 2 s
// (under the node's operation deadline). That is not an outage: warm
// reads keep being served, a push is accepted (slowly), a cold
// repository opens, and the node does not call the store down, fail
// requests fast or lose anything.
func TestSlowStore(t *testing.T) {
	const delay = 2 * time.Second
	s3srv := s3local.Start(t)
	proxy, err := s3srv.StartSlowProxy()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	env := gitenv.New(t)
	srv := gitenv.StartServer(t, gitenv.Store{Name: "s3", URL: "s3://" + s3srv.Bucket + "/slow", Env: append(s3srv.Env(), "AWS_ENDPOINT="+proxy.URL)},
		"RGIT_STORE_OP_TIMEOUT_MS="+strconv.Itoa(int(3*delay/time.Millisecond)))
	tok := srv.AddToken(t, "alice")
	work := env.Scratch(t)
	env.Commit(t, work, "one", map[string]string{"a.txt": "a\n"})
	for _, repo := range []string{"alice/warm", "alice/cold-slow"} {
		srv.CreateRepo(t, repo)
		env.Run(t, work, "push", "-q", srv.HTTPURL(tok, repo), "main")
	}
	srv.Restart(t)
	env.Run(t, "", "clone", "-q", "--bare", srv.HTTPURL(tok, "alice/warm"), filepath.Join(t.TempDir(), "c"))

	slow := outage.Fault{Name: "slow",
		Begin: func() error { proxy.SetDelay(delay); return nil },
		End:   func() error { proxy.SetDelay(0); return nil }}
	res, err := outage.Run(t.Context(), outage.Node{HTTPAddr: srv.HTTPAddr, MetricsAddr: srv.MetricsAddr, Token: tok,
		Warm: "alice/warm", Cold: "alice/cold-slow"}, slow,
		outage.Options{Duration: 4 * delay, Git: gitrun.Env{Home: env.Home}, Work: t.TempDir()})
	t.Log(res.Line())
	if err != nil {
		t.Fatal(err)
	}
	if res.Served == 0 || res.Failed > 0 {
		t.Errorf("warm reads on a slow store: %d served, %d failed %q", res.Served, res.Failed, res.FailedOps)
	}
	if !res.PushOK {
		t.Errorf("push on a slow store refused after %v: %q", res.PushFail, res.PushMessage)
	}
	if res.ColdStatus != http.StatusOK {
		t.Errorf("cold repository on a slow store: %d", res.ColdStatus)
	}
	if res.HealthzCode != http.StatusOK || res.ReadyCode != http.StatusOK || strings.Contains(res.ReadyBody, "store down") || res.StatusStore == "down" {
		t.Errorf("health on a slow store: /healthz %d, /ready %d %q, /status store %q; want up",
			res.HealthzCode, res.ReadyCode, res.ReadyBody, res.StatusStore)
	}
	if res.StoreRequests == 0 || res.FailedFast > 0 || res.ByResult["timeout"] > 0 {
		t.Errorf("store requests on a slow store: %v; want some, none timed out or failed fast", res.ByResult)
	}
	if !res.ColdOK || res.Lost != 0 {
		t.Errorf("after: cold clone ok=%v, %d acknowledged pushes lost", res.ColdOK, res.Lost)
	}
}
