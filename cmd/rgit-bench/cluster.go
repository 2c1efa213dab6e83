package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	rc "github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/testkit/multiproc"
	"github.com/rgit/rgit/transport/wire/peertls"
)

// runCluster measures cluster mode on three real nodes (testkit/multiproc)
// sharing one file store:
//
//	bench op=forward-clone fixture=<f> rgit_s=<via a forwarding node> direct_s=<direct to the owner> ratio=… rgit_rss_mb=<forwarder's peak RSS> rgit=forwarded ref=rgit-direct
//	bench op=handoff-first-clone fixture=<f> rgit_s=<first clone on the new owner after a drain> warm_s=<warm clone on the old owner> ratio=… rgit=first-after-handoff ref=rgit-warm-owner
//	takeover op=kill9 seconds=<first successful fetch through a survivor after kill -9 of the owner>
//
// The reference is rgit itself: the ratio is the cost of the hop (or of
// the hand-over). Every clone is checked to end at the fixture's main.
// The lease-plane lines come first, in process: op=claim and
// op=restart-storm (lease.go), then op=renew, op=map-load and
// op=follower-poll (leaseplane.go).
func runCluster(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("cluster", flag.ExitOnError)
	var c commonFlags
	c.register(fs, "medium")
	rgitBin := fs.String("rgit", filepath.Join("bin", "rgit"), "rgit server binary (`make build`)")
	peerTLS := fs.Bool("peer-tls", false, "mutual TLS on the peer ports (certificates generated for the run)")
	leaseOnly := fs.Bool("lease-only", false, "only the in-process lease-plane lines (op=claim, op=restart-storm, op=renew, op=map-load, op=follower-poll)")
	claimFor := fs.Duration("claim-for", 5*time.Second, "how long each op=claim concurrency runs")
	stormRepos := fs.Int("storm-repos", 10000, "repositories in op=restart-storm")
	stormLimit := fs.Duration("storm-limit", time.Minute, "give op=restart-storm up after this long")
	renewLeases := fs.String("renew-leases", "1000,100000", "comma-separated lease counts for op=renew")
	mapEntries := fs.Int("map-entries", 1000000, "ownership map entries for op=map-load and op=follower-poll")
	fs.Parse(args)
	var renew []int
	for _, f := range strings.Split(*renewLeases, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-renew-leases: %q is not a positive count", f)
		}
		renew = append(renew, n)
	}
	err := runLeaseBench(ctx, os.Stdout, *claimFor, *stormRepos, *stormLimit)
	if err == nil {
		err = runLeasePlane(ctx, renew, *mapEntries)
	}
	if err != nil || *leaseOnly {
		return err
	}
	bin, err := rgitBinary(*rgitBin)
	if err != nil {
		return err
	}
	fxs, err := c.build(ctx)
	if err != nil {
		return err
	}
	work, err := c.workDir("cluster-work-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	o := multiproc.Options{Bin: bin, Dir: work, Nodes: 3}
	if *peerTLS {
		certs := filepath.Join(work, "peer-certs")
		if err := peertls.Generate(certs, "rgit-bench"); err != nil {
			return err
		}
		o.PeerTLS = peertls.Files{Cert: filepath.Join(certs, peertls.PeerFile), Key: filepath.Join(certs, peertls.PeerKeyFile),
			CA: filepath.Join(certs, peertls.CAFile)}
	}
	cl, err := multiproc.Start(ctx, o)
	if err != nil {
		return err
	}
	defer cl.Stop()
	// rgit-0 is the leader (never killed here), rgit-1 owns the repos,
	// rgit-2 forwards.
	n0, owner, fwd := cl.Nodes[0], cl.Nodes[1], cl.Nodes[2]
	out, err := cl.Admin(ctx, n0, "add-token", "bench")
	if err != nil {
		return fmt.Errorf("add-token: %w", err)
	}
	lines := strings.Split(out, "\n")
	token := strings.TrimSpace(lines[len(lines)-1])

	var last string
	for _, f := range fxs {
		repo := "bench/" + f.Name
		if _, err := cl.Admin(ctx, n0, "create-repo", repo); err != nil {
			return fmt.Errorf("create-repo %s: %w", repo, err)
		}
		// Pushing through rgit-1 makes it the owner.
		if _, err := timeGit(ctx, f.Dir, "push", "-q", "--mirror", owner.HTTPURL(token, repo)); err != nil {
			return err
		}
		hf := &httpFixture{Fixture: f, work: work}
		if hf.mainTip, err = f.Rev(ctx, "refs/heads/main"); err != nil {
			return err
		}
		r := result{op: "forward-clone", fixture: f.Name, cmp: comparison{rgit: "forwarded", ref: "rgit-direct", refField: "direct"}}
		for i := 0; i < c.runs; i++ {
			for _, side := range []struct {
				n   *multiproc.Node
				dst *[]sample
			}{{fwd, &r.rgit}, {owner, &r.git}} {
				s, err := hf.cloneOnce(ctx, side.n.HTTPURL(token, repo))
				if err != nil {
					return fmt.Errorf("clone via %s: %w\n%s", side.n.Name, err, side.n.LogTail(10))
				}
				*side.dst = append(*side.dst, s)
			}
		}
		r.rgitRSSMB = float64(procHWM(strconv.Itoa(fwd.Pid()))) / 1024
		r.report(os.Stdout, os.Stderr)
		last = repo
	}

	secs, err := takeover(ctx, owner, fwd, token, last)
	if err != nil {
		return err
	}
	fmt.Printf("takeover op=kill9 seconds=%.2f\n", secs)
	if err := owner.Start(); err != nil {
		return err
	}
	if err := owner.WaitReady(ctx); err != nil {
		return err
	}
	for _, f := range fxs {
		hf := &httpFixture{Fixture: f, work: work}
		if hf.mainTip, err = f.Rev(ctx, "refs/heads/main"); err != nil {
			return err
		}
		if err := handoff(ctx, cl, c.runs, token, "bench/"+f.Name, hf); err != nil {
			return err
		}
	}
	return nil
}

