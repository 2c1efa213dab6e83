package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestRunsAreFreeAndDistinct: every port of every run can be bound, all
// at once.
func TestRunsAreFreeAndDistinct(t *testing.T) {
	ps, err := Runs(3, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 3 {
		t.Fatalf("got %d runs, want 3", len(ps))
	}
	for _, p := range ps {
		for i := range 2 {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+i))
			if err != nil {
				t.Fatalf("port %d reported free: %v", p+i, err)
			}
			defer l.Close()
		}
	}
}
