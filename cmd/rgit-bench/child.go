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

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rgit/rgit/storage/bitmap"
	"github.com/rgit/rgit/storage/clonecache"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/walk"
	"github.com/rgit/rgit/transport/fetchpack"
	"github.com/rgit/rgit/transport/gitproto"
)

// countingWriter discards what it is given and counts it: the client end
// of a clone without the client's cost.
type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}

// runEngineChild performs one rgit engine operation in this process, so
// the parent can time it end to end and read its peak RSS:
//
//	engine-child index -in <pack> -dir <outdir>
//	engine-child clone|fetch -pack <pack> -idx <idx> -wants <file> [-haves <file>] [-bitmap <file>] [-out <file>] [-cache <dir>]
func runEngineChild(ctx context.Context, args []string) error {
	if len(args) < 1 {
		return errors.New("engine-child: missing operation")
	}
	op := args[0]
	fs := flag.NewFlagSet("engine-child "+op, flag.ContinueOnError)
	in := fs.String("in", "", "pack to index")
	dir := fs.String("dir", "", "output directory of index")
	packPath := fs.String("pack", "", "stored pack")
	idxPath := fs.String("idx", "", "its index")
	wants := fs.String("wants", "", "file of wanted ids")
	haves := fs.String("haves", "", "file of the client's ids")
	out := fs.String("out", "", "write the produced pack here instead of counting it")
	prof := fs.String("cpuprofile", "", "write a CPU profile")
	cacheDir := fs.String("cache", "", "serve a clone through the clone-pack cache in this directory")
	bitmapPath := fs.String("bitmap", "", "the pack's reachability bitmap index, if the server has one")
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
		return childServe(ctx, *packPath, *idxPath, *bitmapPath, *wants, *haves, *out, *cacheDir)
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

// childServe produces a clone or fetch pack with the server's own code
// (transport/fetchpack: sparse walk, then WritePack over the stored pack),
// for a client that asks for thin packs and ofs-deltas as git does. With
// bitmapPath the plan comes from the pack's bitmaps where they can answer
// it, as on a server whose repository has them. With cacheDir it goes
// through the clone-pack cache there, as the server does for clones.
func childServe(ctx context.Context, packPath, idxPath, bitmapPath, wantsFile, havesFile, out, cacheDir string) error {
	p, err := pack.Open(packPath, idxPath)
	if err != nil {
		return err
	}
	defer p.Close()
	set := pack.NewSet(p)
	var bm *bitmap.Index
	var log *zap.Logger
	if bitmapPath != "" {
		log = zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.Lock(os.Stderr), zap.WarnLevel))
		bm = fetchpack.OpenBitmap(bitmapPath, p, log)
	}
	req := gitproto.FetchRequest{Thin: true, OfsDelta: true}
	if req.Wants, err = readIDs(wantsFile); err != nil {
		return err
	}
	if havesFile != "" {
		if req.Haves, err = readIDs(havesFile); err != nil {
			return err
		}
	}
	var w io.Writer
	cw := &countingWriter{}
	w = cw
	var of *os.File
	if out != "" {
		if of, err = os.Create(out); err != nil {
			return err
		}
		defer of.Close()
		w = of
	}
	var st pack.WriteStats
	produce := func(w io.Writer) error {
		res, err := fetchpack.PlanWith(ctx, walk.NewGraph(set, 1<<20), bm, log, &req)
		if err != nil {
			return fmt.Errorf("walk: %w", err)
		}
		st, err = fetchpack.Write(ctx, set, w, &req, res, nil)
		return err
	}
	hit := false
	if cacheDir != "" {
		if !fetchpack.Cacheable(&req) {
			return errors.New("engine-child: only clones go through the clone-pack cache")
		}
		cache, err := clonecache.New(cacheDir, 4<<30)
		if err != nil {
			return err
		}
		key := fetchpack.CacheKey("bench/"+filepath.Base(packPath), []string{filepath.Base(packPath)}, &req)
		if hit, err = cache.Serve(ctx, key, w, produce); err != nil {
			return err
		}
	} else if err := produce(w); err != nil {
		return err
	}
	if of != nil {
		if err := of.Close(); err != nil {
			return err
		}
	}
	fmt.Printf("objects=%d bytes=%d reused=%d reused_deltas=%d deflated=%d verbatim=%v cache_hit=%v\n",
		st.Objects, st.Bytes, st.Reused, st.ReusedDeltas, st.Deflated, st.Verbatim, hit)
	return nil
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
