package pack

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/object"
)

// resign recomputes the trailer of a pack whose body was edited.
func resign(p []byte) []byte {
	body := p[:len(p)-20]
	sum := sha1.Sum(body)
	return append(bytes.Clone(body), sum[:]...)
}

func deltaOf(base, result string) []byte { return makeDelta([]byte(base), []byte(result)) }

func TestIndexPackHostile(t *testing.T) {
	const base = "hello world, this is the base object\n"
	good := buildPack(whole(object.Blob, base), ofsD(0, deltaOf(base, base+"more\n")))
	chain := []tEntry{whole(object.Blob, chainContent(0))}
	for i := 1; i <= 5; i++ {
		chain = append(chain, ofsD(i-1, deltaOf(chainContent(i-1), chainContent(i))))
	}
	bomb := whole(object.Blob, "")
	bomb.declared = 10
	bomb.rawZ = zlibBytes(make([]byte, 10<<20))
	short := whole(object.Blob, "0123456789")
	short.declared = 20
	badVersion := bytes.Clone(good)
	binary.BigEndian.PutUint32(badVersion[4:], 4)
	badType := buildPack(whole(object.Blob, "x"))
	badType[12] = 5<<4 | 1
	ofsMid := buildPack(whole(object.Blob, base), whole(object.Blob, "pad"), ofsD(0, deltaOf(base, base+"x")))
	// Point the delta at offset 13 (inside object 0) instead of 12.
	ofsMidHdr := len(ofsMid) - 20 - len(zlibBytes(deltaOf(base, base+"x"))) - 2
	ofsMid[ofsMidHdr+1]--
	ofsMid = resign(ofsMid)
	fewer := bytes.Clone(good)
	binary.BigEndian.PutUint32(fewer[8:], 1)
	fewer = resign(fewer)
	// Bad zlib streams: each of the inflater's data errors is corruption.
	badZlib := func(edit func(z []byte) []byte) tEntry {
		e := whole(object.Blob, base)
		e.rawZ = edit(zlibBytes([]byte(base)))
		return e
	}
	badHeader := badZlib(func(z []byte) []byte { z[0] ^= 0xff; return z })
	badAdler := badZlib(func(z []byte) []byte { z[len(z)-1] ^= 1; return z })
	badBlock := badZlib(func(z []byte) []byte { return []byte{0x78, 0x9c, 0x07} }) // reserved block type

	tests := []struct {
		name string
		pack []byte
		opts IndexOptions
		want error
		msg  string
	}{
		{"bad signature", append([]byte("PACX"), good[4:]...), IndexOptions{}, ErrCorrupt, "bad signature"},
		{"bad version", badVersion, IndexOptions{}, ErrCorrupt, "unsupported version"},
		{"bad trailer", append(bytes.Clone(good[:len(good)-1]), good[len(good)-1]^1), IndexOptions{}, ErrChecksum, "checksum"},
		{"trailing garbage", append(bytes.Clone(good), 0), IndexOptions{}, ErrCorrupt, "trailing garbage"},
		{"fewer objects than data", fewer, IndexOptions{}, ErrChecksum, ""},
		{"zip bomb", buildPack(bomb), IndexOptions{}, ErrCorrupt, "exceeds declared size"},
		{"bad zlib header", buildPack(badHeader), IndexOptions{}, ErrCorrupt, "inflate"},
		{"bad zlib checksum", buildPack(badAdler), IndexOptions{}, ErrCorrupt, "inflate"},
		{"bad deflate block", buildPack(badBlock), IndexOptions{}, ErrCorrupt, "inflate"},
		{"short object", buildPack(short), IndexOptions{}, ErrCorrupt, "declared size 20"},
		{"invalid type", resign(badType), IndexOptions{}, ErrCorrupt, "invalid object type"},
		{"ofs base not an object", ofsMid, IndexOptions{}, ErrCorrupt, "not an object"},
		{"delta base size mismatch", buildPack(whole(object.Blob, base), ofsD(0, deltaOf(base+"!", base))), IndexOptions{}, ErrBadDelta, "base size mismatch"},
		{"delta result size mismatch", buildPack(whole(object.Blob, base), ofsD(0, append(appendVarint(appendVarint(nil, uint64(len(base))), 100), appendCopy(nil, 0, 10)...))), IndexOptions{}, ErrBadDelta, "result size mismatch"},
		{"delta copy out of bounds", buildPack(whole(object.Blob, base), ofsD(0, append(appendVarint(appendVarint(nil, uint64(len(base))), 100), appendCopy(nil, 1, 100)...))), IndexOptions{}, ErrBadDelta, "out of bounds"},
		{"delta reserved op", buildPack(whole(object.Blob, base), ofsD(0, append(appendVarint(appendVarint(nil, uint64(len(base))), 1), 0))), IndexOptions{}, ErrBadDelta, "reserved"},
		{"chain too deep", buildPack(chain...), IndexOptions{MaxDeltaDepth: 4}, ErrDeltaDepth, "too deep"},
		{"ref-delta cycle", buildPack(refD(object.ID{1}, deltaOf("a", "b")), refD(object.ID{2}, deltaOf("b", "a"))), IndexOptions{}, ErrMissingBase, ""},
		{"ref-delta missing base", buildPack(whole(object.Blob, base), refD(object.ID{9}, deltaOf(base, "x"))), IndexOptions{Base: NewSet()}, ErrMissingBase, object.ID{9}.String()},
		{"object too large", buildPack(whole(object.Blob, base)), IndexOptions{MaxObjectSize: 10}, ErrTooLarge, "max size"},
		{"delta result too large", buildPack(whole(object.Blob, "ab"), ofsD(0, deltaOf("ab", base))), IndexOptions{MaxObjectSize: 10}, ErrTooLarge, "max size"},
		{"pack too large", good, IndexOptions{MaxPackSize: int64(len(good) - 1)}, ErrTooLarge, "pack exceeds max size"},
		{"duplicate object", buildPack(whole(object.Blob, "a"), whole(object.Blob, "a")), IndexOptions{}, ErrCorrupt, "twice"},
		{"empty input", nil, IndexOptions{}, ErrCorrupt, "truncated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := IndexPack(context.Background(), bytes.NewReader(tc.pack), dir, tc.opts)
			if !isErr(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want %v containing %q", err, tc.want, tc.msg)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Fatalf("temp files left behind: %v", ents)
			}
		})
	}
	// The depth limit is inclusive, and the good pack is good.
	if _, err := IndexPack(context.Background(), bytes.NewReader(buildPack(chain...)), t.TempDir(), IndexOptions{MaxDeltaDepth: 5}); err != nil {
		t.Fatalf("chain of depth 5 with limit 5: %v", err)
	}
	if _, err := IndexPack(context.Background(), bytes.NewReader(good), t.TempDir(), IndexOptions{}); err != nil {
		t.Fatal(err)
	}
}

