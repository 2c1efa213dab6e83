package lfs

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/filestore"
	"github.com/rgit/rgit/storage/objstore/guard"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/repo"
)

// present reports whether the fixture's store holds o for alice/repoName.
func (f *fixture) present(t *testing.T, repoName string, o object) bool {
	t.Helper()
	ok, err := newObjects(f.store).present(t.Context(), names.MustParse("alice/"+repoName), o.spec.OID, o.spec.Size)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestNodeServedUploadChecksBeforeTheObjectAppears: on a store without
// presigning, the node serves the actions under signed paths; an upload
// whose bytes have another SHA-256, or that is cut off mid-body, stores
// nothing (on the file store, not even a temp file), so the object is
// still missing for the next batch; the right bytes are stored, verify
// confirms them, a second upload batch skips the object, and downloads
// (whole, and resumed with a Range) read it. The file store is wrapped as
// a node wraps it (WithTimeout, the guard), whose downloads are sent with
// sendfile(2) (objstore.Send).
func TestNodeServedUploadChecksBeforeTheObjectAppears(t *testing.T) {
	fs, err := filestore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]objstore.Store{"memory": memstore.New(),
		"file": guard.New(objstore.WithTimeout(fs, time.Minute), guard.Options{OpTimeout: time.Minute})} {
		t.Run(name, func(t *testing.T) {
			testNodeServed(t, st, func() []os.DirEntry {
				if name != "file" {
					return nil
				}
				temps, err := os.ReadDir(filepath.Join(fs.Root(), ".rgit-tmp"))
				if err != nil {
					t.Fatal(err)
				}
				return temps
			})
		})
	}
}

// testNodeServed is TestNodeServedUploadChecksBeforeTheObjectAppears on
// st, whose temp files temps lists.
func testNodeServed(t *testing.T, st objstore.Store, temps func() []os.DirEntry) {
	f := newFixture(t, st, Limits{})
	// More than a chunk of what Pace sends of a file at once.
	o := newObject(strings.Repeat("the large file's content\n", 40000))
	code, resp := f.batch(t, "alice/priv", "bob", "upload", o.spec)
	if code != http.StatusOK || len(resp.Objects) != 1 || resp.Objects[0].Error != nil {
		t.Fatalf("upload batch: %d %+v", code, resp)
	}
	a := resp.Objects[0]
	up, verify := a.Actions["upload"], a.Actions["verify"]
	prefix := f.ts.URL + "/alice/priv.git/info/lfs/"
	if !a.Authenticated || !strings.HasPrefix(up.Href, prefix+"objects/"+o.spec.OID+"?t=") || !strings.HasPrefix(verify.Href, prefix+"verify?t=") ||
		up.ExpiresIn != int(ActionTTL/time.Second) {
		t.Fatalf("actions %+v", a)
	}

	wrong := []byte(strings.ToUpper(string(o.data)))
	if code, _ := f.do(t, http.MethodPut, up.Href, "", wrong, nil); code != http.StatusUnprocessableEntity {
		t.Fatalf("upload of other bytes of the same length: %d, want 422", code)
	}
	if code, _ := f.do(t, http.MethodPut, up.Href, "", o.data[:100], nil); code != http.StatusUnprocessableEntity {
		t.Fatalf("upload of too few bytes: %d, want 422", code)
	}
	cutUpload(t, up.Href, o.data)
	if f.present(t, "priv", o) {
		t.Fatal("a refused or interrupted upload left the object in the store")
	}
	if left := temps(); len(left) != 0 {
		t.Fatalf("refused uploads left %d temp files", len(left))
	}
	if code, _ := f.do(t, http.MethodPost, verify.Href, "", o.spec, nil); code != http.StatusNotFound {
		t.Fatalf("verify before any good upload: %d, want 404", code)
	}

	if code, _ := f.do(t, http.MethodPut, up.Href, "", o.data, nil); code != http.StatusOK {
		t.Fatalf("upload: %d", code)
	}
	if code, _ := f.do(t, http.MethodPost, verify.Href, "", o.spec, nil); code != http.StatusOK {
		t.Fatalf("verify: %d", code)
	}
	if code, _ := f.do(t, http.MethodPost, verify.Href, "", objectSpec{o.spec.OID, o.spec.Size + 1}, nil); code != http.StatusBadRequest {
		t.Fatalf("verify naming another size than its link: %d, want 400", code)
	}
	if code, resp := f.batch(t, "alice/priv", "bob", "upload", o.spec); code != http.StatusOK || resp.Objects[0].Actions != nil {
		t.Fatalf("second upload batch: %d %+v, want no actions", code, resp)
	}

	code, resp = f.batch(t, "alice/priv", "rea", "download", o.spec)
	if code != http.StatusOK || resp.Objects[0].Actions["download"].Href == "" {
		t.Fatalf("download batch: %d %+v", code, resp)
	}
	get := resp.Objects[0].Actions["download"].Href
	if body := fetch(t, get, ""); body != string(o.data) {
		t.Fatalf("download: %d bytes", len(body))
	}
	if body := fetch(t, get, fmt.Sprintf("bytes=%d-%d", 1000, o.spec.Size-1)); body != string(o.data[1000:]) {
		t.Fatalf("resumed download: %d bytes", len(body))
	}
	// A link is for its own object, operation and repository.
	for name, href := range map[string]string{
		"upload link used to download": strings.Replace(up.Href, "PUT", "", 1),
		"other repository":             strings.Replace(get, "/alice/priv.git/", "/alice/pub.git/", 1),
		"edited ticket":                get[:len(get)-3] + "AAA",
	} {
		if code, _ := f.do(t, http.MethodGet, href, "", nil, nil); code != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", name, code)
		}
	}
	expired := f.srv.sign.sign(ticket{Op: opDownload, Owner: "alice", Name: "priv", OID: o.spec.OID, Size: o.spec.Size, Exp: time.Now().Add(-time.Second).Unix()})
	if code, _ := f.do(t, http.MethodGet, prefix+"objects/"+o.spec.OID+"?t="+expired, "", nil, nil); code != http.StatusUnauthorized {
		t.Errorf("expired link: %d, want 401", code)
	}
}

