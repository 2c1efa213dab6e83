// Package storetest is the conformance suite every objstore.Store backend
// must pass: memstore, filestore and s3store (against a real S3-compatible
// server) all run the same Run.
//
// It imports the standard library, testing and objstore only, and is used
// from _test.go files only.
package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/objstore"
)

// Run runs the conformance suite. newStore must return an empty store (or an
// empty namespace of a shared one) each time it is called; every subtest
// calls it once.
//
// RGIT_STORETEST_BIG_MB (default 40) sets the size of the streamed-put test.
func Run(t *testing.T, newStore func(t *testing.T) objstore.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s objstore.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"Overwrite", testOverwrite},
		{"NotFound", testNotFound},
		{"SizeMismatch", testSizeMismatch},
		{"FailedBody", testFailedBody},
		{"GetRange", testGetRange},
		{"GetParallel", testGetParallel},
		{"StreamedPut", testStreamedPut},
		{"PutIfAbsent", testPutIfAbsent},
		{"PutIfAbsentLarge", testPutIfAbsentLarge},
		{"ConcurrentCreators", testConcurrentCreators},
		{"Delete", testDelete},
		{"List", testList},
		{"ListPaging", testListPaging},
		{"Copy", testCopy},
		{"Canceled", testCanceled},
		{"Timeout", testTimeout},
		{"OddKeys", testOddKeys},
		{"InvalidKeys", testInvalidKeys},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

func put(t *testing.T, s objstore.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(t.Context(), key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func get(t *testing.T, s objstore.Store, key string) []byte {
	t.Helper()
	rc, info, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Get(%q): read: %v", key, err)
	}
	if info.Size != int64(len(data)) {
		t.Errorf("Get(%q): info.Size = %d, read %d bytes", key, info.Size, len(data))
	}
	return data
}

func getRange(t *testing.T, s objstore.Store, key string, off, length int64) []byte {
	t.Helper()
	rc, err := s.GetRange(t.Context(), key, off, length)
	if err != nil {
		t.Fatalf("GetRange(%q, %d, %d): %v", key, off, length, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("GetRange(%q, %d, %d): read: %v", key, off, length, err)
	}
	return data
}

func wantBody(t *testing.T, s objstore.Store, key string, want []byte) {
	t.Helper()
	if got := get(t, s, key); !bytes.Equal(got, want) {
		t.Errorf("Get(%q) = %.40q (%d bytes), want %.40q (%d bytes)", key, got, len(got), want, len(want))
	}
}

func wantNotFound(t *testing.T, s objstore.Store, key string) {
	t.Helper()
	if _, err := s.Head(t.Context(), key); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Head(%q) error = %v, want ErrNotFound", key, err)
	}
}

func listKeys(t *testing.T, s objstore.Store, prefix, startAfter string) []string {
	t.Helper()
	var keys []string
	for info, err := range s.List(t.Context(), prefix, startAfter) {
		if err != nil {
			t.Fatalf("List(%q, %q): %v", prefix, startAfter, err)
		}
		keys = append(keys, info.Key)
	}
	return keys
}

func testRoundTrip(t *testing.T, s objstore.Store) {
	data := []byte("hello, object store")
	put(t, s, "repo/o/n/wal/0001", data)
	wantBody(t, s, "repo/o/n/wal/0001", data)

	info, err := s.Head(t.Context(), "repo/o/n/wal/0001")
	if err != nil {
		t.Fatalf("Head: %v", err)
	}
	if info.Key != "repo/o/n/wal/0001" || info.Size != int64(len(data)) {
		t.Errorf("Head = %+v, want key repo/o/n/wal/0001 size %d", info, len(data))
	}
	if d := time.Since(info.ModTime); d < -time.Hour || d > time.Hour {
		t.Errorf("Head ModTime %v is not recent", info.ModTime)
	}

	_, ginfo, err := s.Get(t.Context(), "repo/o/n/wal/0001")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if ginfo.Key != info.Key || ginfo.Size != info.Size {
		t.Errorf("Get info = %+v, Head info = %+v", ginfo, info)
	}

	put(t, s, "empty", nil)
	wantBody(t, s, "empty", []byte{})

	// Unknown size, small body.
	if err := s.Put(t.Context(), "unsized", &patternReader{n: 1000}, -1); err != nil {
		t.Fatalf("Put unsized: %v", err)
	}
	wantBody(t, s, "unsized", patternBytes(0, 1000))
}

func testOverwrite(t *testing.T, s objstore.Store) {
	put(t, s, "k", []byte("first version, longer"))
	put(t, s, "k", []byte("second"))
	wantBody(t, s, "k", []byte("second"))
	if err := s.Put(t.Context(), "k", bytes.NewReader([]byte("third")), -1); err != nil {
		t.Fatalf("Put unsized overwrite: %v", err)
	}
	wantBody(t, s, "k", []byte("third"))
}

func testNotFound(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	put(t, s, "dir/file", []byte("x"))
	// "dir" is a key prefix but not an object.
	for _, key := range []string{"missing", "dir/missing", "dir", "nodir/x"} {
		if _, _, err := s.Get(ctx, key); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("Get(%q) error = %v, want ErrNotFound", key, err)
		}
		if _, err := s.GetRange(ctx, key, 0, 1); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("GetRange(%q) error = %v, want ErrNotFound", key, err)
		}
		if _, err := s.GetRange(ctx, key, 0, 0); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("GetRange(%q, 0, 0) error = %v, want ErrNotFound", key, err)
		}
		wantNotFound(t, s, key)
		if err := s.Copy(ctx, key, "copy-dst"); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("Copy(%q) error = %v, want ErrNotFound", key, err)
		}
	}
	wantNotFound(t, s, "copy-dst")
}

