package s3store_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/s3store"
	"github.com/rgit/rgit/storage/objstore/storetest"
	"github.com/rgit/rgit/testkit/s3local"
)

func TestConformance(t *testing.T) {
	srv := s3local.Start(t)
	var n atomic.Int64
	storetest.Run(t, func(t *testing.T) objstore.Store {
		// One server, a fresh prefix per subtest.
		st, err := s3store.New(t.Context(), srv.Config(fmt.Sprintf("conf/%03d", n.Add(1))))
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

func TestMultipartCopy(t *testing.T) {
	srv := s3local.Start(t)
	cfg := srv.Config("mpcopy")
	cfg.MaxCopySize = 1 << 20
	cfg.CopyPartSize = 5 << 20
	st, err := s3store.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 12<<20+123)
	for i := range data {
		data[i] = byte(i*7 + i>>13)
	}
	if err := st.Put(t.Context(), "src", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if err := st.Copy(t.Context(), "src", "dst/copy"); err != nil {
		t.Fatalf("multipart Copy: %v", err)
	}
	rc, info, err := st.Get(t.Context(), "dst/copy")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil || info.Size != int64(len(data)) || !bytes.Equal(got, data) {
		t.Fatalf("copy differs: size %d, read %d bytes, err %v", info.Size, len(got), err)
	}
}

func TestPrefixIsolation(t *testing.T) {
	srv := s3local.Start(t)
	a, err := s3store.New(t.Context(), srv.Config("a/"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s3store.New(t.Context(), srv.Config("ab"))
	if err != nil {
		t.Fatal(err)
	}
	root, err := s3store.New(t.Context(), srv.Config(""))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Put(t.Context(), "k", bytes.NewReader([]byte("a")), 1); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(t.Context(), "k", bytes.NewReader([]byte("b")), 1); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for info, err := range a.List(t.Context(), "", "") {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, info.Key)
	}
	if len(keys) != 1 || keys[0] != "k" {
		t.Errorf("List under prefix a = %q, want [k]", keys)
	}
	if _, err := root.Head(t.Context(), "ab/k"); err != nil {
		t.Errorf("prefix ab not stored as ab/: %v", err)
	}
}

// TestProfileConfig checks AWS_PROFILE: static keys from the shared
// credentials file, region and endpoint_url from the shared config file,
// and path-style addressing for that endpoint.
func TestProfileConfig(t *testing.T) {
	srv := s3local.Start(t)
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	conf := filepath.Join(dir, "config")
	writeFile(t, creds, "[rgit]\naws_access_key_id = "+srv.AccessKey+"\naws_secret_access_key = "+srv.SecretKey+"\n")
	writeFile(t, conf, "[profile rgit]\nregion = "+srv.Region+"\nendpoint_url = "+srv.Endpoint+"\n")
	for k, v := range map[string]string{
		"AWS_SHARED_CREDENTIALS_FILE": creds,
		"AWS_CONFIG_FILE":             conf,
		"AWS_PROFILE":                 "rgit",
		"AWS_ACCESS_KEY_ID":           "",
		"AWS_SECRET_ACCESS_KEY":       "",
		"AWS_ENDPOINT":                "",
		"AWS_ENDPOINT_URL":            "",
		"AWS_REGION":                  "",
	} {
		t.Setenv(k, v)
	}
	st, err := s3store.New(t.Context(), s3store.ConfigFromEnv(srv.Bucket, "profile"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(t.Context(), "k", bytes.NewReader([]byte("x")), 1); err != nil {
		t.Fatalf("Put with profile config: %v", err)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
