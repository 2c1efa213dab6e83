package lfs

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/filestore"
	"github.com/rgit/rgit/storage/objstore/guard"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/transport/frontend/httpgit"
	"github.com/rgit/rgit/transport/wire/clientlimit"
)

// BenchmarkNodeServedUpload: one 20 MB upload at a time through a paced
// loopback HTTP server, as a node serves it: "put" is objects.put on the
// file store wrapped as a node wraps it (SHA-256 and size checked as the
// body streams, temp file, fsync, link); "copy" the same bytes copied
// into a file and fsynced with nothing checked, the reference. cpu-ms/op
// is the process's CPU time per upload, client's and server's.
func BenchmarkNodeServedUpload(b *testing.B) {
	data := make([]byte, 20e6)
	rand.Read(data)
	sum := sha256.Sum256(data)
	oid := hex.EncodeToString(sum[:])
	rp := names.MustParse("alice/big")
	dir := b.TempDir()
	fs, err := filestore.New(dir)
	if err != nil {
		b.Fatal(err)
	}
	st := guard.New(objstore.WithTimeout(fs, time.Minute), guard.Options{OpTimeout: time.Minute})
	objs := newObjects(st)
	for _, c := range []struct {
		name  string
		serve func(r *http.Request) error
		clean func() error
	}{
		{"put", func(r *http.Request) error {
			_, err := objs.put(r.Context(), rp, oid, int64(len(data)), r.Body)
			return err
		}, func() error { return st.Delete(b.Context(), repo.LFSKey(rp, oid)) }},
		{"copy", func(r *http.Request) error {
			f, err := os.Create(dir + "/copy")
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := io.Copy(f, r.Body); err != nil {
				return err
			}
			return f.Sync()
		}, func() error { return os.Remove(dir + "/copy") }},
	} {
		b.Run(c.name, func(b *testing.B) {
			ts := httptest.NewServer(httpgit.Pace(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if err := c.serve(r); err != nil {
					http.Error(w, err.Error(), http.StatusUnprocessableEntity)
				}
			}), clientlimit.Rate{Grace: time.Minute, BytesPerSec: 4096}))
			defer ts.Close()
			var cpu time.Duration
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				r0 := cpuTime()
				resp, err := http.Post(ts.URL, "application/octet-stream", bytes.NewReader(data))
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("upload: %v %v", err, resp)
				}
				resp.Body.Close()
				cpu += cpuTime() - r0
				b.StopTimer()
				if err := c.clean(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "cpu-ms/op")
		})
	}
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var u syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
