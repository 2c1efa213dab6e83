package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rgit/rgit/testkit/fixture"
)

// Node metrics the pack-URI bench reads.
const (
	uriOffered    = `rgit_pack_uri_fetches_total{result="offered"}`
	uriStoreBytes = `rgit_pack_uri_bytes_total{from="store"}`
	nodeBytesOut  = `rgit_git_bytes_out_total{op="upload-pack",transport="http"}`
)

// runPackURIs measures clones from the object store (protocol v2
// packfile-uris) on versitygw: a full bare clone of each fixture, pushed
// and repacked into one bitmapped pack, by a client that accepts pack
// URIs against one that does not, the two in turn on the same node
// (clone-pack cache off, so every inline clone is computed):
//
//	bench op=packuri-clone fixture=<f>-s3 node_mb=… node_mb_inline=… pack_mb=… node_share=… rgit_s=… inline_s=… ratio=… rgit_rss_mb=… rgit=pack-uris ref=inline
//
// rgit_s is the clone with pack URIs, inline_s without; node_mb and
// node_mb_inline are the bytes the node itself sent for one clone
// (upload-pack answers), pack_mb the pack the client downloaded from the
// store, node_share node_mb over pack_mb. Every clone is checked to end
// at the fixture's main, and every URI clone to have been offered the
// pack.
func runPackURIs(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("packuris", flag.ExitOnError)
	var c commonFlags
	c.register(fs, "medium")
	rgitBin := fs.String("rgit", filepath.Join("bin", "rgit"), "rgit server binary (`make build`)")
	fs.Parse(args)
	bin, err := rgitBinary(*rgitBin)
	if err != nil {
		return err
	}
	fxs, err := c.build(ctx)
	if err != nil {
		return err
	}
	work, err := c.workDir("packuris-work-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	s3, err := startS3(work)
	if err != nil {
		return err
	}
	defer s3.Close()
	for _, f := range fxs {
		env := rgitEnv{bin: bin, storeURL: "s3://" + s3.Bucket + "/" + f.Name,
			cacheDir: filepath.Join(work, "cache-"+f.Name), hostKey: filepath.Join(work, "host_key"),
			extra: append(s3.Env(), "RGIT_CLONE_CACHE_BYTES=0", "RGIT_MAINTENANCE_SLOTS=0")}
		r, err := benchPackURIs(ctx, f, env, work, c.runs)
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
		r.report(os.Stdout, os.Stderr)
	}
	return nil
}

func benchPackURIs(ctx context.Context, f *fixture.Fixture, env rgitEnv, work string, runs int) (result, error) {
	res := result{op: "packuri-clone", fixture: f.Name + "-s3", cmp: comparison{rgit: "pack-uris", ref: "inline", refField: "inline"}}
	hf := &httpFixture{Fixture: f, work: work}
	var err error
	if hf.mainTip, err = f.Rev(ctx, "refs/heads/main"); err != nil {
		return res, err
	}
	srv, err := startRgit(ctx, env)
	if err != nil {
		return res, err
	}
	var nodeURI, nodeInline, packBytes float64
	err = func() error {
		token, err := srv.admin(ctx, "add-token", benchOwner)
		if err != nil {
			return err
		}
		if _, err := srv.admin(ctx, "create-repo", benchOwner+"/uris"); err != nil {
			return err
		}
		url := srv.url(token, "uris")
		if _, err := timeGit(ctx, f.Dir, "push", "-q", "--mirror", url); err != nil {
			return err
		}
		if _, err := srv.admin(ctx, "repack", benchOwner+"/uris"); err != nil {
			return err
		}
		// clone clones url once, with or without pack URIs, and returns
		// its time, the bytes the node sent and those the store sent.
		clone := func(uris bool) (sample, float64, float64, error) {
			dst := filepath.Join(work, "clone")
			defer os.RemoveAll(dst)
			args := []string{"clone", "-q", "--bare", url, dst}
			if uris {
				args = append([]string{"-c", "fetch.uriprotocols=http"}, args...)
			}
			var before [3]float64
			for i, m := range []string{nodeBytesOut, uriOffered, uriStoreBytes} {
				if before[i], _, err = srv.metric(ctx, m); err != nil {
					return sample{}, 0, 0, err
				}
			}
			s, err := timeGit(ctx, work, args...)
			if err != nil {
				return s, 0, 0, err
			}
			if err := hf.checkMain(ctx, dst); err != nil {
				return s, 0, 0, err
			}
			var after [3]float64
			for i, m := range []string{nodeBytesOut, uriOffered, uriStoreBytes} {
				if after[i], _, err = srv.metric(ctx, m); err != nil {
					return sample{}, 0, 0, err
				}
			}
			if offered := after[1] - before[1]; offered != map[bool]float64{true: 1, false: 0}[uris] {
				return s, 0, 0, fmt.Errorf("pack URIs %v: %v offered", uris, offered)
			}
			return s, after[0] - before[0], after[2] - before[2], nil
		}
		// Untimed: fill the node's pack cache.
		if _, _, _, err := clone(false); err != nil {
			return err
		}
		for range runs {
			s, node, _, err := clone(false)
			if err != nil {
				return err
			}
			res.git, nodeInline = append(res.git, s), node
			if s, nodeURI, packBytes, err = clone(true); err != nil {
				return err
			}
			res.rgit = append(res.rgit, s)
		}
		return nil
	}()
	rss, serr := srv.stop()
	if err != nil {
		return res, fmt.Errorf("%w\nrgit log:\n%s", err, lastLines(srv.log.Bytes(), 15))
	}
	if serr != nil {
		return res, serr
	}
	res.rgitRSSMB = float64(rss) / 1024
	share := 0.0
	if packBytes > 0 {
		share = nodeURI / packBytes
	}
	res.labels = []string{fmt.Sprintf("node_mb=%.2f", nodeURI/(1<<20)), fmt.Sprintf("node_mb_inline=%.1f", nodeInline/(1<<20)),
		fmt.Sprintf("pack_mb=%.1f", packBytes/(1<<20)), fmt.Sprintf("node_share=%.3f", share)}
	return res, nil
}
