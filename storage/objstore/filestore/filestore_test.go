package filestore_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/filestore"
	"github.com/rgit/rgit/storage/objstore/storetest"
)

func newStore(t *testing.T) *filestore.Store {
	t.Helper()
	s, err := filestore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objstore.Store { return newStore(t) })
}

func TestLayoutAndTempCleanup(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	if err := s.Put(ctx, "objects/o/n/pack/p.pack", strings.NewReader("pack"), 4); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(s.Root(), "objects", "o", "n", "pack", "p.pack"))
	if err != nil || string(data) != "pack" {
		t.Fatalf("object file = %q, %v", data, err)
	}
	if err := s.PutIfAbsent(ctx, "x", strings.NewReader("y"), 1); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(filepath.Join(s.Root(), ".rgit-tmp")); len(entries) != 0 {
		t.Errorf("temp dir not empty after writes: %d entries", len(entries))
	}
	if err := s.Delete(ctx, "objects/o/n/pack/p.pack"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.Root(), "objects")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("empty parent directories not pruned: %v", err)
	}

	// A stale temp file is removed on open, a fresh one is kept.
	stale := filepath.Join(s.Root(), ".rgit-tmp", "obj-stale")
	fresh := filepath.Join(s.Root(), ".rgit-tmp", "obj-fresh")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := filestore.New(s.Root()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale temp survived reopen: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh temp removed on reopen: %v", err)
	}
}

func TestReservedAndConflictingKeys(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	for _, key := range []string{".rgit-tmp", ".rgit-tmp/x", strings.Repeat("s", 256)} {
		if err := s.Put(ctx, key, strings.NewReader("x"), 1); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("Put(%.20q) error = %v, want ErrInvalidKey", key, err)
		}
	}
	if err := s.Put(ctx, "a/b", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "a", strings.NewReader("x"), 1); !errors.Is(err, filestore.ErrKeyConflict) {
		t.Errorf("Put over a directory: error %v, want ErrKeyConflict", err)
	}
	if err := s.PutIfAbsent(ctx, "a", strings.NewReader("x"), 1); !errors.Is(err, filestore.ErrKeyConflict) {
		t.Errorf("PutIfAbsent over a directory: error %v, want ErrKeyConflict", err)
	}
	if err := s.Put(ctx, "a/b/c", strings.NewReader("x"), 1); !errors.Is(err, filestore.ErrKeyConflict) {
		t.Errorf("Put under an object: error %v, want ErrKeyConflict", err)
	}
	if err := s.Delete(ctx, "a"); err != nil {
		t.Errorf("Delete of a directory name: %v", err)
	}
	if _, err := s.Head(ctx, "a/b"); err != nil {
		t.Errorf("Delete of the directory name touched its contents: %v", err)
	}
}

// The cross-process test re-executes this test binary as child processes
// that race PutIfAbsent on keys the parent names on their stdin.
const childEnv = "RGIT_FILESTORE_CHILD_DIR"

func TestCrossProcessChild(t *testing.T) {
	dir := os.Getenv(childEnv)
	if dir == "" {
		t.Skip("helper process for TestCrossProcessCreateIfAbsent")
	}
	s, err := filestore.New(dir)
	if err != nil {
		fmt.Println("error", err)
		return
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		key := in.Text()
		body := fmt.Sprintf("pid %d", os.Getpid())
		err := s.PutIfAbsent(t.Context(), key, strings.NewReader(body), int64(len(body)))
		switch {
		case err == nil:
			fmt.Println("won", body)
		case errors.Is(err, objstore.ErrExists):
			fmt.Println("lost")
		default:
			fmt.Println("error", err)
		}
	}
}

func TestCrossProcessCreateIfAbsent(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("running as a child")
	}
	const procs, rounds = 6, 10
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	type child struct {
		stdin io.WriteCloser
		out   *bufio.Scanner
	}
	var children []child
	for range procs {
		cmd := exec.CommandContext(t.Context(), exe, "-test.run=^TestCrossProcessChild$", "-test.v=false")
		cmd.Env = append(os.Environ(), childEnv+"="+dir)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			stdin.Close()
			_ = cmd.Wait()
		})
		children = append(children, child{stdin, bufio.NewScanner(stdout)})
	}
	s, err := filestore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	for round := range rounds {
		key := fmt.Sprintf("wal/%04d", round)
		for _, c := range children {
			if _, err := fmt.Fprintln(c.stdin, key); err != nil {
				t.Fatal(err)
			}
		}
		var winners []string
		for i, c := range children {
			if !c.out.Scan() {
				t.Fatalf("child %d: no answer: %v", i, c.out.Err())
			}
			switch line := c.out.Text(); {
			case strings.HasPrefix(line, "won "):
				winners = append(winners, strings.TrimPrefix(line, "won "))
			case line != "lost":
				t.Fatalf("child %d: %s", i, line)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d winners %q, want exactly 1", round, len(winners), winners)
		}
		rc, _, err := s.Get(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if !bytes.Equal(got, []byte(winners[0])) {
			t.Errorf("round %d: stored %q, winner wrote %q", round, got, winners[0])
		}
	}
}
