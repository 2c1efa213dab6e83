package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/s3store"
	"github.com/rgit/rgit/testkit/gitrun"
	"github.com/rgit/rgit/testkit/outage"
)

// runOutage takes the object store away from one node and prints what
// its clients saw, one line per case (testkit/outage, Result.Line):
//
//	outage case=hang served=<n> failed=<n> push_fail_s=<s> cold_status=503 cold_s=<s> healthz=200 ready=200 store=down store_requests=<n> failed_fast=<n> by_result=<result:n,…> recover_s=<s> lost=0
//
// The store is a real S3-compatible server (versitygw, testkit/s3local);
// case hang stops it with SIGSTOP (connections accepted, nothing
// answered), case refuse kills it (connections refused) and restarts it,
// case slow holds every request -slow-delay before answering it (not an
// outage: everything is served, push_fail_s is then the accepted push's
// time, cold_status 200).
// served/failed count warm reads (ls-remote, fetch, clone) during the
// outage; push_fail_s is how long a push made as the outage began took to
// be rejected; cold_s how long a cold repository took to answer (503
// with Retry-After); store_requests the requests the node sent the store
// during the outage (failed_fast: those it did not send, the store being
// down); recover_s the time from the store's return to the first
// accepted push; lost the acknowledged pushes missing afterwards.
func runOutage(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("outage", flag.ExitOnError)
	duration := fs.Duration("duration", 60*time.Second, "how long the store is out in each case")
	opTimeout := fs.Duration("op-timeout", 5*time.Second, "the node's RGIT_STORE_OP_TIMEOUT_MS")
	cases := fs.String("cases", "hang,refuse,slow", "comma-separated cases: hang (SIGSTOP), refuse (killed), slow (every request held -slow-delay)")
	slowDelay := fs.Duration("slow-delay", 2*time.Second, "case slow: how long the store takes to answer each request (under -op-timeout)")
	fs.Parse(args)

	work, err := os.MkdirTemp("", "rgit-bench-outage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	s3srv, err := startS3(work)
	if err != nil {
		return err
	}
	defer s3srv.Close()
	if strings.Contains(*cases, "slow") && *slowDelay >= *opTimeout {
		return fmt.Errorf("-slow-delay %v must be under -op-timeout %v (slower is a hang)", *slowDelay, *opTimeout)
	}
	direct, err := s3store.New(ctx, s3srv.Config("outage"))
	if err != nil {
		return err
	}
	// Case slow's node reaches the store through a proxy that holds every
	// request; the others' reach it directly, so that refused is refused.
	proxy, err := s3srv.StartSlowProxy()
	if err != nil {
		return err
	}
	defer proxy.Close()
	cfg := s3srv.Config("outage")
	cfg.Endpoint = proxy.URL
	slowStore, err := s3store.New(ctx, cfg)
	if err != nil {
		return err
	}
	faults := map[string]outage.Fault{
		"hang":   {Name: "hang", Begin: s3srv.Pause, End: s3srv.Resume},
		"refuse": {Name: "refuse", Begin: s3srv.Kill, End: s3srv.Restart},
		"slow": {Name: "slow",
			Begin: func() error { proxy.SetDelay(*slowDelay); return nil },
			End:   func() error { proxy.SetDelay(0); return nil }},
	}
	names := strings.Split(*cases, ",")
	for _, c := range names {
		if _, ok := faults[c]; !ok {
			return fmt.Errorf("-cases: unknown case %q (want hang, refuse or slow)", c)
		}
	}
	git := gitrun.Env{Home: filepath.Join(work, "home"), Ident: gitrun.Fixed("Bench", "bench@example.com", "1700000000 +0000")}
	if err := os.MkdirAll(git.Home, 0o755); err != nil {
		return err
	}
	cacheDir := filepath.Join(work, "node", "cache")
	opMs := "RGIT_STORE_OP_TIMEOUT_MS=" + strconv.FormatInt(opTimeout.Milliseconds(), 10)
	node, err := startInProcess(ctx, direct, cacheDir, opMs)
	if err != nil {
		return err
	}
	token, err := node.admin(ctx, "add-token", benchOwner)
	if err != nil {
		node.shutdown()
		return err
	}
	seed := filepath.Join(work, "seed")
	if err := seedRepo(ctx, git, seed); err != nil {
		node.shutdown()
		return err
	}
	repos := []string{"warm"}
	for _, c := range names {
		repos = append(repos, "cold-"+c)
	}
	for _, r := range repos {
		if _, err := node.admin(ctx, "create-repo", benchOwner+"/"+r); err != nil {
			node.shutdown()
			return err
		}
		if _, err := git.Output(ctx, seed, nil, "push", "-q", node.url(token, r), "main"); err != nil {
			node.shutdown()
			return err
		}
	}
	if err := node.shutdown(); err != nil {
		return err
	}
	for _, c := range names {
		st := direct
		if c == "slow" {
			st = slowStore
		}
		res, err := outageCase(ctx, st, cacheDir, opMs, token, git, work, faults[c], *duration)
		fmt.Println(res.Line())
		if err != nil {
			return fmt.Errorf("case %s: %w", c, err)
		}
		if len(res.FailedOps) > 0 {
			fmt.Fprintf(os.Stderr, "  note case=%s failed_ops=%q\n", c, res.FailedOps)
		}
	}
	return nil
}

// outageCase runs one case on a fresh node over st and the shared cache:
// nothing is open until the warm repository is read.
func outageCase(ctx context.Context, st objstore.Store, cacheDir, opMs, token string, git gitrun.Env, work string,
	f outage.Fault, d time.Duration) (outage.Result, error) {
	node, err := startInProcess(ctx, st, cacheDir, opMs)
	if err != nil {
		return outage.Result{Case: f.Name}, err
	}
	defer node.shutdown()
	clone := filepath.Join(work, "warm-clone-"+f.Name)
	if _, err := git.Output(ctx, "", nil, "clone", "-q", "--bare", node.url(token, "warm"), clone); err != nil {
		return outage.Result{Case: f.Name}, err
	}
	return outage.Run(ctx, outage.Node{HTTPAddr: node.srv.HTTPAddr, MetricsAddr: node.srv.MetricsAddr, Token: token,
		Warm: benchOwner + "/warm", Cold: benchOwner + "/cold-" + f.Name}, f,
		outage.Options{Duration: d, Git: git, Work: work})
}

// seedRepo makes a repository of one commit at dir.
func seedRepo(ctx context.Context, git gitrun.Env, dir string) error {
	if _, err := git.Output(ctx, "", nil, "init", "-q", "-b", "main", dir); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644); err != nil {
		return err
	}
	if _, err := git.Output(ctx, dir, nil, "add", "a.txt"); err != nil {
		return err
	}
	_, err := git.Output(ctx, dir, nil, "commit", "-q", "-m", "one")
	return err
}
