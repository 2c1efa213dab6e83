package main

import (
	"bytes"
	"strings"
	"testing"
)

// A stream with a pass, a failure (its output shown), a skip (its reason
// listed) and a package whose binary died mid-test.
func TestSummary(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:1: quiet\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:2: boom\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestB"}`,
		`{"Action":"output","Package":"p","Test":"TestC","Output":"=== RUN   TestC\n"}`,
		`{"Action":"output","Package":"p","Test":"TestC","Output":"    c_test.go:3: \n*** SKIPPING TestC: chromium missing ***\n"}`,
		`{"Action":"output","Package":"p","Test":"TestC","Output":"--- SKIP: TestC (0.00s)\n"}`,
		`{"Action":"skip","Package":"p","Test":"TestC"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t0.1s\n"}`,
		`{"Action":"fail","Package":"p"}`,
		`{"Action":"output","Package":"q","Test":"TestD","Output":"panic: dead\n"}`,
		`{"Action":"fail","Package":"q"}`,
		`not json: go vet failed`,
	}, "\n")
	var out bytes.Buffer
	s := newSummary(&out)
	if err := s.read(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	got := out.String() + s.report()
	for _, want := range []string{
		"b_test.go:2: boom", "FAIL\tp\t0.1s", "panic: dead", "not json: go vet failed",
		"SKIP p TestC: c_test.go:3: *** SKIPPING TestC: chromium missing ***\n",
		"tests: 1 passed, 1 failed, 1 skipped\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "quiet") {
		t.Errorf("a passing test's output was printed:\n%s", got)
	}
	if s.ok() {
		t.Error("ok with failures")
	}
	if newSummary(&out).ok() {
		t.Error("ok with no package reported")
	}
}
