package lfs

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore/s3store"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/testkit/s3local"
)

// TestPresignedActionsOnS3: on an S3 store the batch hands out the
// store's own presigned URLs, so the node moves no bytes: the upload is
// bound to the object's size and SHA-256 (the store refuses anything
// else), and verify confirms from the checksum the store recorded. An
// object the store holds with other bytes (a store that checked nothing)
// is refused by verify, deleted, and counts as missing again.
func TestPresignedActionsOnS3(t *testing.T) {
	srv := s3local.Start(t)
	st, err := s3store.New(t.Context(), srv.Config("lfs"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, st, Limits{})
	o := newObject(strings.Repeat("presigned\n", 10000))
	code, resp := f.batch(t, "alice/priv", "bob", "upload", o.spec)
	if code != http.StatusOK {
		t.Fatalf("upload batch: %d", code)
	}
	up, verify := resp.Objects[0].Actions["upload"], resp.Objects[0].Actions["verify"]
	if !strings.HasPrefix(up.Href, srv.Endpoint+"/") || up.Header["X-Amz-Checksum-Sha256"] == "" || !strings.HasPrefix(verify.Href, f.ts.URL+"/") {
		t.Fatalf("actions: upload %+v verify %+v", up, verify)
	}
	put := func(body []byte) int {
		req, _ := http.NewRequest(http.MethodPut, up.Href, bytes.NewReader(body))
		for k, v := range up.Header {
			req.Header.Set(k, v)
		}
		req.Header.Set("Content-Type", "application/octet-stream") // as git-lfs sends, unsigned
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := put(bytes.ToUpper(o.data)); code/100 == 2 {
		t.Fatalf("presigned PUT of other bytes: %d, want a refusal", code)
	}
	if code := put(o.data[1:]); code/100 == 2 {
		t.Fatalf("presigned PUT of fewer bytes: %d, want a refusal", code)
	}
	if code, _ := f.do(t, http.MethodPost, verify.Href, "", o.spec, nil); code != http.StatusNotFound {
		t.Fatalf("verify after refused uploads: %d, want 404", code)
	}
	if code := put(o.data); code != http.StatusOK {
		t.Fatalf("presigned PUT: %d", code)
	}
	if code, _ := f.do(t, http.MethodPost, verify.Href, "", o.spec, nil); code != http.StatusOK {
		t.Fatalf("verify: %d", code)
	}
	_, resp = f.batch(t, "alice/priv", "rea", "download", o.spec)
	get := resp.Objects[0].Actions["download"].Href
	if !strings.HasPrefix(get, srv.Endpoint+"/") {
		t.Fatalf("download href %q is not the store's", get)
	}
	if body := fetch(t, get, ""); body != string(o.data) {
		t.Fatalf("presigned download: %d bytes", len(body))
	}

	// The same id with other bytes, as a store that checks no checksum
	// would have let in: verify reads it, refuses it, deletes it.
	key := repo.LFSKey(names.MustParse("alice/priv"), o.spec.OID)
	forged := bytes.ToUpper(o.data)
	if err := st.Put(t.Context(), key, bytes.NewReader(forged), int64(len(forged))); err != nil {
		t.Fatal(err)
	}
	var m message
	if code, _ := f.do(t, http.MethodPost, verify.Href, "", o.spec, &m); code != http.StatusUnprocessableEntity || !strings.Contains(m.Message, "SHA-256") {
		t.Fatalf("verify of forged bytes: %d %q, want 422 naming the SHA-256", code, m.Message)
	}
	if f.present(t, "priv", o) {
		t.Fatal("forged object still present after verify refused it")
	}
}