// takeover runs back-to-back ls-remotes of repo through via, kills owner
// with SIGKILL and reports the seconds until the first one succeeds.
func takeover(ctx context.Context, owner, via *multiproc.Node, token, repo string) (float64, error) {
	url := via.HTTPURL(token, repo)
	if _, err := timeGit(ctx, "", "ls-remote", url); err != nil {
		return 0, fmt.Errorf("ls-remote before the kill: %w", err)
	}
	killed := time.Now()
	if err := owner.Kill(); err != nil {
		return 0, err
	}
	for time.Since(killed) < 30*time.Second {
		if _, err := timeGit(ctx, "", "ls-remote", url); err == nil {
			return time.Since(killed).Seconds(), nil
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
	}
	return 0, errors.New("no successful fetch within 30s of kill -9 of the owner")
}

// ownerRe matches admin "where" for a live lease.
var ownerRe = regexp.MustCompile(`is owned by (\S+) \(epoch \d+, lease live`)

// handoff measures the first clone after a drain hand-over: repo's owner
// is stopped with SIGTERM (it drains, hinting its successor to prewarm),
// then repo is cloned once on the node that takes it over, against the
// median warm clone on the old owner. The old owner is started again.
func handoff(ctx context.Context, cl *multiproc.Cluster, runs int, token, repo string, hf *httpFixture) error {
	out, err := cl.Admin(ctx, cl.Nodes[0], "where", repo)
	m := ownerRe.FindStringSubmatch(out)
	if err != nil || m == nil {
		return fmt.Errorf("owner of %s: %q %v", repo, out, err)
	}
	var owner *multiproc.Node
	var rest rc.LiveSet
	for _, n := range cl.Nodes {
		if n.Name == m[1] {
			owner = n
		} else {
			rest = append(rest, rc.NodeWeight{Node: n.Name, Weight: 1})
		}
	}
	if owner == nil {
		return fmt.Errorf("owner of %s: unknown node %q", repo, m[1])
	}
	fx := hf.Name
	r := result{op: "handoff-first-clone", fixture: fx, cmp: comparison{rgit: "first-after-handoff", ref: "rgit-warm-owner", refField: "warm"}}
	for i := 0; i < runs; i++ {
		s, err := hf.cloneOnce(ctx, owner.HTTPURL(token, repo))
		if err != nil {
			return fmt.Errorf("warm clone on %s: %w", owner.Name, err)
		}
		r.git = append(r.git, s)
	}
	if err := owner.Term(time.Minute); err != nil {
		return err
	}
	// The successor, where the leader steers the released repository.
	var next *multiproc.Node
	for _, n := range cl.Nodes {
		if n.Name == rc.Rendezvous(names.MustParse(repo), rest) {
			next = n
		}
	}
	s, err := hf.cloneOnce(ctx, next.HTTPURL(token, repo))
	if err != nil {
		return fmt.Errorf("first clone on %s after %s drained: %w\n%s", next.Name, owner.Name, err, next.LogTail(10))
	}
	r.rgit = append(r.rgit, s)
	r.rgitRSSMB = float64(procHWM(strconv.Itoa(next.Pid()))) / 1024
	r.report(os.Stdout, os.Stderr)
	fmt.Fprintf(os.Stderr, "  note op=handoff-first-clone fixture=%s from=%s to=%s %s\n", fx, owner.Name, next.Name, prewarmed(next))
	if err := owner.Start(); err != nil {
		return err
	}
	return owner.WaitReady(ctx)
}

// prewarmed reads node n's prewarm counter from /metrics.
func prewarmed(n *multiproc.Node) string {
	v, err := nodeMetrics(context.Background(), n, "rgit_prewarm_bytes_total")
	if err != nil {
		return "prewarm_bytes=?"
	}
	return fmt.Sprintf("prewarm_bytes=%.0f", v[0])
}
