package cluster

import (
	"errors"
	"reflect"
	"testing"
)

func TestLeaderOf(t *testing.T) {
	ok := map[string]string{"rgit-3": "rgit-0", "rgit-0": "rgit-0", "my-git-12": "my-git-0"}
	for in, want := range ok {
		if got, err := LeaderOf(in); err != nil || got != want {
			t.Errorf("LeaderOf(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "rgit", "rgit-", "-3", "rgit-x", "rgit-03", "rgit--1", "rgit-+1", "rg it-1", "rgit-99999999999"} {
		if _, err := LeaderOf(bad); !errors.Is(err, ErrInvalidName) {
			t.Errorf("LeaderOf(%q) err = %v", bad, err)
		}
	}
}

func TestPeerAddr(t *testing.T) {
	if got := PeerAddr("rgit-1", "rgit-peer", 8081); got != "rgit-1.rgit-peer:8081" {
		t.Fatal(got)
	}
}

func TestParsePeerMap(t *testing.T) {
	got, err := ParsePeerMap("rgit-0=127.0.0.1:9081, rgit-1 = [::1]:9082")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"rgit-0": "127.0.0.1:9081", "rgit-1": "[::1]:9082"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
	if n := SortedNodes(got); !reflect.DeepEqual(n, []string{"rgit-0", "rgit-1"}) {
		t.Fatalf("sorted %v", n)
	}
	for _, bad := range []string{"", "rgit-0", "rgit-0=host", "rgit-0=:80", "rgit-0=h:0", "rgit-0=h:x", "=h:1", "rgit-0=h:1,rgit-0=h:2", "rgit-0=h:1,"} {
		if _, err := ParsePeerMap(bad); !errors.Is(err, ErrInvalidName) {
			t.Errorf("ParsePeerMap(%q) err = %v", bad, err)
		}
	}
}