func testSizeMismatch(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	if err := s.Put(ctx, "short", bytes.NewReader([]byte("12345")), 10); err == nil {
		t.Error("Put with body shorter than size succeeded")
	}
	wantNotFound(t, s, "short")
	if err := s.Put(ctx, "long", bytes.NewReader([]byte("12345")), 3); err == nil {
		t.Error("Put with body longer than size succeeded")
	}
	wantNotFound(t, s, "long")
	if err := s.PutIfAbsent(ctx, "short", bytes.NewReader([]byte("12345")), 10); err == nil {
		t.Error("PutIfAbsent with body shorter than size succeeded")
	}
	wantNotFound(t, s, "short")
}

// failingReader yields its bytes, then fails where a reader would end:
// the last read of a body that was checked as it streamed and found wrong.
type failingReader struct{ r io.Reader }

var errBodyFailed = errors.New("body checked and refused at its end")

func (f failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		err = errBodyFailed
	}
	return n, err
}

// testFailedBody: a body whose reader fails, even after every byte came,
// stores nothing, whatever its size and whether its size was given. This
// is what lets a writer check a body as it streams (Git LFS checks sizes
// and SHA-256 so) and have the object appear only when it passed.
func testFailedBody(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	for _, n := range []int64{10, bigSize(t)} {
		for _, size := range []int64{n, -1} {
			body := func() io.Reader { return failingReader{&patternReader{n: n}} }
			if err := s.Put(ctx, "failed", body(), size); !errors.Is(err, errBodyFailed) {
				t.Errorf("Put(%d bytes, size %d) of a failing body: error %v, want the reader's", n, size, err)
			}
			wantNotFound(t, s, "failed")
			if err := s.PutIfAbsent(ctx, "failed", body(), size); !errors.Is(err, errBodyFailed) {
				t.Errorf("PutIfAbsent(%d bytes, size %d) of a failing body: error %v, want the reader's", n, size, err)
			}
			wantNotFound(t, s, "failed")
		}
	}
}

