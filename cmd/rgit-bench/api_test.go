package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"testing"

	"github.com/rgit/rgit/storage/object"
)

func tgz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Name: "top/", Typeflag: tar.TypeDir, Mode: 0o755})
	for name, data := range files {
		tw.WriteHeader(&tar.Header{Name: "top/" + name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))})
		tw.Write([]byte(data))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	gz.Close()
	return buf.Bytes()
}

// The API bench fails on an answer that differs from git's.
func TestVerifyAPI(t *testing.T) {
	blob := func(s string) string { return object.Hash(object.Blob, []byte(s)).String() }
	tree := apiTarget{files: map[string]string{"a.go": blob("package a\n"), "d/b.txt": blob("b\n")}}
	ok := map[string]string{"a.go": "package a\n", "d/b.txt": "b\n"}
	if err := verifyAPI("archive", tree, nil, tgz(t, ok)); err != nil {
		t.Errorf("a right archive: %v", err)
	}
	for name, files := range map[string]map[string]string{
		"a file missing":   {"a.go": "package a\n"},
		"a file changed":   {"a.go": "package a\n", "d/b.txt": "B\n"},
		"a file left over": {"a.go": "package a\n", "d/b.txt": "b\n", "x": ""},
		"a file renamed":   {"a.go": "package a\n", "d/c.txt": "b\n"},
	} {
		if err := verifyAPI("archive", tree, nil, tgz(t, files)); !errors.Is(err, ErrAPIAnswer) {
			t.Errorf("archive with %s: err = %v", name, err)
		}
	}
	if err := verifyAPI("archive", tree, nil, []byte("not gzip")); !errors.Is(err, ErrAPIAnswer) {
		t.Errorf("not an archive: err = %v", err)
	}

	gitBlob := []byte("line \"one\"\n")
	if err := verifyAPI("blob", tree, gitBlob, []byte(`{"content":"line \"one\"\n"}`)); err != nil {
		t.Errorf("a right blob: %v", err)
	}
	if err := verifyAPI("blob", tree, gitBlob, []byte(`{"content":"line one\n"}`)); !errors.Is(err, ErrAPIAnswer) {
		t.Errorf("a wrong blob: err = %v", err)
	}

	refs := []byte("1111111111111111111111111111111111111111 commit\trefs/heads/main\n2222222222222222222222222222222222222222 tag\trefs/tags/v1\n")
	right := []byte(`[{"name":"refs/heads/main","oid":"1111111111111111111111111111111111111111"},{"name":"refs/tags/v1","oid":"2222222222222222222222222222222222222222"}]`)
	if err := verifyAPI("refs", tree, refs, right); err != nil {
		t.Errorf("right refs: %v", err)
	}
	if err := verifyAPI("refs", tree, refs, right[:60]); !errors.Is(err, ErrAPIAnswer) {
		t.Errorf("refs missing a tag: err = %v", err)
	}
	if err := verifyAPI("log", tree, []byte("no commits\n"), right); !errors.Is(err, ErrAPIAnswer) {
		t.Errorf("git listing nothing: err = %v", err)
	}
}
