package lfs

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/rgit/rgit/transport/wire/gitproto"
)

func TestCheckBatch(t *testing.T) {
	l := Limits{MaxBatchObjects: 3, MaxAnonBatchObjects: 2}.withDefaults()
	objs := func(n int) []objectSpec { return make([]objectSpec, n) }
	for _, c := range []struct {
		name      string
		req       batchRequest
		anon      bool
		transfer  string
		err       error
		errSubstr string
	}{
		{"download", batchRequest{Operation: "download", Objects: objs(3)}, false, transferBasic, nil, ""},
		{"upload sha256", batchRequest{Operation: "upload", HashAlgo: "sha256", Transfers: []string{"basic", "lfs-standalone-file"}}, false, transferBasic, nil, ""},
		{"ssh", batchRequest{Operation: "upload", Transfers: []string{"ssh"}}, false, transferSSH, nil, ""},
		{"bad operation", batchRequest{Operation: "delete"}, false, "", gitproto.ErrProtocol, "operation"},
		{"other hash", batchRequest{Operation: "download", HashAlgo: "sha512"}, false, "", errConflict, "sha512"},
		{"too many", batchRequest{Operation: "download", Objects: objs(4)}, false, "", gitproto.ErrProtocol, "too many objects in one batch (limit 3, set RGIT_LFS_MAX_BATCH_OBJECTS)"},
		{"anonymous at its cap", batchRequest{Operation: "download", Objects: objs(2)}, true, transferBasic, nil, ""},
		{"anonymous over its cap", batchRequest{Operation: "download", Objects: objs(3)}, true, "", gitproto.ErrProtocol,
			"too many objects in one batch without credentials (limit 2, set RGIT_LFS_MAX_ANON_BATCH_OBJECTS); authenticate to send more"},
		{"anonymous over both", batchRequest{Operation: "download", Objects: objs(4)}, true, "", gitproto.ErrProtocol, "(limit 3, set RGIT_LFS_MAX_BATCH_OBJECTS)"},
	} {
		tr, err := checkBatch(&c.req, l, c.anon)
		if tr != c.transfer || !errors.Is(err, c.err) || (c.errSubstr != "" && !strings.Contains(err.Error(), c.errSubstr)) {
			t.Errorf("%s: %q, %v; want %q, %v (%q)", c.name, tr, err, c.transfer, c.err, c.errSubstr)
		}
	}
}

func TestCheckObject(t *testing.T) {
	l := Limits{MaxObjectSize: 100}.withDefaults()
	oid := strings.Repeat("0f", 32)
	for _, c := range []struct {
		op   string
		o    objectSpec
		code int
	}{
		{"upload", objectSpec{oid, 100}, 0},
		{"upload", objectSpec{oid, 101}, http.StatusRequestEntityTooLarge},
		{"download", objectSpec{oid, 101}, 0}, // stored before a lower limit
		{"upload", objectSpec{oid, -1}, http.StatusUnprocessableEntity},
		{"upload", objectSpec{strings.ToUpper(oid), 1}, http.StatusUnprocessableEntity},
		{"download", objectSpec{"../../x", 1}, http.StatusUnprocessableEntity},
	} {
		e := checkObject(c.op, c.o, l)
		if (e == nil && c.code != 0) || (e != nil && e.Code != c.code) {
			t.Errorf("%s %+v: %+v, want code %d", c.op, c.o, e, c.code)
		}
	}
	if e := checkObject("upload", objectSpec{oid, 101}, l); e.Message != "object too large (limit 100 bytes, set RGIT_LFS_MAX_OBJECT_SIZE)" {
		t.Errorf("message %q", e.Message)
	}
}

func TestActionsFor(t *testing.T) {
	for _, c := range []struct {
		op      string
		present bool
		actions []string
		code    int
	}{
		{"download", true, []string{"download"}, 0},
		{"download", false, nil, http.StatusNotFound},
		{"upload", true, nil, 0},
		{"upload", false, []string{"upload", "verify"}, 0},
	} {
		got, e := actionsFor(c.op, c.present)
		if !slices.Equal(got, c.actions) || (e == nil) != (c.code == 0) || (e != nil && e.Code != c.code) {
			t.Errorf("%s present=%v: %v %+v", c.op, c.present, got, e)
		}
	}
}