// testGetRange pins the range semantics documented on objstore.ClampRange.
func testGetRange(t *testing.T, s objstore.Store) {
	data := patternBytes(0, 1000)
	put(t, s, "r", data)
	for _, c := range []struct {
		off, length int64
		want        []byte
	}{
		{0, -1, data},
		{10, 20, data[10:30]},  // middle
		{990, -1, data[990:]},  // to the end
		{990, 100, data[990:]}, // past the end: cut
		{0, 1000, data},        // exactly all
		{999, 1, data[999:]},   // last byte
		{1000, -1, nil},        // at the end: empty
		{1000, 10, nil},        // at the end: empty
		{5000, 10, nil},        // beyond the end: empty
		{5, 0, nil},            // zero length: empty
	} {
		if got := getRange(t, s, "r", c.off, c.length); !bytes.Equal(got, c.want) {
			t.Errorf("GetRange(%d, %d) = %d bytes, want %d", c.off, c.length, len(got), len(c.want))
		}
	}
	if _, err := s.GetRange(t.Context(), "r", -1, 5); !errors.Is(err, objstore.ErrInvalidRange) {
		t.Errorf("GetRange(-1, 5) error = %v, want ErrInvalidRange", err)
	}
	put(t, s, "empty", nil)
	if got := getRange(t, s, "empty", 0, -1); len(got) != 0 {
		t.Errorf("GetRange(empty, 0, -1) = %d bytes", len(got))
	}
}

// testGetParallel reads an object of several uneven chunks in parallel
// ranges: the bytes come back whole and in order.
func testGetParallel(t *testing.T, s objstore.Store) {
	data := patternBytes(0, 100_003)
	put(t, s, "p", data)
	rc, info, err := objstore.GetParallel(t.Context(), s, "p", objstore.ParallelOptions{Chunk: 8 << 10, Streams: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil || info.Size != int64(len(data)) || !bytes.Equal(got, data) {
		t.Fatalf("GetParallel: %d of %d bytes (size %d), err %v", len(got), len(data), info.Size, err)
	}
}

func bigSize(t *testing.T) int64 {
	mb := int64(40)
	if v := os.Getenv("RGIT_STORETEST_BIG_MB"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			t.Fatalf("RGIT_STORETEST_BIG_MB=%q: want a positive integer", v)
		}
		mb = n
	}
	return mb << 20
}

func hashReader(t *testing.T, r io.Reader) ([32]byte, int64) {
	t.Helper()
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		t.Fatalf("hash: %v", err)
	}
	return [32]byte(h.Sum(nil)), n
}

func testStreamedPut(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	size := bigSize(t)
	if err := s.Put(ctx, "big/pack", &patternReader{n: size}, -1); err != nil {
		t.Fatalf("Put unsized %d bytes: %v", size, err)
	}
	want, _ := hashReader(t, &patternReader{n: size})

	rc, info, err := s.Get(ctx, "big/pack")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	got, n := hashReader(t, rc)
	rc.Close()
	if n != size || info.Size != size || got != want {
		t.Errorf("Get: %d bytes (info %d), hash match %v; want %d bytes", n, info.Size, got == want, size)
	}

	// Ranges across 8 and 16 MiB, where multipart part boundaries fall.
	for _, off := range []int64{8<<20 - 100, 16<<20 - 100, size - 50} {
		if got := getRange(t, s, "big/pack", off, 200); !bytes.Equal(got, patternBytes(off, min(200, size-off))) {
			t.Errorf("GetRange(%d, 200) does not match the pattern", off)
		}
	}

	// Known size, same path through the store.
	if err := s.Put(ctx, "big/sized", &patternReader{n: size}, size); err != nil {
		t.Fatalf("Put sized %d bytes: %v", size, err)
	}
	rc, _, err = s.Get(ctx, "big/sized")
	if err != nil {
		t.Fatalf("Get sized: %v", err)
	}
	got, n = hashReader(t, rc)
	rc.Close()
	if n != size || got != want {
		t.Errorf("Get sized: %d bytes, hash match %v", n, got == want)
	}
}

func testPutIfAbsent(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	if err := s.PutIfAbsent(ctx, "lock", bytes.NewReader([]byte("one")), 3); err != nil {
		t.Fatalf("first PutIfAbsent: %v", err)
	}
	err := s.PutIfAbsent(ctx, "lock", bytes.NewReader([]byte("two")), 3)
	if !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("second PutIfAbsent error = %v, want ErrExists", err)
	}
	err = s.PutIfAbsent(ctx, "lock", bytes.NewReader([]byte("three")), -1)
	if !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("unsized PutIfAbsent error = %v, want ErrExists", err)
	}
	wantBody(t, s, "lock", []byte("one"))

	if err := s.Delete(ctx, "lock"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := s.PutIfAbsent(ctx, "lock", bytes.NewReader([]byte("four")), -1); err != nil {
		t.Fatalf("PutIfAbsent after delete: %v", err)
	}
	wantBody(t, s, "lock", []byte("four"))
}

