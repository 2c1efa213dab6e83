package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rgit/rgit/storage/bitmap"
	"github.com/rgit/rgit/storage/clonecache"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/walk"
	"github.com/rgit/rgit/transport/service/fetchpack"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

// countingWriter discards what it is given and counts it: the client end
// of a clone without the client's cost.
type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}

// runEngineChild performs rgit engine operations in this process, so the
// parent can time them and read its peak RSS:
//
//	engine-child index -in <pack> -dir <outdir>
//	engine-child clone|fetch -pack <pack> -idx <idx> -wants <file> [-haves <file>] [-bitmap <file>] [-rev <file>] [-out <file>] [-cache <dir>] [-serve]
//
// Without -serve, clone and fetch answer one request in a fresh process,
// the cold path. With -serve the process is a running server: it opens
// the repository once and then answers one request per line of stdin (see
// serveLoop).
func runEngineChild(ctx context.Context, args []string) error {
	if len(args) < 1 {
		return errors.New("engine-child: missing operation")
	}
	op := args[0]
	fs := flag.NewFlagSet("engine-child "+op, flag.ContinueOnError)
	in := fs.String("in", "", "pack to index")
	dir := fs.String("dir", "", "output directory of index")
	var o serverOptions
	fs.StringVar(&o.packPath, "pack", "", "stored pack")
	fs.StringVar(&o.idxPath, "idx", "", "its index")
	fs.StringVar(&o.revPath, "rev", "", "the pack's reverse index file (read if valid, else written)")
	fs.StringVar(&o.bitmapPath, "bitmap", "", "the pack's reachability bitmap index, if the server has one")
	fs.StringVar(&o.cacheDir, "cache", "", "serve a clone through the clone-pack cache in this directory")
	wants := fs.String("wants", "", "file of wanted ids")
	haves := fs.String("haves", "", "file of the client's ids")
	out := fs.String("out", "", "write the produced pack here instead of counting it")
	serve := fs.Bool("serve", false, "stay up and answer one request per line of stdin")
	prof := fs.String("cpuprofile", "", "write a CPU profile")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *prof != "" {
		f, err := os.Create(*prof)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	switch op {
	case "index":
		return childIndex(ctx, *in, *dir)
	case "clone", "fetch":
		var err error
		o.req = gitproto.FetchRequest{Thin: true, OfsDelta: true}
		if o.req.Wants, err = readIDs(*wants); err != nil {
			return err
		}
		if *haves != "" {
			if o.req.Haves, err = readIDs(*haves); err != nil {
				return err
			}
		}
		s, err := openServer(o)
		if err != nil {
			return err
		}
		defer s.close()
		if *serve {
			return s.serveLoop(ctx, os.Stdin, os.Stdout)
		}
		_, line, err := s.respond(ctx, *out)
		if err != nil {
			return err
		}
		fmt.Println(line)
		return nil
	}
	return fmt.Errorf("engine-child: unknown operation %q", op)
}

// childIndex indexes a pack the way a push does: streamed from a reader.
func childIndex(ctx context.Context, in, dir string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	res, err := pack.IndexPack(ctx, bufio.NewReaderSize(f, 1<<20), dir, pack.IndexOptions{Threads: 2})
	if err != nil {
		return fmt.Errorf("index %s: %w", in, err)
	}
	fmt.Printf("objects=%d\n", len(res.Objects))
	return nil
}

// serverOptions say what a benchServer opens and what it is asked.
type serverOptions struct {
	packPath, idxPath, revPath, bitmapPath, cacheDir string
	req                                              gitproto.FetchRequest
}

// benchServer is what a running rgit server keeps of a repository across
// sessions: the open pack (its index mapped, its offset order and delta
// base cache built on first use), the pack's bitmap index, and the
// clone-pack cache. Per request it does what transport/service/engine does per
// session: a fresh commit-graph cache (engine's walk.Graph lives in the
// session), the plan (fetchpack.PlanWith: bitmaps where they answer, else
// the sparse walk), and the pack written by fetchpack.Write, for a client
// that asks for thin packs and ofs-deltas as git does.
type benchServer struct {
	o     serverOptions
	p     *pack.Pack
	set   *pack.Set
	bm    *bitmap.Stack
	log   *zap.Logger
	cache *clonecache.Cache // nil: clones are produced every time
	key   string
}

func openServer(o serverOptions) (*benchServer, error) {
	p, err := pack.OpenWith(o.packPath, o.idxPath, pack.OpenOptions{RevPath: o.revPath})
	if err != nil {
		return nil, err
	}
	s := &benchServer{o: o, p: p, set: pack.NewSet(p)}
	if o.bitmapPath != "" {
		s.log = zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.Lock(os.Stderr), zap.WarnLevel))
		s.bm = fetchpack.OpenBitmap(o.bitmapPath, p, s.log)
	}
	if o.cacheDir != "" {
		if !fetchpack.Cacheable(&o.req) {
			p.Close()
			return nil, errors.New("engine-child: only clones go through the clone-pack cache")
		}
		if s.cache, err = clonecache.New(o.cacheDir, 4<<30); err != nil {
			p.Close()
			return nil, err
		}
		s.key = fetchpack.CacheKey("bench/"+filepath.Base(o.packPath), []string{filepath.Base(o.packPath)}, &o.req)
	}
	return s, nil
}

func (s *benchServer) close() error { return s.p.Close() }

// respond answers the request once, writing the pack to the file out, or
// counting and discarding it when out is empty. It returns the time the
// request took (plan and pack, or the cache's answer) and a summary line.
func (s *benchServer) respond(ctx context.Context, out string) (time.Duration, string, error) {
	var w io.Writer = &countingWriter{}
	var of *os.File
	if out != "" {
		var err error
		if of, err = os.Create(out); err != nil {
			return 0, "", err
		}
		defer of.Close()
		w = of
	}
	var st pack.WriteStats
	produce := func(w io.Writer) error {
		res, err := fetchpack.PlanWith(ctx, walk.NewGraph(s.set, 1<<20), s.bm, s.log, &s.o.req)
		if err != nil {
			return fmt.Errorf("walk: %w", err)
		}
		st, err = fetchpack.Write(ctx, s.set, w, &s.o.req, res, nil)
		return err
	}
	start := time.Now()
	hit := false
	var err error
	if s.cache != nil {
		hit, err = s.cache.Serve(ctx, s.key, w, produce)
	} else {
		err = produce(w)
	}
	took := time.Since(start)
	if err != nil {
		return 0, "", err
	}
	if of != nil {
		if err := of.Close(); err != nil {
			return 0, "", err
		}
	}
	return took, fmt.Sprintf("objects=%d bytes=%d reused=%d reused_deltas=%d deflated=%d verbatim=%v cache_hit=%v",
		st.Objects, st.Bytes, st.Reused, st.ReusedDeltas, st.Deflated, st.Verbatim, hit), nil
}

// serveLoop answers one request per line of in until in ends: an empty
// line is a timed request whose pack is counted and discarded, any other
// line names a file to write the pack to. Each answer is one line on out,
// "request_s=<seconds> <summary>", so the parent can interleave requests
// with C git's and time each alone, without this process's start-up.
func (s *benchServer) serveLoop(ctx context.Context, in io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		took, line, err := s.respond(ctx, strings.TrimSpace(sc.Text()))
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(out, "request_s=%.6f %s\n", took.Seconds(), line); err != nil {
			return err
		}
	}
	return sc.Err()
}

func readIDs(path string) ([]object.ID, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ids []object.ID
	for _, l := range strings.Fields(string(b)) {
		id, err := object.ParseID(l)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
