package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/memstore"
)

func probes(t *testing.T, s objstore.Store) []string {
	t.Helper()
	var keys []string
	for info, err := range s.List(t.Context(), objstore.ProbePrefix, "") {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, info.Key)
	}
	return keys
}

func TestVerifyPassesAndCleansUp(t *testing.T) {
	s := memstore.New()
	if err := objstore.Verify(t.Context(), s); err != nil {
		t.Fatalf("Verify on a working store: %v", err)
	}
	if left := probes(t, s); len(left) != 0 {
		t.Errorf("probe objects left behind: %v", left)
	}
}

// blindStore ignores If-None-Match, as some S3 look-alikes do.
type blindStore struct{ *memstore.Store }

func (b blindStore) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) error {
	return b.Put(ctx, key, r, size)
}

// brokenGet fails every read.
type brokenGet struct{ *memstore.Store }

func (b brokenGet) Get(context.Context, string) (io.ReadCloser, objstore.ObjectInfo, error) {
	return nil, objstore.ObjectInfo{}, errors.New("disk on fire")
}

func TestVerifyFailures(t *testing.T) {
	cases := []struct {
		name  string
		store objstore.Store
		want  []string
	}{
		{"create-if-absent ignored", blindStore{memstore.New()}, []string{"create-if-absent over the existing probe object under health/: ", "ignores If-None-Match"}},
		{"read fails", brokenGet{memstore.New()}, []string{"read back probe object under health/: ", "disk on fire"}},
	}
	for _, c := range cases {
		err := objstore.Verify(t.Context(), c.store)
		var ve *objstore.VerifyError
		if !errors.As(err, &ve) {
			t.Errorf("%s: Verify = %v, want a *VerifyError", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", c.name, err, w)
			}
		}
		if left := probes(t, c.store); len(left) != 0 {
			t.Errorf("%s: probe objects left behind after a failed check: %v", c.name, left)
		}
	}
}

// apiError has the methods of the AWS SDK's smithy.APIError.
type apiError struct{ code, msg string }

func (e apiError) Error() string {
	return "operation error S3: PutObject, StatusCode: 404, api error " + e.code
}
func (e apiError) ErrorCode() string    { return e.code }
func (e apiError) ErrorMessage() string { return e.msg }

func TestReason(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	cases := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("put: %w", apiError{"NoSuchBucket", "The specified bucket does not exist"}), "NoSuchBucket: The specified bucket does not exist"},
		{apiError{"AccessDenied", ""}, "AccessDenied"},
		{fmt.Errorf("put: exceeded attempts: %w", refused), "dial tcp: connection refused"},
		{errors.New("plain"), "plain"},
	}
	for _, c := range cases {
		if got := objstore.Reason(c.err); got != c.want {
			t.Errorf("Reason(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
