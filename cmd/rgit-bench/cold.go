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

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/packcache"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/testkit/faultstore"
	"github.com/rgit/rgit/testkit/freeport"
	"github.com/rgit/rgit/transport/node"
	"github.com/rgit/rgit/transport/node/config"
)

// runCold measures cold nodes: a node whose pack cache is empty serves its
// first clone, downloading from an object store with per-request latency
// and limited bandwidth (an in-memory store behind testkit/faultstore; the
// nodes run in this process, so the slow store needs no production knob):
//
//	bench op=cold-clone fixture=<f> store=mem-<lat>ms-<bw>MBps rgit_s=<X> git_s=<warm C git clone> ratio=<r> rgit=cold-node ref=git-http-backend-warm
//	bench op=cold-clone-shared ...   (another node already stored the clone pack)
//
// rgit_s is `git clone --bare` against a node started for that run with an
// empty cache (start-up not timed; the repository was pushed through
// another node). For op=cold-clone the store holds no clone pack, so the
// node downloads the packs and builds it; for op=cold-clone-shared it holds
// the one an earlier node built. The two take turns within each run. git_s is the same clone from `git
// http-backend` on the fixture, warm (the page cache holds it): the
// comparison is asymmetric on purpose (what a first clone from a cold node
// costs against the usual one), and the line says so.
//
//	cold op=pack-download fixture=<f> store=… parallel_s=<X> single_s=<Y> ratio=<X/Y>
//
// The last line times the download alone (the repository's packs into an
// empty pack cache): parallel ranged reads against one Get per object, so
// the part of a cold clone that this bench's store shapes is visible
// without the client's index-pack, which dominates both clone times.
//
// Bandwidth is per body by default (one S3 connection is limited so, and
// parallel ranged reads add up); -link makes it one link all bodies share.
func runCold(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("cold", flag.ExitOnError)
	var c commonFlags
	c.register(fs, "medium")
	latency := fs.Duration("latency", 20*time.Millisecond, "object store latency per request")
	bandwidth := fs.Int64("bandwidth", 100e6, "object store bandwidth, bytes per second")
	link := fs.Bool("link", false, "one bandwidth budget shared by all reads (default: per read)")
	fs.Parse(args)
	gb, err := c.startGitBench(ctx, "cold-work-")
	if err != nil {
		return err
	}
	defer gb.close()
	storeName := fmt.Sprintf("mem-%dms-%dMBps", latency.Milliseconds(), *bandwidth/1e6)
	if *link {
		storeName += "-link"
	}
	for _, f := range gb.fxs {
		hf := &httpFixture{Fixture: f, work: gb.work}
		if hf.mainTip, err = f.Rev(ctx, "refs/heads/main"); err != nil {
			return err
		}
		gitURL, err := gb.gs.serveFixture(f)
		if err != nil {
			return err
		}
		res, err := hf.benchCold(ctx, gitURL, c.runs, func(inner objstore.Store) *faultstore.Store {
			slow := faultstore.New(inner, 1)
			slow.AddRule(faultstore.Rule{Latency: *latency, Bandwidth: *bandwidth, SharedBandwidth: *link})
			return slow
		})
		if err != nil {
			return err
		}
		for _, r := range res {
			rg, g := median(r.rgit), median(r.git)
			fmt.Printf("bench op=%s fixture=%s store=%s rgit_s=%.3f git_s=%.3f ratio=%.2f rgit=cold-node ref=git-http-backend-warm\n", r.op, f.Name, storeName, rg, g, rg/g)
			fmt.Fprintf(os.Stderr, "  note op=%s fixture=%s rgit_runs=%s git_runs=%s store_gets=%s\n", r.op, f.Name, runs(r.rgit), runs(r.git), r.notes)
			if r.op == "cold-clone" {
				par, single := median(r.dlParallel), median(r.dlSingle)
				fmt.Printf("cold op=pack-download fixture=%s store=%s parallel_s=%.3f single_s=%.3f ratio=%.2f\n", f.Name, storeName, par, single, par/single)
			}
		}
	}
	return nil
}

