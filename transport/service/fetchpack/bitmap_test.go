package fetchpack

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rgit/rgit/storage/bitmap"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/walk"
	"github.com/rgit/rgit/testkit/gitrun"
	"github.com/rgit/rgit/testkit/need"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

// sh runs a shell script in dir with a fixed identity and clock.
func sh(t *testing.T, dir, script string) string {
	t.Helper()
	cmd := exec.Command("sh", "-ec", script)
	cmd.Dir = dir
	cmd.Env = gitrun.Env{Ident: gitrun.Fixed("t", "t@x", "@1700000000 +0000")}.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return strings.TrimSpace(string(out))
}

// bitmapRepo is a repository with branches, a merge and a tag in one
// pack, and that pack's bitmap file.
func bitmapRepo(t *testing.T) (dir string, p *pack.Pack, bmPath string) {
	need.Tool(t, "git")
	dir = t.TempDir()
	sh(t, dir, `git init -q -b main
for i in 1 2 3 4 5 6; do mkdir -p d/$i; echo $i > d/$i/f; echo $i > top; git add -A; git commit -qm c$i; done
git checkout -qb topic HEAD~2; echo t > t; git add t; git commit -qm t
git checkout -q main; git merge -q --no-ff -m merge topic
git tag -a -m v1 v1 main~1
git repack -adq`)
	paths, _ := filepath.Glob(filepath.Join(dir, ".git/objects/pack/*.pack"))
	p, err := pack.Open(paths[0], strings.TrimSuffix(paths[0], ".pack")+".idx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	var tips []object.ID
	for _, l := range strings.Fields(sh(t, dir, "git for-each-ref --format=%\\(objectname\\)")) {
		tips = append(tips, object.MustID(l))
	}
	x, err := bitmap.Build(context.Background(), p, tips, bitmap.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bmPath = bitmap.PathFor(paths[0])
	if err := x.WriteFile(bmPath); err != nil {
		t.Fatal(err)
	}
	return dir, p, bmPath
}

func TestPlanWithBitmap(t *testing.T) {
	dir, p, bmPath := bitmapRepo(t)
	bm := OpenBitmap(bmPath, p, nil)
	if bm == nil {
		t.Fatal("OpenBitmap of a fresh file gave nil")
	}
	set := pack.NewSet(p)
	rev := func(r string) object.ID { return object.MustID(sh(t, dir, "git rev-parse "+r)) }
	ctx := context.Background()
	for name, req := range map[string]gitproto.FetchRequest{
		"clone": {Wants: []object.ID{rev("main"), rev("topic"), rev("v1")}, OfsDelta: true},
		"fetch": {Wants: []object.ID{rev("main")}, Haves: []object.ID{rev("main~2")}, OfsDelta: true, Thin: true},
		// Shallow requests always walk; the result must still be right.
		"shallow": {Wants: []object.ID{rev("main")}, Depth: 1, OfsDelta: true},
	} {
		got, err := PlanWith(ctx, walk.NewGraph(set, 0), bm, nil, &req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		wr, _ := WalkRequest(&req)
		wr.Sparse = false
		want, err := walk.Objects(ctx, walk.NewGraph(set, 0), wr)
		if err != nil {
			t.Fatal(err)
		}
		sorted := func(ids []object.ID) []object.ID {
			s := slices.Clone(ids)
			slices.SortFunc(s, func(a, b object.ID) int { return bytes.Compare(a[:], b[:]) })
			return s
		}
		if !slices.Equal(sorted(got.Objects), sorted(want.Objects)) || len(got.Shallow) != len(want.Shallow) {
			t.Errorf("%s: planned %d objects (%d shallow), walk %d (%d shallow)", name, got.Len(), len(got.Shallow), want.Len(), len(want.Shallow))
		}
		if len(req.Haves) > 0 || req.Depth > 0 {
			continue // indexing needs the client's objects (thin) or its shallow file
		}
		var buf bytes.Buffer
		if _, err := Write(ctx, set, &buf, &req, got, nil); err != nil {
			t.Fatalf("%s: write: %v", name, err)
		}
		bare := t.TempDir()
		sh(t, bare, "git init -q --bare .")
		cmd := gitrun.Env{}.Command(ctx, bare, "index-pack", "--strict", "--stdin")
		cmd.Stdin = &buf
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: git index-pack --strict: %v\n%s", name, err, out)
		}
	}
}

func TestOpenBitmapIgnoresBadFiles(t *testing.T) {
	_, p, bmPath := bitmapRepo(t)
	core, logs := observer.New(zapcore.WarnLevel)
	log := zap.New(core)
	if bm := OpenBitmap(bmPath+".missing", p, log); bm != nil || logs.Len() != 0 {
		t.Fatalf("missing file: bitmap %v, %d log lines; want nil and none", bm, logs.Len())
	}
	data, err := os.ReadFile(bmPath)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(bmPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if bm := OpenBitmap(bmPath, p, log); bm != nil || logs.Len() != 1 {
		t.Fatalf("corrupt file: bitmap %v, %d log lines; want nil and one", bm, logs.Len())
	}
}