// cutUpload sends a PUT that announces all of data and closes the
// connection after half of it.
func cutUpload(t *testing.T, href string, data []byte) {
	t.Helper()
	u, err := url.Parse(href)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "PUT %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n", u.RequestURI(), u.Host, len(data))
	c.Write(data[:len(data)/2])
	c.(*net.TCPConn).CloseWrite()
	// The server answers, or just closes, once it sees the body end early.
	io.Copy(io.Discard, bufio.NewReader(c))
	c.Close()
}

// fetch GETs href (with a Range when rng is set) and returns the body.
func fetch(t *testing.T, href, rng string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, href, nil)
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	want := http.StatusOK
	if rng != "" {
		want = http.StatusPartialContent
	}
	if resp.StatusCode != want {
		t.Fatalf("GET %s: %d %s", href, resp.StatusCode, b)
	}
	return string(b)
}

// TestBatchRefusals: per-object errors (a bad id or size 422, an upload
// over RGIT_LFS_MAX_OBJECT_SIZE 413, a missing download 404) next to
// valid objects, and whole-request refusals naming their limit.
func TestBatchRefusals(t *testing.T) {
	f := newFixture(t, nil, Limits{MaxObjectSize: 1000, MaxBatchObjects: 3, MaxBatchBytes: 4096})
	good := newObject("fits")
	code, resp := f.batch(t, "alice/priv", "alice", "upload",
		good.spec, objectSpec{"not-an-oid", 1}, objectSpec{good.spec.OID, -1})
	if code != http.StatusOK || resp.Objects[0].Error != nil || resp.Objects[1].Error.Code != 422 || resp.Objects[2].Error.Code != 422 {
		t.Fatalf("upload batch: %d %+v", code, resp)
	}
	big := newObject(strings.Repeat("x", 1001))
	_, resp = f.batch(t, "alice/priv", "alice", "upload", big.spec)
	if e := resp.Objects[0].Error; e == nil || e.Code != 413 || e.Message != "object too large (limit 1000 bytes, set RGIT_LFS_MAX_OBJECT_SIZE)" {
		t.Fatalf("oversized upload: %+v", resp.Objects[0])
	}
	_, resp = f.batch(t, "alice/priv", "alice", "download", good.spec)
	if e := resp.Objects[0].Error; e == nil || e.Code != 404 {
		t.Fatalf("missing download: %+v", resp.Objects[0])
	}
	var m message
	path := "/alice/priv.git/info/lfs/objects/batch"
	for _, c := range []struct {
		name string
		body any
		code int
		msg  string
	}{
		{"too many objects", batchRequest{Operation: "download", Objects: make([]objectSpec, 4)}, 413, "too many objects in one batch (limit 3, set RGIT_LFS_MAX_BATCH_OBJECTS)"},
		{"body too large", []byte(`{"operation":"download","objects":[]` + strings.Repeat(" ", 4096) + `}`), 413, "batch request too large (limit 4096 bytes, set RGIT_LFS_MAX_BATCH_BYTES)"},
		{"other hash", batchRequest{Operation: "download", HashAlgo: "sha512"}, 409, ""},
		{"bad operation", batchRequest{Operation: "copy"}, 400, ""},
		{"not JSON", []byte("{"), 400, ""},
	} {
		m = message{}
		code, _ := f.do(t, http.MethodPost, path, "alice", c.body, &m)
		if code != c.code || (c.msg != "" && m.Message != c.msg) {
			t.Errorf("%s: %d %q, want %d %q", c.name, code, m.Message, c.code, c.msg)
		}
	}
}

