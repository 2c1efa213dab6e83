package main

import "testing"

func TestTreeBombOK(t *testing.T) {
	for _, tc := range []struct {
		status   int
		secs, mb float64
		want     bool
	}{
		{200, 0.5, 10, true},
		{422, 0.1, 1, true},
		{503, 0.1, 1, true},
		{500, 0.1, 1, false},
		{502, 0.1, 1, false},
		{200, 2.5, 10, false},
		{200, 0.5, 65, false},
	} {
		if got := treeBombOK(tc.status, tc.secs, tc.mb); got != tc.want {
			t.Errorf("treeBombOK(%d, %v s, %v MB) = %t, want %t", tc.status, tc.secs, tc.mb, got, tc.want)
		}
	}
}

func TestBombVerdict(t *testing.T) {
	const limit = "0033unpack object too large (limit 104857600 bytes, set RGIT_MAX_OBJECT_SIZE)\n"
	const busy = "0040unpack server busy: the pushed objects need 97 MiB more memory\n"
	for _, tc := range []struct {
		name    string
		answers []string
		refused int
		limit   string
	}{
		{"all named", []string{limit, limit}, 2, "RGIT_MAX_OBJECT_SIZE"},
		{"accepted", []string{"000eunpack ok\n", limit}, 1, "RGIT_MAX_OBJECT_SIZE"},
		{"one busy", []string{limit, busy}, 2, "none"},
		{"errors", []string{"error: connection reset", "HTTP 503: busy"}, 0, "none"},
		{"differ", []string{limit, "unpack pack too large (limit 1 bytes, set RGIT_MAX_PACK_SIZE)"}, 2, "none"},
	} {
		refused, limit := bombVerdict(tc.answers)
		if refused != tc.refused || limit != tc.limit {
			t.Errorf("%s: bombVerdict = %d, %s; want %d, %s", tc.name, refused, limit, tc.refused, tc.limit)
		}
	}
}