func chainContent(i int) string { return "v" + strings.Repeat("x", i) + "\n" }

// Every truncation of a small pack must fail cleanly.
func TestIndexPackEveryTruncation(t *testing.T) {
	const base = "the quick brown fox jumps over the lazy dog\n"
	pack := buildPack(whole(object.Blob, base), ofsD(0, deltaOf(base, base+"again\n")),
		whole(object.Commit, "tree x\n"), refD(object.Hash(object.Blob, []byte(base)), deltaOf(base, "dog\n")))
	if _, err := IndexPack(context.Background(), bytes.NewReader(pack), t.TempDir(), IndexOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for n := 0; n < len(pack); n++ {
		_, err := IndexPack(context.Background(), bytes.NewReader(pack[:n]), dir, IndexOptions{})
		if !isErr(err, ErrCorrupt) || !strings.Contains(err.Error(), "truncated") {
			t.Fatalf("prefix %d/%d: got %v", n, len(pack), err)
		}
	}
}

func TestIndexPackCanceled(t *testing.T) {
	fx := sharedFixture(t)
	pack, _ := os.ReadFile(fx.packPath)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := IndexPack(ctx, bytes.NewReader(pack), t.TempDir(), IndexOptions{}); err != context.Canceled {
		t.Fatalf("got %v", err)
	}
}

type failingReader struct {
	r   io.Reader
	n   int
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, f.err
	}
	p = p[:min(len(p), f.n)]
	n, err := f.r.Read(p)
	f.n -= n
	return n, err
}

// An I/O error of the input is reported as such, not as corruption.
func TestIndexPackReadError(t *testing.T) {
	fx := sharedFixture(t)
	pack, _ := os.ReadFile(fx.packPath)
	boom := errors.New("connection reset")
	for _, n := range []int{0, 5, 100, len(pack) / 2, len(pack) - 3} {
		_, err := IndexPack(context.Background(), &failingReader{r: bytes.NewReader(pack), n: n, err: boom}, t.TempDir(), IndexOptions{})
		if !errors.Is(err, boom) || errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut at %d: got %v", n, err)
		}
	}
}

// An input error at any offset is reported as that error, never as a
// truncated or corrupt pack: a request body over its size limit must say so.
func TestIndexPackReadErrorAnyOffset(t *testing.T) {
	const base = "the quick brown fox jumps over the lazy dog\n"
	pack := buildPack(whole(object.Blob, base), ofsD(0, deltaOf(base, base+"again\n")),
		whole(object.Commit, "tree x\n"), refD(object.Hash(object.Blob, []byte(base)), deltaOf(base, "dog\n")))
	boom := errors.New("request body too large")
	dir := t.TempDir()
	for n := 0; n < len(pack); n++ {
		_, err := IndexPack(context.Background(), &failingReader{r: bytes.NewReader(pack), n: n, err: boom}, dir, IndexOptions{})
		if !errors.Is(err, boom) || errors.Is(err, ErrCorrupt) {
			t.Errorf("cut at %d/%d: got %v", n, len(pack), err)
		}
	}
}
