package s3store_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/s3store"
	"github.com/rgit/rgit/testkit/s3local"
)

// send sends a presigned request with body, as a client would.
func send(t *testing.T, p objstore.Presigned, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(p.Method, p.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range p.Header {
		req.Header.Set(k, v)
	}
	// git-lfs sets a Content-Type of its own; it is not signed.
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestPresignedPutBoundToSizeAndSHA256: the store itself refuses a body
// of another length or another SHA-256 at a presigned PUT, so nothing but
// the announced bytes can appear under the key; the right body lands,
// HeadSHA256 reports its checksum, and a presigned GET reads it back.
func TestPresignedPutBoundToSizeAndSHA256(t *testing.T) {
	srv := s3local.Start(t)
	st, err := s3store.New(t.Context(), srv.Config("presign"))
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(strings.Repeat("large file stored with git lfs\n", 100))
	sum := sha256.Sum256(body)
	put, err := st.PresignPut(t.Context(), "lfs/obj", int64(len(body)), sum, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if put.Method != http.MethodPut || put.Header["X-Amz-Checksum-Sha256"] == "" {
		t.Fatalf("presigned put = %+v, want a PUT carrying x-amz-checksum-sha256", put)
	}
	wrongHash := bytes.Clone(body)
	wrongHash[7] ^= 1
	for name, b := range map[string][]byte{"wrong hash": wrongHash, "longer": append(bytes.Clone(body), 'x'), "shorter": body[1:]} {
		if code, msg := send(t, put, b); code/100 == 2 {
			t.Errorf("%s body: status %d, want a refusal (%s)", name, code, msg)
		}
		if _, err := st.Head(t.Context(), "lfs/obj"); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("after the %s body: head error %v, want ErrNotFound", name, err)
		}
	}
	if code, msg := send(t, put, body); code != http.StatusOK {
		t.Fatalf("right body: status %d: %s", code, msg)
	}
	info, got, ok, err := st.HeadSHA256(t.Context(), "lfs/obj")
	if err != nil || !ok || got != sum || info.Size != int64(len(body)) {
		t.Fatalf("HeadSHA256 = %+v %x %v %v, want size %d sum %x", info, got, ok, err, len(body), sum)
	}
	get, err := st.PresignGet(t.Context(), "lfs/obj", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if code, msg := send(t, get, nil); code != http.StatusOK || msg != string(body) {
		t.Fatalf("presigned get: status %d, %d bytes", code, len(msg))
	}
	if _, _, _, err := st.HeadSHA256(t.Context(), "lfs/none"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("HeadSHA256 of a missing key: %v, want ErrNotFound", err)
	}
	// The store is found behind the timeout wrapper every node uses.
	if _, ok := objstore.PresignerOf(objstore.WithTimeout(st, time.Minute)); !ok {
		t.Fatal("PresignerOf does not see through WithTimeout")
	}
}

// TestHeadSHA256OfMultipartObject: an object written in parts has no
// SHA-256 of its bytes; HeadSHA256 says so rather than report the
// checksum of checksums.
func TestHeadSHA256OfMultipartObject(t *testing.T) {
	srv := s3local.Start(t)
	cfg := srv.Config("mp")
	cfg.MaxSinglePut = 1 << 20
	cfg.PartSize = 5 << 20
	st, err := s3store.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte{7}, 6<<20)
	if err := st.Put(t.Context(), "big", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	info, _, ok, err := st.HeadSHA256(t.Context(), "big")
	if err != nil || ok || info.Size != int64(len(data)) {
		t.Fatalf("HeadSHA256 = %+v ok=%v err=%v, want the size and no checksum", info, ok, err)
	}
}