type coldResult struct {
	op        string
	rgit, git []sample
	notes     string
	// The download alone, into an empty pack cache: parallel ranged reads
	// against one Get per object (as before them).
	dlParallel, dlSingle []sample
}

// benchCold pushes the fixture through a seeding node, then times clones
// from fresh nodes on the slowed store, and warm clones from C git
// (interleaved with them, so both see the same load).
func (hf *httpFixture) benchCold(ctx context.Context, gitURL string, runs int, slowed func(objstore.Store) *faultstore.Store) ([]coldResult, error) {
	store := memstore.New()
	seed, err := startInProcess(ctx, store, filepath.Join(hf.work, "cache-seed"))
	if err != nil {
		return nil, err
	}
	token, err := seed.admin(ctx, "add-token", benchOwner)
	if err == nil {
		_, err = seed.admin(ctx, "create-repo", benchOwner+"/"+hf.Name)
	}
	if err == nil {
		_, err = timeGit(ctx, hf.Dir, "push", "-q", "--mirror", seed.url(token, hf.Name))
	}
	if serr := seed.shutdown(); err == nil {
		err = serr
	}
	if err != nil {
		return nil, fmt.Errorf("seed the store: %w", err)
	}
	// One untimed clone warms C git's side (page cache, pack bitmaps),
	// one from a cold node stores the clone pack for op=cold-clone-shared.
	if _, err := hf.cloneOnce(ctx, gitURL); err != nil {
		return nil, fmt.Errorf("git side: %w", err)
	}
	slow := slowed(store)
	if _, _, err := hf.coldClone(ctx, slow, token, "warm-up"); err != nil {
		return nil, err
	}
	// The operations take turns within each run, each followed by C git's
	// clone, so that all three see the same load.
	out := []coldResult{{op: "cold-clone-shared"}, {op: "cold-clone"}}
	var notes [2][]string
	for run := range runs {
		for i := range out {
			r := &out[i]
			if r.op == "cold-clone" {
				// Nothing another node built: this node builds the pack
				// (and stores it again for the next run's shared clone).
				if err := deletePrefix(ctx, store, repo.ClonePackPrefix(names.MustParse(benchOwner+"/"+hf.Name))); err != nil {
					return nil, err
				}
			}
			s, gets, err := hf.coldClone(ctx, slow, token, fmt.Sprintf("%s-%d", r.op, run))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", r.op, err)
			}
			r.rgit = append(r.rgit, s)
			notes[i] = append(notes[i], gets)
			if r.op == "cold-clone" {
				for _, single := range []bool{false, true} {
					d, err := hf.download(ctx, store, slow, single, fmt.Sprintf("dl-%d-%v", run, single))
					if err != nil {
						return nil, err
					}
					if single {
						r.dlSingle = append(r.dlSingle, d)
					} else {
						r.dlParallel = append(r.dlParallel, d)
					}
				}
			}
			g, err := hf.cloneOnce(ctx, gitURL)
			if err != nil {
				return nil, fmt.Errorf("git side: %w", err)
			}
			r.git = append(r.git, g)
		}
	}
	for i := range out {
		out[i].notes = strings.Join(notes[i], ",")
	}
	return out, nil
}

// coldClone starts a node with an empty cache on the slow store, times
// one clone from it, and stops it (which waits for the upload of a clone
// pack it built). gets is the store reads the clone took: Gets+GetRanges.
func (hf *httpFixture) coldClone(ctx context.Context, slow *faultstore.Store, token, name string) (s sample, gets string, err error) {
	node, err := startInProcess(ctx, slow, filepath.Join(hf.work, "cache-"+name))
	if err != nil {
		return s, "", err
	}
	slow.ResetCounts()
	s, err = hf.cloneOnce(ctx, node.url(token, hf.Name))
	gets = fmt.Sprintf("%d+%d", slow.Count(faultstore.OpGet), slow.Count(faultstore.OpGetRange))
	if serr := node.shutdown(); err == nil {
		err = serr
	}
	return s, gets, err
}

