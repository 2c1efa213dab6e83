// Package version says which build of rgit is running: module version,
// commit, commit time and Go version. The Makefile sets version, commit and
// date with -ldflags -X; without them (go build, go install, go test) the
// values come from the build information Go embeds (debug.ReadBuildInfo).
// It imports only the standard library. transport/node reports the build
// (logs, /metrics, rollout status); cmd/rgit and cmd/rgit-admin print it.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set by the linker: -X github.com/rgit/rgit/transport/node/version.version=... etc.
var version, commit, date string

// Info describes one build.
type Info struct {
	Version   string // module version, or "devel"
	Commit    string // VCS revision, "-dirty" appended for a modified tree; "unknown" if not stamped
	Date      string // commit time (RFC 3339), so rebuilding a commit gives the same binary; "unknown" if not stamped
	GoVersion string
}

// Get returns this binary's build information.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(bi, version, commit, date, runtime.Version())
}

// resolve prefers the linker-set values and falls back to the embedded
// build information field by field.
func resolve(bi *debug.BuildInfo, ldVersion, ldCommit, ldDate, goVersion string) Info {
	i := Info{Version: ldVersion, Commit: ldCommit, Date: ldDate, GoVersion: goVersion}
	if bi != nil {
		if bi.GoVersion != "" {
			i.GoVersion = bi.GoVersion
		}
		if i.Version == "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		var rev, when string
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if i.Commit == "" && rev != "" {
			i.Commit = rev
			if dirty {
				i.Commit += "-dirty"
			}
		}
		if i.Date == "" {
			i.Date = when
		}
	}
	if i.Version == "" {
		i.Version = "devel"
	}
	if i.Commit == "" {
		i.Commit = "unknown"
	}
	if i.Date == "" {
		i.Date = "unknown"
	}
	return i
}

// String is the one-line form `rgit version` prints and logs carry:
// "v1.2.0 (commit 0a1b2c3, 2025-01-02T03:04:05Z, go1.26.0)".
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, %s, %s)", i.Version, i.Commit, i.Date, i.GoVersion)
}
