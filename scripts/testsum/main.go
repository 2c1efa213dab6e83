// Command testsum reads `go test -json` on stdin and prints what a
// plain `go test` prints (each package's ok/FAIL line, build errors, the
// output of failing tests), then every skipped test with its reason and
// the counts:
//
//	tests: <N> passed, <M> failed, <K> skipped
//
// Skips are listed because a skip is a test that did not run: a CI run
// should say how many there were. -o also writes the skip list and the
// counts to a file. It exits 1 if any test or package failed or if no
// package was reported at all.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	out := flag.String("o", "", "also write the skip list and the counts to this file")
	flag.Parse()
	s := newSummary(os.Stdout)
	if err := s.read(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "testsum:", err)
		os.Exit(2)
	}
	report := s.report()
	fmt.Print(report)
	if *out != "" {
		if err := os.WriteFile(*out, []byte(report), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "testsum:", err)
			os.Exit(2)
		}
	}
	if !s.ok() {
		os.Exit(1)
	}
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

type testKey struct{ pkg, test string }

// summary follows the event stream.
type summary struct {
	w                      io.Writer
	pending                map[testKey][]string // output of tests still running
	passed, failed         int
	skipped                []string // "pkg Test: reason"
	packages, failPackages int
}

func newSummary(w io.Writer) *summary {
	return &summary{w: w, pending: map[testKey][]string{}}
}

func (s *summary) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// Not an event (go test's own error output): pass it on.
			fmt.Fprintln(s.w, sc.Text())
			continue
		}
		s.add(e)
	}
	return sc.Err()
}

func (s *summary) add(e event) {
	if e.Test == "" {
		switch e.Action {
		case "output", "build-output":
			fmt.Fprint(s.w, e.Output)
		case "pass", "skip":
			s.packages++
		case "fail":
			s.packages++
			s.failPackages++
			// A test binary that died leaves its running tests without a
			// verdict: show what they printed.
			for k, lines := range s.pending {
				if k.pkg == e.Package {
					s.print(lines)
					delete(s.pending, k)
				}
			}
		}
		return
	}
	k := testKey{e.Package, e.Test}
	switch e.Action {
	case "output":
		s.pending[k] = append(s.pending[k], e.Output)
	case "pass":
		s.passed++
		delete(s.pending, k)
	case "fail":
		s.failed++
		s.print(s.pending[k])
		delete(s.pending, k)
	case "skip":
		s.skipped = append(s.skipped, fmt.Sprintf("%s %s: %s", e.Package, e.Test, skipReason(s.pending[k])))
		delete(s.pending, k)
	}
}

func (s *summary) print(lines []string) {
	for _, l := range lines {
		fmt.Fprint(s.w, l)
	}
}

// skipReason is what the test logged before it skipped, on one line and
// at most 300 bytes (go test's own "=== RUN" and "--- SKIP" lines left
// out).
func skipReason(lines []string) string {
	var words []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
			continue
		}
		words = append(words, strings.Fields(t)...)
	}
	r := strings.Join(words, " ")
	if len(r) > 300 {
		r = r[:300] + "…"
	}
	return r
}

func (s *summary) report() string {
	var b []byte
	if len(s.skipped) > 0 {
		b = fmt.Appendf(b, "skipped tests (%d):\n", len(s.skipped))
		for _, l := range s.skipped {
			b = fmt.Appendf(b, "  SKIP %s\n", l)
		}
	}
	return string(fmt.Appendf(b, "tests: %d passed, %d failed, %d skipped\n", s.passed, s.failed, len(s.skipped)))
}

func (s *summary) ok() bool { return s.failed == 0 && s.failPackages == 0 && s.packages > 0 }
