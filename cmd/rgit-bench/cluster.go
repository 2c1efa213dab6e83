package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rgit/rgit/testkit/multiproc"
	"github.com/rgit/rgit/transport/admin"
	"github.com/rgit/rgit/transport/peertls"
)

// runCluster measures cluster mode on three real nodes (testkit/multiproc)
// sharing one file store:
//
//	bench op=forward-clone fixture=<f> rgit_s=<via a forwarding node> git_s=<direct to the owner> ratio=… rgit_rss_mb=<forwarder's peak RSS>
//	takeover op=kill9 seconds=<first successful fetch through a survivor after kill -9 of the owner>
//
// Here git_s is rgit itself, direct: the ratio is the cost of the hop.
func runCluster(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("cluster", flag.ExitOnError)
	var c commonFlags
	c.register(fs, "medium")
	rgitBin := fs.String("rgit", filepath.Join("bin", "rgit"), "rgit server binary (`make build`)")
	peerTLS := fs.Bool("peer-tls", false, "mutual TLS on the peer ports (certificates generated for the run)")
	fs.Parse(args)
	bin, err := filepath.Abs(*rgitBin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("rgit binary: %w (run `make build` or pass -rgit)", err)
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
	out, err := cl.Admin(ctx, n0, admin.Request{Command: "add-token", Args: []string{"bench"}})
	if err != nil {
		return fmt.Errorf("add-token: %w", err)
	}
	lines := strings.Split(out, "\n")
	token := strings.TrimSpace(lines[len(lines)-1])

	var last string
	for _, f := range fxs {
		repo := "bench/" + f.Name
		if _, err := cl.Admin(ctx, n0, admin.Request{Command: "create-repo", Args: []string{repo}}); err != nil {
			return fmt.Errorf("create-repo %s: %w", repo, err)
		}
		// Pushing through rgit-1 makes it the owner.
		if _, err := timeGit(ctx, f.Dir, "push", "-q", "--mirror", owner.HTTPURL(token, repo)); err != nil {
			return err
		}
		r := result{op: "forward-clone", fixture: f.Name}
		for i := 0; i < c.runs; i++ {
			for _, side := range []struct {
				n   *multiproc.Node
				dst *[]sample
			}{{fwd, &r.rgit}, {owner, &r.git}} {
				dst := filepath.Join(work, "clone")
				os.RemoveAll(dst)
				s, err := timeGit(ctx, work, "clone", "-q", "--bare", side.n.HTTPURL(token, repo), dst)
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
