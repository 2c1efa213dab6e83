package filestore_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
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
	"github.com/rgit/rgit/storage/objstore/guard"
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

// fileSink is a writer whose ReadFrom, like net/http's response's, can
// take a file: it counts the calls that got an io.LimitedReader of an
// *os.File (what net.TCPConn's ReadFrom sends with sendfile(2)).
type fileSink struct {
	bytes.Buffer
	files, others int
}

func (s *fileSink) ReadFrom(r io.Reader) (int64, error) {
	if lr, ok := r.(*io.LimitedReader); ok {
		if _, ok := lr.R.(*os.File); ok {
			s.files++
			return s.Buffer.ReadFrom(r)
		}
	}
	s.others++
	return s.Buffer.ReadFrom(r)
}

// TestSendHandsOverTheFile: objstore.Send of a body, straight from the
// store and through the wrappers a node puts around it (WithTimeout, the
// guard), gives a ReadFrom the file itself, in chunks, and the same bytes
// as reading it: whole, ranged, after a partial Read; a writer without
// ReadFrom gets them copied; a body whose context ended sends nothing.
func TestSendHandsOverTheFile(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	data := make([]byte, 9<<20+12345) // more than one chunk
	rand.Read(data)
	if err := s.Put(ctx, "lfs/o", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	stores := map[string]objstore.Store{"file store": s,
		"guarded with a timeout": guard.New(objstore.WithTimeout(s, time.Minute), guard.Options{OpTimeout: time.Minute})}
	for name, st := range stores {
		for _, c := range []struct {
			off, length int64
			read        int // bytes Read before Send
		}{{0, -1, 0}, {1000, -1, 0}, {1000, 4 << 20, 0}, {0, -1, 777}, {int64(len(data)) - 1, -1, 0}} {
			t.Run(fmt.Sprintf("%s off=%d length=%d read=%d", name, c.off, c.length, c.read), func(t *testing.T) {
				want := data[c.off:]
				if c.length >= 0 {
					want = want[:c.length]
				}
				for _, sink := range []string{"ReadFrom", "Write only"} {
					rc, err := st.GetRange(ctx, "lfs/o", c.off, c.length)
					if err != nil {
						t.Fatal(err)
					}
					head := make([]byte, c.read)
					if _, err := io.ReadFull(rc, head); err != nil {
						t.Fatal(err)
					}
					var fs fileSink
					var w io.Writer = &fs
					if sink == "Write only" {
						w = struct{ io.Writer }{&fs}
					}
					n, err := objstore.Send(w, rc)
					rc.Close()
					got := append(head, fs.Bytes()...)
					switch {
					case err != nil || n != int64(len(want)-c.read) || !bytes.Equal(got, want):
						t.Fatalf("%s: sent %d, %v; same bytes %t", sink, n, err, bytes.Equal(got, want))
					case sink == "ReadFrom" && (fs.files == 0 || fs.others != 0):
						t.Fatalf("ReadFrom got the file %d times and something else %d times", fs.files, fs.others)
					}
				}
			})
		}
	}
	t.Run("context ended", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		rc, _, err := s.Get(cctx, "lfs/o")
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		cancel()
		var fs fileSink
		if n, err := objstore.Send(&fs, rc); !errors.Is(err, context.Canceled) || n != 0 {
			t.Fatalf("Send after the context ended: %d, %v", n, err)
		}
	})
}
