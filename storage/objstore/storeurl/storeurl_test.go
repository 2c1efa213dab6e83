package storeurl_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rgit/rgit/storage/objstore/storeurl"
	"github.com/rgit/rgit/testkit/s3local"
)

func TestOpenFile(t *testing.T) {
	dir := t.TempDir()
	s, err := storeurl.Open(t.Context(), "file://"+dir, storeurl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), "a/b", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a", "b")); err != nil {
		t.Errorf("object not under %s: %v", dir, err)
	}

	// Relative: file://./data under the working directory.
	t.Chdir(t.TempDir())
	s, err = storeurl.Open(t.Context(), "file://./data", storeurl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), "k", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("data", "k")); err != nil {
		t.Errorf("file://./data did not write ./data/k: %v", err)
	}
}

func TestOpenMemWarns(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	s, err := storeurl.Open(t.Context(), "mem://", storeurl.Options{Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), "k", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	if logs.FilterMessageSnippet("NOTHING PERSISTS").Len() != 1 {
		t.Errorf("mem:// did not warn that nothing persists: %v", logs.All())
	}
}

func TestOpenBadURLs(t *testing.T) {
	for _, u := range []string{
		"", "data", "/abs/dir", "file://", "file://data", "file://host/dir",
		"mem://x", "s3://", "s3:///prefix", "s3://bucket?region=x", "s3://key:secret@bucket",
		"s3://bucket/a//b", "s3://bucket/../x", "gs://bucket",
	} {
		_, err := storeurl.Open(t.Context(), u, storeurl.Options{})
		if !errors.Is(err, storeurl.ErrBadURL) {
			t.Errorf("Open(%q) error = %v, want ErrBadURL", u, err)
			continue
		}
		if !strings.Contains(err.Error(), `"`+u+`"`) {
			t.Errorf("Open(%q) error %q does not name the URL", u, err)
		}
	}
}

func TestOpenS3FromEnv(t *testing.T) {
	srv := s3local.Start(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Setenv("AWS_PROFILE", "")
	s, err := storeurl.Open(t.Context(), "s3://"+srv.Bucket+"/some/prefix", storeurl.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), "k", strings.NewReader("x"), 1); err != nil {
		t.Fatalf("Put through s3:// URL: %v", err)
	}
	root, err := storeurl.Open(t.Context(), "s3://"+srv.Bucket, storeurl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if info, err := root.Head(t.Context(), "some/prefix/k"); err != nil || info.Size != 1 {
		t.Errorf("object not at some/prefix/k: %+v, %v", info, err)
	}
}