// testPutIfAbsentLarge covers the multipart path on S3.
func testPutIfAbsentLarge(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	const size = 20 << 20
	if err := s.PutIfAbsent(ctx, "big/once", &patternReader{n: size}, -1); err != nil {
		t.Fatalf("first large PutIfAbsent: %v", err)
	}
	if err := s.PutIfAbsent(ctx, "big/once", &patternReader{off: 1, n: size + 1}, -1); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("second large PutIfAbsent error = %v, want ErrExists", err)
	}
	if err := s.PutIfAbsent(ctx, "big/once", &patternReader{off: 1, n: size + 1}, size); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("second large sized PutIfAbsent error = %v, want ErrExists", err)
	}
	rc, info, err := s.Get(ctx, "big/once")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	defer rc.Close()
	got, _ := hashReader(t, rc)
	want, _ := hashReader(t, &patternReader{n: size})
	if info.Size != size || got != want {
		t.Errorf("stored object is not the first writer's (size %d)", info.Size)
	}
}

func testConcurrentCreators(t *testing.T, s objstore.Store) {
	const rounds, writers = 20, 16
	for round := range rounds {
		key := fmt.Sprintf("race/%02d", round)
		var (
			start = make(chan struct{})
			wg    sync.WaitGroup
			errs  [writers]error
		)
		body := func(w int) []byte { return fmt.Appendf(nil, "round %d writer %d", round, w) }
		for w := range writers {
			wg.Go(func() {
				<-start
				b := body(w)
				errs[w] = s.PutIfAbsent(t.Context(), key, bytes.NewReader(b), int64(len(b)))
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for w, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: writers %d and %d both won", round, winner, w)
			case err == nil:
				winner = w
			case !errors.Is(err, objstore.ErrExists):
				t.Fatalf("round %d: writer %d: error %v, want nil or ErrExists", round, w, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer won", round)
		}
		wantBody(t, s, key, body(winner))
	}
}

func testDelete(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	put(t, s, "a/b/c", []byte("x"))
	put(t, s, "a/b2", []byte("y"))
	for range 2 {
		if err := s.Delete(ctx, "a/b/c"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	wantNotFound(t, s, "a/b/c")
	if err := s.Delete(ctx, "never/was"); err != nil {
		t.Errorf("Delete of a missing key: %v", err)
	}
	wantBody(t, s, "a/b2", []byte("y"))
	// The emptied "directory" can be written again.
	put(t, s, "a/b/d", []byte("z"))
	wantBody(t, s, "a/b/d", []byte("z"))
}

func testList(t *testing.T, s objstore.Store) {
	// '-' and '.' sort before '/', which a naive directory walk gets wrong.
	keys := []string{"p/ba", "p/b/c", "p/b-d", "p/b.e", "p/a", "p/b/c2/x", "q/x", "pp"}
	for i, k := range keys {
		put(t, s, k, bytes.Repeat([]byte{'x'}, i))
	}
	sorted := slices.Sorted(slices.Values(keys))
	check := func(prefix, startAfter string, want []string) {
		t.Helper()
		if got := listKeys(t, s, prefix, startAfter); !slices.Equal(got, want) {
			t.Errorf("List(%q, %q) = %q, want %q", prefix, startAfter, got, want)
		}
	}
	check("", "", sorted)
	check("p/", "", []string{"p/a", "p/b-d", "p/b.e", "p/b/c", "p/b/c2/x", "p/ba"})
	check("p/b", "", []string{"p/b-d", "p/b.e", "p/b/c", "p/b/c2/x", "p/ba"})
	check("p/b/", "", []string{"p/b/c", "p/b/c2/x"})
	check("p", "", []string{"p/a", "p/b-d", "p/b.e", "p/b/c", "p/b/c2/x", "p/ba", "pp"})
	check("p/", "p/b.e", []string{"p/b/c", "p/b/c2/x", "p/ba"})
	check("p/", "p/b0", []string{"p/ba"}) // startAfter need not be a key
	check("p/", "p/z", nil)
	check("p/", "a", []string{"p/a", "p/b-d", "p/b.e", "p/b/c", "p/b/c2/x", "p/ba"})
	check("nothing/", "", nil)
	check("p/b/c", "", []string{"p/b/c", "p/b/c2/x"})

	for info, err := range s.List(t.Context(), "", "") {
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if i := slices.Index(keys, info.Key); info.Size != int64(i) {
			t.Errorf("List: %q size %d, want %d", info.Key, info.Size, i)
		}
	}
	// Breaking out early must be safe.
	for range s.List(t.Context(), "", "") {
		break
	}
}

func testListPaging(t *testing.T, s objstore.Store) {
	const n = 1100 // more than one S3 page of 1000
	keys := make(chan string)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range 16 {
		wg.Go(func() {
			for k := range keys {
				if err := s.Put(t.Context(), k, bytes.NewReader([]byte(k)), int64(len(k))); err != nil {
					errs <- fmt.Errorf("put %s: %w", k, err)
				}
			}
		})
	}
	for i := range n {
		keys <- fmt.Sprintf("many/k%05d", i)
	}
	close(keys)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := listKeys(t, s, "many/", "")
	if len(got) != n || !slices.IsSorted(got) || got[0] != "many/k00000" || got[n-1] != fmt.Sprintf("many/k%05d", n-1) {
		t.Fatalf("List: %d keys, sorted %v", len(got), slices.IsSorted(got))
	}
	if got := listKeys(t, s, "many/", "many/k00999"); len(got) != n-1000 || got[0] != "many/k01000" {
		t.Errorf("List after k00999: %d keys, want %d starting at many/k01000", len(got), n-1000)
	}
}

func testCopy(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	put(t, s, "src/obj", []byte("original"))
	if err := s.Copy(ctx, "src/obj", "dst/deep/obj"); err != nil {
		t.Fatalf("Copy: %v", err)
	}
	wantBody(t, s, "dst/deep/obj", []byte("original"))
	wantBody(t, s, "src/obj", []byte("original"))

	// The copy is independent of later writes to the source.
	put(t, s, "src/obj", []byte("changed"))
	wantBody(t, s, "dst/deep/obj", []byte("original"))

	// Copy onto an existing key replaces it.
	if err := s.Copy(ctx, "src/obj", "dst/deep/obj"); err != nil {
		t.Fatalf("Copy over existing: %v", err)
	}
	wantBody(t, s, "dst/deep/obj", []byte("changed"))

	put(t, s, "src/empty", nil)
	if err := s.Copy(ctx, "src/empty", "dst/empty"); err != nil {
		t.Fatalf("Copy empty: %v", err)
	}
	wantBody(t, s, "dst/empty", []byte{})
}

func testCanceled(t *testing.T, s objstore.Store) {
	put(t, s, "here", []byte("x"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with canceled context: error %v, want context.Canceled", op, err)
		}
	}
	_, _, err := s.Get(ctx, "here")
	check("Get", err)
	_, err = s.GetRange(ctx, "here", 0, 1)
	check("GetRange", err)
	_, err = s.Head(ctx, "here")
	check("Head", err)
	check("Put", s.Put(ctx, "new", bytes.NewReader([]byte("x")), 1))
	check("PutIfAbsent", s.PutIfAbsent(ctx, "new", bytes.NewReader([]byte("x")), 1))
	check("Copy", s.Copy(ctx, "here", "new"))
	check("Delete", s.Delete(ctx, "here"))
	for _, err := range s.List(ctx, "", "") {
		check("List", err)
		break
	}
	wantNotFound(t, s, "new")
	wantBody(t, s, "here", []byte("x"))
}

// endlessReader never reaches EOF; each Read yields a little data after a
// short pause so that memory stays bounded while a deadline runs out.
type endlessReader struct{}

func (endlessReader) Read(p []byte) (int, error) {
	time.Sleep(time.Millisecond)
	n := min(len(p), 1024)
	clear(p[:n])
	return n, nil
}

func testTimeout(t *testing.T, s objstore.Store) {
	ts := objstore.WithTimeout(s, 200*time.Millisecond)
	// The body never ends, so only the deadline can end these calls.
	err := ts.Put(t.Context(), "slow", endlessReader{}, -1)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Put of an endless body: error %v, want DeadlineExceeded", err)
	}
	err = ts.PutIfAbsent(t.Context(), "slow", endlessReader{}, -1)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("PutIfAbsent of an endless body: error %v, want DeadlineExceeded", err)
	}
	wantNotFound(t, s, "slow")

	// Calls that finish in time are unaffected, and a reader stays usable
	// until Close.
	ts = objstore.WithTimeout(s, time.Minute)
	if err := ts.Put(t.Context(), "fast", bytes.NewReader([]byte("ok")), 2); err != nil {
		t.Fatalf("Put under timeout: %v", err)
	}
	rc, err := ts.GetRange(t.Context(), "fast", 1, -1)
	if err != nil {
		t.Fatalf("GetRange under timeout: %v", err)
	}
	data, err := io.ReadAll(rc)
	if err != nil || string(data) != "k" {
		t.Errorf("GetRange under timeout = %q, %v", data, err)
	}
	if err := rc.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func testOddKeys(t *testing.T, s objstore.Store) {
	keys := []string{
		"sp ace/file name",
		"uni/日本語/ключ",
		"plus/a+b=c",
		"punct/a&b?c#d;e,f@g$h!i'j(k)l",
		"pct/a%20b%zz",
		"tilde/~x*y",
		"dots/..a/a../.b.",
	}
	for i, k := range keys {
		put(t, s, k, []byte(k))
		wantBody(t, s, k, []byte(k))
		if info, err := s.Head(t.Context(), k); err != nil || info.Key != k {
			t.Errorf("Head(%q) = %+v, %v", k, info, err)
		}
		dst := fmt.Sprintf("copy/%d/%s", i, k)
		if err := s.Copy(t.Context(), k, dst); err != nil {
			t.Errorf("Copy(%q): %v", k, err)
		} else {
			wantBody(t, s, dst, []byte(k))
		}
	}
	var listed []string
	for _, k := range listKeys(t, s, "", "") {
		if !bytes.HasPrefix([]byte(k), []byte("copy/")) {
			listed = append(listed, k)
		}
	}
	if want := slices.Sorted(slices.Values(keys)); !slices.Equal(listed, want) {
		t.Errorf("List = %q, want %q", listed, want)
	}
	for _, k := range keys {
		if err := s.Delete(t.Context(), k); err != nil {
			t.Errorf("Delete(%q): %v", k, err)
		}
		wantNotFound(t, s, k)
	}
}

func testInvalidKeys(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	put(t, s, "ok", []byte("x"))
	for _, key := range []string{"", "/abs", "trailing/", "a//b", "./a", "a/./b", "a/../b", "..", "a/..", "nul\x00", "bad\xffutf8", string(bytes.Repeat([]byte{'k'}, objstore.MaxKeyLen+1))} {
		check := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, objstore.ErrInvalidKey) {
				t.Errorf("%s(%.30q): error %v, want ErrInvalidKey", op, key, err)
			}
		}
		check("Put", s.Put(ctx, key, bytes.NewReader([]byte("x")), 1))
		check("PutIfAbsent", s.PutIfAbsent(ctx, key, bytes.NewReader([]byte("x")), 1))
		_, _, err := s.Get(ctx, key)
		check("Get", err)
		_, err = s.GetRange(ctx, key, 0, 1)
		check("GetRange", err)
		_, err = s.Head(ctx, key)
		check("Head", err)
		check("Delete", s.Delete(ctx, key))
		check("Copy to", s.Copy(ctx, "ok", key))
		check("Copy from", s.Copy(ctx, key, "ok2"))
	}
	if got := listKeys(t, s, "", ""); !slices.Equal(got, []string{"ok"}) {
		t.Errorf("List after invalid writes = %q, want [ok]", got)
	}
}