// TestBatchAccess: the batch decides as git does, for every kind of
// caller: download needs read, upload write; a private repository is
// 401 to anonymous callers and 404 to others, byte for byte a missing
// one's answer.
func TestBatchAccess(t *testing.T) {
	f := newFixture(t, nil, Limits{})
	o := newObject("x")
	want := map[string]map[string]int{
		// caller: pub download, pub upload, priv download, priv upload
		"":            {"pub/download": 200, "pub/upload": 401, "priv/download": 401, "priv/upload": 401},
		"carol":       {"pub/download": 200, "pub/upload": 403, "priv/download": 404, "priv/upload": 404},
		"alice":       {"pub/download": 200, "pub/upload": 200, "priv/download": 200, "priv/upload": 200},
		"alice-read":  {"pub/download": 200, "pub/upload": 403, "priv/download": 200, "priv/upload": 403},
		"alice-other": {"pub/download": 200, "pub/upload": 403, "priv/download": 404, "priv/upload": 404},
		"rea":         {"pub/download": 200, "pub/upload": 403, "priv/download": 200, "priv/upload": 403},
		"bob":         {"pub/download": 200, "pub/upload": 200, "priv/download": 200, "priv/upload": 200},
	}
	for caller, cells := range want {
		for cell, code := range cells {
			repoName, op, _ := strings.Cut(cell, "/")
			got, _ := f.batch(t, "alice/"+repoName, caller, op, o.spec)
			if got != code {
				t.Errorf("%q %s: %d, want %d", caller, cell, got, code)
			}
		}
	}
	_, h := f.do(t, http.MethodPost, "/alice/priv.git/info/lfs/objects/batch", "", batchRequest{Operation: "download"}, nil)
	if h.Get("LFS-Authenticate") == "" {
		t.Error("401 without LFS-Authenticate")
	}
	var missing, private message
	f.do(t, http.MethodPost, "/alice/nope.git/info/lfs/objects/batch", "carol", batchRequest{Operation: "download"}, &missing)
	f.do(t, http.MethodPost, "/alice/priv.git/info/lfs/objects/batch", "carol", batchRequest{Operation: "download"}, &private)
	if missing.Message != private.Message {
		t.Errorf("missing %q and private %q answers differ", missing.Message, private.Message)
	}
	if code, _ := f.batch(t, "alice/priv", "no-such-token", "download", o.spec); code != http.StatusUnauthorized {
		t.Errorf("unknown token: %d, want 401", code)
	}
}

