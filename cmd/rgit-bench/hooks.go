package main

// rgit-bench hooks: what webhooks cost a push, and how soon an
// acknowledged push is announced. One node, two repositories pushed in
// turn, one without hooks and one with five (all to one receiver on
// loopback that verifies signatures); deliveries flow while the pushes go
// on, as in production. Prints
//
//	bench op=hooks pushes=<n> push0_p50_ms=… push0_p90_ms=… push5_p50_ms=… push5_p90_ms=… slowdown_pct=…
//	      deliveries=<5n> delivery_p50_ms=… delivery_p99_ms=… ack_p50_ms=… ack_p99_ms=…
//
// push<k> is the wall time of `git push` (one small commit) with k hooks;
// slowdown_pct compares the medians. delivery is a delivery's arrival at
// the receiver minus its event's time (when the node built the push's
// transaction: the commit, then the outbox, the walk of the new commits,
// signing and the request); ack is the arrival minus when git push exited
// (negative: the delivery arrived before git had finished).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/rgit/rgit/testkit/fixture"
	"github.com/rgit/rgit/testkit/hookrecv"
	"github.com/rgit/rgit/transport/product/hooks"
)

func runHooks(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("hooks", flag.ExitOnError)
	n := fs.Int("n", 200, "pushes per repository")
	rgitBin := fs.String("rgit", filepath.Join("bin", "rgit"), "rgit server binary (`make build`)")
	dir := fs.String("dir", fixture.DefaultDir(), "scratch directory base (default $RGIT_BENCH_DIR or ./bench/fixtures)")
	fs.Parse(args)
	if *n < 2 {
		return errors.New("-n must be at least 2")
	}
	bin, err := rgitBinary(*rgitBin)
	if err != nil {
		return err
	}
	work, err := scratchDir(*dir, "hooks-work-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	srv, err := startRgit(ctx, rgitEnv{bin: bin, storeURL: "file://" + filepath.Join(work, "store"),
		cacheDir: filepath.Join(work, "cache"), hostKey: filepath.Join(work, "host_key"),
		extra: []string{"RGIT_HOOK_ALLOW=127.0.0.0/8"}})
	if err != nil {
		return err
	}
	err = benchHooks(ctx, srv, work, *n)
	if _, serr := srv.stop(); err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("%w\nrgit log:\n%s", err, lastLines(srv.log.Bytes(), 15))
	}
	return nil
}

// hookedPush is one push to the repository with hooks.
type hookedPush struct {
	after string
	acked time.Time
}

func benchHooks(ctx context.Context, srv *rgitServer, work string, n int) error {
	const (
		secret = "bench-hook-secret-0123456789"
		nHooks = 5
	)
	rcv, err := hookrecv.Start(secret)
	if err != nil {
		return err
	}
	defer rcv.Close()
	token, err := srv.admin(ctx, "add-token", benchOwner)
	if err != nil {
		return err
	}
	names := []string{"plain", "hooked"}
	srcs := make([]string, len(names))
	for i, name := range names {
		if _, err := srv.admin(ctx, "create-repo", benchOwner+"/"+name); err != nil {
			return err
		}
		srcs[i] = filepath.Join(work, name)
		if _, err := fixture.Git(ctx, work, nil, "init", "-q", "-b", "main", srcs[i]); err != nil {
			return err
		}
	}
	for range nHooks {
		if _, err := srv.admin(ctx, "add-hook", benchOwner+"/hooked", rcv.URL, "--secret", secret); err != nil {
			return err
		}
	}
	pushTimes := make([][]time.Duration, len(names))
	var pushed []hookedPush
	for i := 1; i <= n; i++ {
		// In turn, so that drift (the store growing, the cache warming)
		// falls on both alike.
		for k, src := range srcs {
			if err := maintCommit(ctx, src, i); err != nil {
				return err
			}
			start := time.Now()
			if _, err := fixture.Git(ctx, src, nil, "push", "-q", srv.url(token, names[k]), "main"); err != nil {
				return fmt.Errorf("push %d to %s: %w", i, names[k], err)
			}
			acked := time.Now()
			pushTimes[k] = append(pushTimes[k], acked.Sub(start))
			if k == 1 {
				after, err := revParse(ctx, src, "HEAD")
				if err != nil {
					return err
				}
				pushed = append(pushed, hookedPush{after: after, acked: acked})
			}
		}
	}
	want := nHooks * n
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if _, err := rcv.Wait(wctx, func([]hookrecv.Delivery) bool { return len(rcv.Received()) >= want }); err != nil {
		return err
	}
	ackAt := map[string]time.Time{}
	for _, p := range pushed {
		ackAt[p.after] = p.acked
	}
	var fromCommit, fromAck []time.Duration
	for _, d := range rcv.Received() {
		var p hooks.Payload
		if err := d.Decode(&p); err != nil || !d.SignatureOK {
			return fmt.Errorf("delivery %s: signature ok %v, %v", d.ID, d.SignatureOK, err)
		}
		fromCommit = append(fromCommit, d.At.Sub(p.Time))
		fromAck = append(fromAck, d.At.Sub(ackAt[p.After]))
	}
	for _, s := range append(pushTimes, fromCommit, fromAck) {
		slices.Sort(s)
	}
	p0, p5 := ms(percentile(pushTimes[0], 50)), ms(percentile(pushTimes[1], 50))
	fmt.Printf("bench op=hooks pushes=%d push0_p50_ms=%.1f push0_p90_ms=%.1f push5_p50_ms=%.1f push5_p90_ms=%.1f slowdown_pct=%.1f "+
		"deliveries=%d delivery_p50_ms=%.1f delivery_p99_ms=%.1f ack_p50_ms=%.1f ack_p99_ms=%.1f\n",
		n, p0, ms(percentile(pushTimes[0], 90)), p5, ms(percentile(pushTimes[1], 90)), 100*(p5-p0)/p0,
		len(fromCommit), ms(percentile(fromCommit, 50)), ms(percentile(fromCommit, 99)),
		ms(percentile(fromAck, 50)), ms(percentile(fromAck, 99)))
	return nil
}
