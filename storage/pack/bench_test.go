package pack

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/object"
)

// Benchmarks run against a real pack named by RGIT_BENCH_PACK (its .idx
// next to it); they are skipped otherwise. Compare with
// `git index-pack --threads=2` and `git pack-objects --stdout`.

func benchPack(b *testing.B) (string, string) {
	path := os.Getenv("RGIT_BENCH_PACK")
	if path == "" {
		b.Skip("RGIT_BENCH_PACK not set")
	}
	return path, strings.TrimSuffix(path, ".pack") + ".idx"
}

func BenchmarkIndexPack(b *testing.B) {
	path, _ := benchPack(b)
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	dir := b.TempDir()
	for i := 0; i < b.N; i++ {
		f, _ := os.Open(path)
		res, err := IndexPack(context.Background(), f, dir, IndexOptions{Threads: 2})
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		os.Remove(res.PackPath)
		os.Remove(res.IdxPath)
	}
}

// BenchmarkWritePackRewrite writes every object except one, which defeats
// the verbatim fast path and measures per-entry reuse.
func BenchmarkWritePackRewrite(b *testing.B) {
	path, idxPath := benchPack(b)
	p, err := Open(path, idxPath)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	var ids []object.ID
	for i := 1; i < p.Index().Count(); i++ {
		ids = append(ids, p.Index().ID(i))
	}
	b.SetBytes(p.Size())
	set := NewSet(p)
	for i := 0; i < b.N; i++ {
		if _, err := set.WritePack(context.Background(), io.Discard, ids, WriteOptions{OfsDelta: true}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadAllObjects(b *testing.B) {
	path, idxPath := benchPack(b)
	p, err := Open(path, idxPath)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	var ids []object.ID
	for i := 0; i < p.Index().Count(); i++ {
		ids = append(ids, p.Index().ID(i))
	}
	for i := 0; i < b.N; i++ {
		for _, id := range ids {
			if _, _, err := p.ReadObject(id); err != nil {
				b.Fatal(err)
			}
		}
	}
}