// download times fetching the repository's packs into an empty pack
// cache on the slow store: in parallel ranges, or (single) one Get per
// object. The packs are listed on the unslowed store.
func (hf *httpFixture) download(ctx context.Context, store objstore.Store, slow *faultstore.Store, single bool, name string) (sample, error) {
	dir := filepath.Join(hf.work, "cache-"+name)
	defer os.RemoveAll(dir)
	opt := objstore.ParallelOptions{}
	if single {
		opt.Chunk = 1 << 40 // every object fits one chunk: one Get
	}
	c, err := packcache.Open(dir, slow, nil, packcache.WithParallel(opt))
	if err != nil {
		return sample{}, err
	}
	defer c.Close()
	prefix := "objects/" + benchOwner + "/" + hf.Name + "/pack/"
	var packs []string
	for info, err := range store.List(ctx, prefix, "") {
		if err != nil {
			return sample{}, err
		}
		if n, ok := strings.CutSuffix(strings.TrimPrefix(info.Key, prefix), ".pack"); ok {
			packs = append(packs, n)
		}
	}
	start := time.Now()
	for _, n := range packs {
		pk, ik := repo.PackKeys(names.MustParse(benchOwner+"/"+hf.Name), n)
		_, release, err := c.Get(ctx, pk, ik, n)
		if err != nil {
			return sample{}, err
		}
		release()
	}
	return sample{secs: time.Since(start).Seconds()}, nil
}

// cloneOnce times one bare clone and checks it.
func (hf *httpFixture) cloneOnce(ctx context.Context, url string) (sample, error) {
	dst := filepath.Join(hf.work, "clone")
	defer os.RemoveAll(dst)
	s, err := timeGit(ctx, hf.work, "clone", "-q", "--bare", url, dst)
	if err != nil {
		return s, err
	}
	return s, hf.checkMain(ctx, dst)
}

func deletePrefix(ctx context.Context, st objstore.Store, prefix string) error {
	var keys []string
	for info, err := range st.List(ctx, prefix, "") {
		if err != nil {
			return err
		}
		keys = append(keys, info.Key)
	}
	for _, k := range keys {
		if err := st.Delete(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// inProcessNode is a node run by node.Start in this process on a given
// store; it answers admin calls like a child rgitServer.
type inProcessNode struct {
	*rgitServer
	srv *node.Server
}

// startInProcess starts a node on st; extra ("RGIT_X=value") adds to or
// overrides its configuration.
func startInProcess(ctx context.Context, st objstore.Store, cacheDir string, extra ...string) (*inProcessNode, error) {
	var last error
	for range 3 { // the probed peer ports may be taken meanwhile
		peer, err := freeport.Run(2)
		if err != nil {
			return nil, err
		}
		env := map[string]string{
			"RGIT_STORE_URL":  "mem://",
			"RGIT_CACHE_DIR":  cacheDir,
			"RGIT_HOST_KEY":   filepath.Join(filepath.Dir(cacheDir), "host_key"),
			"RGIT_HTTP_ADDR":  "127.0.0.1:0",
			"RGIT_SSH_ADDR":   "127.0.0.1:0",
			"RGIT_PEER_ADDR":  "127.0.0.1:" + strconv.Itoa(peer),
			"RGIT_LOG_LEVEL":  "warn",
			"RGIT_DRAIN_SECS": "10",
		}
		for _, kv := range extra {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		cfg, err := config.Parse(func(k string) string { return env[k] })
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(cacheDir, 0o755); err != nil {
			return nil, err
		}
		srv, err := node.Start(ctx, cfg, zap.NewNop(), node.WithStore(st))
		if err != nil {
			last = err
			continue
		}
		return &inProcessNode{rgitServer: &rgitServer{httpAddr: srv.HTTPAddr, adminAddr: srv.AdminAddr, secret: srv.PeerSecret}, srv: srv}, nil
	}
	return nil, fmt.Errorf("start an in-process node: %w", last)
}

func (n *inProcessNode) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return n.srv.Shutdown(ctx)
}
