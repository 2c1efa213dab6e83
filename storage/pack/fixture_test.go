package pack

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/testkit/gitrun"
)

// git runs git in dir and returns stdout.
func git(t testing.TB, dir string, stdin []byte, args ...string) []byte {
	t.Helper()
	return gitrun.New(t, dir, gitrun.Env{Ident: gitrun.Fixed("t", "t@x", "2020-01-01T00:00:00Z")}).Output(stdin, args...)
}

// fixture is a git repository with history whose objects are in one pack.
type fixture struct {
	dir      string // work tree; .git inside
	packPath string
	idxPath  string
}

var (
	fixtureOnce sync.Once
	fixtureVal  *fixture
	fixtureErr  error
	fixtureDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fixtureDir != "" {
		os.RemoveAll(fixtureDir)
	}
	os.Exit(code)
}

// sharedFixture builds (once per test binary) a repository with 60 commits
// of edits to a set of text files, an annotated tag and a binary blob, fully
// repacked so that it has deep OFS delta chains.
func sharedFixture(t testing.TB) *fixture {
	t.Helper()
	fixtureOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rgit-pack-fixture-")
		if err != nil {
			fixtureErr = err
			return
		}
		fixtureDir = dir
		fixtureVal, fixtureErr = buildFixture(t, dir)
	})
	if fixtureErr != nil {
		t.Fatal(fixtureErr)
	}
	return fixtureVal
}

func buildFixture(t testing.TB, dir string) (*fixture, error) {
	git(t, dir, nil, "init", "-q", "-b", "main")
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau")
	files := make([][]string, 12)
	for i := range files {
		for j := 0; j < 200+rng.IntN(200); j++ {
			files[i] = append(files[i], fmt.Sprintf("%d %s %s %d", j, words[rng.IntN(len(words))], words[rng.IntN(len(words))], rng.IntN(1000)))
		}
	}
	for c := 0; c < 60; c++ {
		for k := 0; k < 3; k++ {
			fi := rng.IntN(len(files))
			lines := files[fi]
			at := rng.IntN(len(lines))
			switch rng.IntN(3) {
			case 0:
				lines[at] = fmt.Sprintf("edit %d %d", c, rng.IntN(1e6))
			case 1:
				lines = append(lines[:at], append([]string{fmt.Sprintf("insert %d", c)}, lines[at:]...)...)
			default:
				lines = append(lines[:at], lines[at+1:]...)
			}
			files[fi] = lines
		}
		for i, lines := range files {
			sub := filepath.Join(dir, fmt.Sprintf("d%d", i%3))
			os.MkdirAll(sub, 0o755)
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%d.txt", i)), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
				return nil, err
			}
		}
		if c == 30 {
			bin := make([]byte, 100<<10)
			for i := range bin {
				bin[i] = byte(rng.Uint32())
			}
			os.WriteFile(filepath.Join(dir, "blob.bin"), bin, 0o644)
		}
		git(t, dir, nil, "add", "-A")
		git(t, dir, nil, "commit", "-q", "-m", fmt.Sprintf("commit %d", c))
		if c == 20 {
			git(t, dir, nil, "tag", "-a", "-m", "release", "v1")
			git(t, dir, nil, "branch", "old")
		}
	}
	git(t, dir, nil, "repack", "-adfq", "--window=50", "--depth=50")
	packs, _ := filepath.Glob(filepath.Join(dir, ".git/objects/pack/pack-*.pack"))
	if len(packs) != 1 {
		return nil, fmt.Errorf("fixture: want 1 pack, got %d", len(packs))
	}
	return &fixture{dir: dir, packPath: packs[0], idxPath: strings.TrimSuffix(packs[0], ".pack") + ".idx"}, nil
}

// catFileAll returns every object of the repository as git sees it.
func catFileAll(t testing.TB, dir string) map[object.ID]catObj {
	out := git(t, dir, nil, "cat-file", "--batch-all-objects", "--batch")
	objs := make(map[object.ID]catObj)
	for len(out) > 0 {
		nl := bytes.IndexByte(out, '\n')
		f := strings.Fields(string(out[:nl]))
		id := object.MustID(f[0])
		typ, _ := object.ParseType(f[1])
		var size int
		fmt.Sscan(f[2], &size)
		data := out[nl+1 : nl+1+size]
		objs[id] = catObj{typ, data}
		out = out[nl+1+size+1:]
	}
	return objs
}

type catObj struct {
	typ  object.Type
	data []byte
}

// revListObjects lists object ids from `git rev-list --objects args...`.
func revListObjects(t testing.TB, dir string, args ...string) []object.ID {
	out := git(t, dir, nil, append([]string{"rev-list", "--objects"}, args...)...)
	var ids []object.ID
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		ids = append(ids, object.MustID(line[:40]))
	}
	return ids
}

// ---- synthetic packs for hostile-input tests ----

// tEntry is one entry of a synthetic pack.
type tEntry struct {
	typ      object.Type
	data     []byte // content, or delta instructions for delta types
	ofsBase  int    // OfsDelta: index of the base entry
	refBase  object.ID
	declared int64  // declared size; -1 = len(data)
	rawZ     []byte // if set, used instead of compressing data
}

func whole(t object.Type, data string) tEntry {
	return tEntry{typ: t, data: []byte(data), declared: -1}
}

func ofsD(base int, delta []byte) tEntry {
	return tEntry{typ: object.OfsDelta, data: delta, ofsBase: base, declared: -1}
}

func refD(base object.ID, delta []byte) tEntry {
	return tEntry{typ: object.RefDelta, data: delta, refBase: base, declared: -1}
}

// buildPack assembles a pack with a correct header and trailer.
func buildPack(entries ...tEntry) []byte {
	var b bytes.Buffer
	b.WriteString("PACK")
	binary.Write(&b, binary.BigEndian, uint32(2))
	binary.Write(&b, binary.BigEndian, uint32(len(entries)))
	offs := make([]int64, len(entries))
	for i, e := range entries {
		offs[i] = int64(b.Len())
		size := e.declared
		if size < 0 {
			size = int64(len(e.data))
		}
		b.Write(appendEntryHeader(nil, e.typ, size))
		switch e.typ {
		case object.OfsDelta:
			b.Write(appendOfsDelta(nil, offs[i]-offs[e.ofsBase]))
		case object.RefDelta:
			b.Write(e.refBase[:])
		}
		if e.rawZ != nil {
			b.Write(e.rawZ)
		} else {
			b.Write(zlibBytes(e.data))
		}
	}
	sum := sha1.Sum(b.Bytes())
	b.Write(sum[:])
	return b.Bytes()
}

func zlibBytes(data []byte) []byte {
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	w.Write(data)
	w.Close()
	return z.Bytes()
}

// makeDelta encodes a delta turning base into result: a copy of the common
// prefix, then inserts for the rest.
func makeDelta(base, result []byte) []byte {
	d := appendVarint(nil, uint64(len(base)))
	d = appendVarint(d, uint64(len(result)))
	p := 0
	for p < len(base) && p < len(result) && base[p] == result[p] {
		p++
	}
	if p > 0 {
		d = appendCopy(d, 0, p)
	}
	for rest := result[p:]; len(rest) > 0; {
		n := min(len(rest), 127)
		d = append(d, byte(n))
		d = append(d, rest[:n]...)
		rest = rest[n:]
	}
	return d
}

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func isErr(err, target error) bool { return err != nil && errorsIs(err, target) }

var errorsIs = errors.Is
