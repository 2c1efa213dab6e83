package version

import (
	"runtime/debug"
	"testing"
)

func TestResolve(t *testing.T) {
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Path: "github.com/rgit/rgit", Version: "v0.0.0-20250102030405-0a1b2c3d4e5f+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0a1b2c3d4e5f"},
			{Key: "vcs.time", Value: "2025-01-02T03:04:05Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	cases := []struct {
		name                 string
		bi                   *debug.BuildInfo
		ldVer, ldCommit, ldT string
		want                 Info
	}{
		{"no build info at all", nil, "", "", "",
			Info{"devel", "unknown", "unknown", "go-rt"}},
		{"go test / go run: devel, no vcs", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}, "", "", "",
			Info{"devel", "unknown", "unknown", "go1.26.0"}},
		{"go build in a checkout: vcs stamping", stamped, "", "", "",
			Info{"v0.0.0-20250102030405-0a1b2c3d4e5f+dirty", "0a1b2c3d4e5f-dirty", "2025-01-02T03:04:05Z", "go1.26.0"}},
		{"make build: ldflags win", stamped, "v1.2.0", "ffff", "2025-02-02T00:00:00Z",
			Info{"v1.2.0", "ffff", "2025-02-02T00:00:00Z", "go1.26.0"}},
	}
	for _, c := range cases {
		if got := resolve(c.bi, c.ldVer, c.ldCommit, c.ldT, "go-rt"); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestString(t *testing.T) {
	got := Info{"v1.2.0", "0a1b2c3", "2025-01-02T03:04:05Z", "go1.26.0"}.String()
	if want := "v1.2.0 (commit 0a1b2c3, 2025-01-02T03:04:05Z, go1.26.0)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