// TestLocksAPI: one lock per path, listing with filters and pages,
// verify splitting ours from theirs, and unlocking: one's own lock, and
// another's only with force by an administrator.
func TestLocksAPI(t *testing.T) {
	f := newFixture(t, nil, Limits{})
	base := "/alice/priv.git/info/lfs/locks"
	create := func(token, path string) (int, lockAnswer) {
		var a lockAnswer
		code, _ := f.do(t, http.MethodPost, base, token, createLockRequest{Path: path}, &a)
		return code, a
	}
	code, a := create("alice", "art/a.psd")
	if code != http.StatusCreated || a.Lock.Owner.Name != "alice" {
		t.Fatalf("alice locks: %d %+v", code, a)
	}
	aliceLock := a.Lock.ID
	if code, a := create("bob", "art/a.psd"); code != http.StatusConflict || a.Lock == nil || a.Lock.ID != aliceLock {
		t.Fatalf("bob locks alice's path: %d %+v", code, a)
	}
	code, a = create("bob", "art/b.psd")
	if code != http.StatusCreated {
		t.Fatalf("bob locks: %d", code)
	}
	bobLock := a.Lock.ID
	if code, _ := create("rea", "art/c.psd"); code != http.StatusForbidden {
		t.Fatalf("a reader locks: %d, want 403", code)
	}
	if code, _ := create("alice", "bad\npath"); code != http.StatusUnprocessableEntity {
		t.Fatalf("a path with a newline: %d, want 422", code)
	}
	var list lockList
	get := func(q string) {
		list = lockList{}
		f.do(t, http.MethodGet, base+q, "rea", nil, &list)
	}
	if code, _ := f.do(t, http.MethodGet, base, "rea", nil, &list); code != 200 || len(list.Locks) != 2 || list.NextCursor != "" {
		t.Fatalf("list: %d %+v", code, list)
	}
	if get("?path=art/b.psd"); len(list.Locks) != 1 || list.Locks[0].ID != bobLock {
		t.Fatalf("list by path: %+v", list)
	}
	if get("?limit=1"); len(list.Locks) != 1 || list.NextCursor != bobLock {
		t.Fatalf("first page: %+v", list)
	}
	if get("?limit=1&cursor=" + bobLock); len(list.Locks) != 1 || list.Locks[0].ID != bobLock || list.NextCursor != "" {
		t.Fatalf("second page: %+v", list)
	}
	if code, _ := f.do(t, http.MethodGet, base, "", nil, nil); code != http.StatusUnauthorized {
		t.Fatalf("anonymous list of a private repository: %d", code)
	}
	var v verifyLocksAnswer
	if code, _ := f.do(t, http.MethodPost, base+"/verify", "bob", verifyLocksRequest{}, &v); code != 200 || len(v.Ours) != 1 || v.Ours[0].ID != bobLock || len(v.Theirs) != 1 {
		t.Fatalf("bob's verify: %d %+v", code, v)
	}
	if code, _ := f.do(t, http.MethodPost, base+"/verify", "rea", verifyLocksRequest{}, nil); code != http.StatusForbidden {
		t.Fatalf("a reader's verify: %d, want 403", code)
	}
	unlock := func(token, id string, force bool) int {
		code, _ := f.do(t, http.MethodPost, base+"/"+id+"/unlock", token, unlockRequest{Force: force}, nil)
		return code
	}
	if code := unlock("bob", aliceLock, false); code != http.StatusForbidden {
		t.Fatalf("bob unlocks alice's lock: %d", code)
	}
	if code := unlock("bob", aliceLock, true); code != http.StatusForbidden {
		t.Fatalf("bob (write, not admin) forces: %d", code)
	}
	if code := unlock("alice", bobLock, true); code != http.StatusOK {
		t.Fatalf("alice (admin) forces: %d", code)
	}
	if code := unlock("alice", aliceLock, false); code != http.StatusOK {
		t.Fatalf("alice unlocks her own: %d", code)
	}
	if code := unlock("alice", aliceLock, false); code != http.StatusNotFound {
		t.Fatalf("unlock again: %d", code)
	}
}

func TestPageLocks(t *testing.T) {
	var all []repo.Lock
	for i := range 5 {
		all = append(all, repo.Lock{ID: fmt.Sprint(i), Path: fmt.Sprint("p", i%2)})
	}
	ids := func(ls []repo.Lock) string {
		var s []string
		for _, l := range ls {
			s = append(s, l.ID)
		}
		return strings.Join(s, ",")
	}
	for _, c := range []struct {
		q          lockQuery
		page, next string
	}{
		{lockQuery{Limit: 10}, "0,1,2,3,4", ""},
		{lockQuery{Limit: 2}, "0,1", "2"},
		{lockQuery{Limit: 2, Cursor: "2"}, "2,3", "4"},
		{lockQuery{Limit: 2, Path: "p1"}, "1,3", ""},
		{lockQuery{Limit: 1, Path: "p0", Cursor: "1"}, "2", "4"},
		{lockQuery{Limit: 5, ID: "3"}, "3", ""},
	} {
		page, next := pageLocks(all, c.q)
		if ids(page) != c.page || next != c.next {
			t.Errorf("%+v: %s next %q, want %s next %q", c.q, ids(page), next, c.page, c.next)
		}
	}
	for s, want := range map[string]int{"": DefaultLockPage, "7": 7, "5000": MaxLockPage} {
		if n, err := parseLimit(s); err != nil || n != want {
			t.Errorf("parseLimit(%q) = %d, %v", s, n, err)
		}
	}
	for _, s := range []string{"0", "-1", "x"} {
		if _, err := parseLimit(s); err == nil {
			t.Errorf("parseLimit(%q) accepted", s)
		}
	}
}

func TestRangeStart(t *testing.T) {
	for h, want := range map[string][2]int64{
		"": {0, 0}, "bytes=10-": {10, 1}, "bytes=10-99": {10, 1}, "bytes=10-50": {0, 0},
		"bytes=-5": {0, 0}, "bytes=5-6,7-8": {0, 0}, "items=1-": {0, 0}, "bytes=+1-": {0, 0},
	} {
		off, ok := rangeStart(h, 100)
		if off != want[0] || ok != (want[1] == 1) {
			t.Errorf("rangeStart(%q) = %d %v", h, off, ok)
		}
	}
}
