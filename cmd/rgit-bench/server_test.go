package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/testkit/fixture"
	"github.com/rgit/rgit/testkit/gitrun"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

func TestParseRequestLine(t *testing.T) {
	for line, want := range map[string]float64{
		"request_s=0.001250 objects=3 bytes=100": 0.00125,
		"request_s=2":                            2,
	} {
		if got, err := parseRequestLine(line); err != nil || got != want {
			t.Errorf("parseRequestLine(%q) = %v, %v; want %v", line, got, err, want)
		}
	}
	for _, line := range []string{"", "objects=3", "request_s=", "request_s=x", "request_s=-1", "xrequest_s=1"} {
		if _, err := parseRequestLine(line); !errors.Is(err, ErrServer) {
			t.Errorf("parseRequestLine(%q): err = %v, want ErrServer", line, err)
		}
	}
}

// A server answers every line of its input: counted requests and one
// written to a file, which git accepts as the clone; its first use of
// the pack writes the reverse index beside it.
func TestServeLoop(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	r := gitrun.Scratch(t, gitrun.Env{Ident: gitrun.Fixed("t", "t@x", "1577836800 +0000")})
	repo, git := r.Dir, r.Run
	for i := range 3 {
		if err := os.WriteFile(filepath.Join(repo, "f"), []byte(strings.Repeat(fmt.Sprintf("line %d\n", i), 50)), 0o644); err != nil {
			t.Fatal(err)
		}
		git("add", "f")
		git("commit", "-q", "-m", fmt.Sprint(i))
	}
	git("repack", "-adq")
	packs, _ := filepath.Glob(filepath.Join(repo, ".git/objects/pack/*.pack"))
	if len(packs) != 1 {
		t.Fatalf("packs: %v", packs)
	}
	tip, err := object.ParseID(git("rev-parse", "main"))
	if err != nil {
		t.Fatal(err)
	}
	rev := filepath.Join(dir, "x.rev")
	s, err := openServer(serverOptions{
		packPath: packs[0], idxPath: strings.TrimSuffix(packs[0], ".pack") + ".idx", revPath: rev,
		req: gitproto.FetchRequest{Wants: []object.ID{tip}, Thin: true, OfsDelta: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	out := filepath.Join(dir, "out.pack")
	var answers strings.Builder
	if err := s.serveLoop(ctx, strings.NewReader("\n"+out+"\n\n"), &answers); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(answers.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d answers for 3 requests: %q", len(lines), answers.String())
	}
	for _, l := range lines {
		if _, err := parseRequestLine(l); err != nil || !strings.Contains(l, " objects=9 ") {
			t.Fatalf("answer %q: %v (want 9 objects: 3 commits, trees, blobs)", l, err)
		}
	}
	pf, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	clone := filepath.Join(dir, "c.git")
	if _, err := fixture.Git(ctx, dir, nil, "init", "-q", "--bare", clone); err != nil {
		t.Fatal(err)
	}
	if _, err := fixture.Git(ctx, clone, pf, "index-pack", "--strict", "--stdin"); err != nil {
		t.Fatalf("written pack rejected: %v", err)
	}
	if _, err := os.Stat(rev); err != nil {
		t.Fatalf("reverse index not written: %v", err)
	}
}
