package api

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rgit/rgit/transport/wire/gitproto"
)

// Limits bound the work of one answer, not only its size: a commit whose
// tree nests a few levels of many subtrees is a few kilobytes to push and
// millions of paths to expand. Zero fields take the defaults below.
type Limits struct {
	// MaxEntries bounds the tree entries one answer visits: listed,
	// searched for a path, compared by a diff, sized or written by an
	// archive.
	MaxEntries int
	// MaxDiffFiles bounds the changed files a diff lists.
	MaxDiffFiles int
	// MaxDiffBytes bounds a diff's text.
	MaxDiffBytes int
	// MaxDiffFileBytes: a file larger than this on either side is not
	// line-diffed but shown as binary, as git does past
	// core.bigFileThreshold.
	MaxDiffFileBytes int64
	// DiffTimeout bounds the time one answer spends on line diffs.
	DiffTimeout time.Duration
	// RenameLimit is git's diff.renameLimit: with more added or deleted
	// files than this, renames are found only where content is identical.
	RenameLimit int
	// MaxLogScan bounds the commits a log with a path filter examines for
	// one page.
	MaxLogScan int
	// MaxArchiveBytes bounds the file content of one archive.
	MaxArchiveBytes int64
	// MaxBlameCommits bounds the commits one blame examines, BlameTimeout
	// its time; past either, the lines left are the oldest commit's
	// reached. MaxBlameFileBytes bounds each version of the file it
	// reads (a larger file is refused).
	MaxBlameCommits   int
	BlameTimeout      time.Duration
	MaxBlameFileBytes int64
	// A search page stops (partial, saying where) once it has scanned
	// MaxSearchBytes of content, looked at MaxSearchFiles files, read
	// MaxSearchBlobs blobs or run for SearchTimeout; files larger than
	// MaxSearchFileBytes are skipped unread.
	MaxSearchBytes     int64
	MaxSearchFiles     int
	MaxSearchBlobs     int
	SearchTimeout      time.Duration
	MaxSearchFileBytes int64
	// MaxLastCommitScan bounds the commits one lastcommit walk examines.
	MaxLastCommitScan int
	// LastCommitTimeout bounds the time of one lastcommit walk (a
	// request may ask for less).
	LastCommitTimeout time.Duration
}

// Defaults of Limits.
const (
	// DefaultMaxEntries is several times the largest source trees people
	// download whole (a Linux checkout is about 90,000 entries).
	DefaultMaxEntries = 500_000
	// DefaultMaxDiffFiles is what large hosts show of one diff.
	DefaultMaxDiffFiles     = 3000
	DefaultMaxDiffBytes     = 4 << 20
	DefaultMaxDiffFileBytes = 1 << 20
	DefaultDiffTimeout      = 3 * time.Second
	// DefaultRenameLimit is git's diff.renameLimit default.
	DefaultRenameLimit = 1000
	DefaultMaxLogScan  = 10_000
	// DefaultMaxArchiveBytes is above any honest source tree.
	DefaultMaxArchiveBytes = 2 << 30
	// Blame's defaults follow a typical file back through years of
	// history; the time bound is what a person waits for a page.
	DefaultMaxBlameCommits   = 20_000
	DefaultBlameTimeout      = 5 * time.Second
	DefaultMaxBlameFileBytes = 1 << 20
	// The search defaults let an anonymous page cost about a core for a
	// second: Go's regexp scans some tens of MiB a second (a literal is
	// many times faster), so the bytes budget is the usual stop on a
	// large tree.
	DefaultMaxSearchBytes     = 64 << 20
	DefaultMaxSearchFiles     = 20_000
	DefaultMaxSearchBlobs     = 10_000
	DefaultSearchTimeout      = 2 * time.Second
	DefaultMaxSearchFileBytes = 1 << 20
	// DefaultMaxLastCommitScan matches DefaultMaxLogScan: a directory's
	// last commits cost about a path-filtered log page.
	DefaultMaxLastCommitScan = 10_000
	DefaultLastCommitTimeout = 2 * time.Second
)

// Settings that raise the limits, named in what clients see; transport/node/config
// reads them.
const (
	SettingMaxEntries         = "RGIT_API_MAX_ENTRIES"
	SettingMaxDiffFiles       = "RGIT_API_MAX_DIFF_FILES"
	SettingMaxDiffBytes       = "RGIT_API_MAX_DIFF_BYTES"
	SettingMaxDiffFileBytes   = "RGIT_API_MAX_DIFF_FILE_BYTES"
	SettingDiffTimeout        = "RGIT_API_DIFF_TIMEOUT_MS"
	SettingRenameLimit        = "RGIT_API_RENAME_LIMIT"
	SettingMaxLogScan         = "RGIT_API_MAX_LOG_SCAN"
	SettingMaxArchiveBytes    = "RGIT_API_MAX_ARCHIVE_BYTES"
	SettingMaxActive          = "RGIT_API_MAX_ACTIVE"
	SettingMaxBlameCommits    = "RGIT_API_MAX_BLAME_COMMITS"
	SettingBlameTimeout       = "RGIT_API_BLAME_TIMEOUT_MS"
	SettingMaxBlameFileBytes  = "RGIT_API_MAX_BLAME_FILE_BYTES"
	SettingMaxSearchBytes     = "RGIT_API_SEARCH_MAX_BYTES"
	SettingMaxSearchFiles     = "RGIT_API_SEARCH_MAX_FILES"
	SettingMaxSearchBlobs     = "RGIT_API_SEARCH_MAX_BLOBS"
	SettingSearchTimeout      = "RGIT_API_SEARCH_TIMEOUT_MS"
	SettingMaxSearchFileBytes = "RGIT_API_SEARCH_MAX_FILE_BYTES"

	SettingMaxLastCommitScan = "RGIT_API_LAST_COMMIT_SCAN"
	SettingLastCommitTimeout = "RGIT_API_LAST_COMMIT_TIMEOUT_MS"
)

func (l Limits) withDefaults() Limits {
	l.MaxEntries = orDefault(l.MaxEntries, DefaultMaxEntries)
	l.MaxDiffFiles = orDefault(l.MaxDiffFiles, DefaultMaxDiffFiles)
	l.MaxDiffBytes = orDefault(l.MaxDiffBytes, DefaultMaxDiffBytes)
	l.RenameLimit = orDefault(l.RenameLimit, DefaultRenameLimit)
	l.MaxLogScan = orDefault(l.MaxLogScan, DefaultMaxLogScan)
	l.MaxDiffFileBytes = orDefault(l.MaxDiffFileBytes, DefaultMaxDiffFileBytes)
	l.DiffTimeout = orDefault(l.DiffTimeout, DefaultDiffTimeout)
	l.MaxArchiveBytes = orDefault(l.MaxArchiveBytes, DefaultMaxArchiveBytes)
	l.MaxBlameCommits = orDefault(l.MaxBlameCommits, DefaultMaxBlameCommits)
	l.BlameTimeout = orDefault(l.BlameTimeout, DefaultBlameTimeout)
	l.MaxBlameFileBytes = orDefault(l.MaxBlameFileBytes, DefaultMaxBlameFileBytes)
	l.MaxSearchBytes = orDefault(l.MaxSearchBytes, DefaultMaxSearchBytes)
	l.MaxSearchFiles = orDefault(l.MaxSearchFiles, DefaultMaxSearchFiles)
	l.MaxSearchBlobs = orDefault(l.MaxSearchBlobs, DefaultMaxSearchBlobs)
	l.SearchTimeout = orDefault(l.SearchTimeout, DefaultSearchTimeout)
	l.MaxSearchFileBytes = orDefault(l.MaxSearchFileBytes, DefaultMaxSearchFileBytes)
	l.MaxLastCommitScan = orDefault(l.MaxLastCommitScan, DefaultMaxLastCommitScan)
	l.LastCommitTimeout = orDefault(l.LastCommitTimeout, DefaultLastCommitTimeout)
	return l
}

// orDefault is v, or d when v is not positive (unset).
func orDefault[T ~int | ~int64](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}

// limitErr is the refusal or truncation reason for a limit: its text is
// what the client sees, e.g. "archive has too many entries (limit 500000,
// set RGIT_API_MAX_ENTRIES)".
func limitErr(what string, limit int64, unit, setting string) *gitproto.LimitError {
	return &gitproto.LimitError{What: what, Limit: limit, Unit: unit, Setting: setting}
}

// asLimit returns the limit err is over, if it is one.
func asLimit(err error) (*gitproto.LimitError, bool) {
	var le *gitproto.LimitError
	ok := errors.As(err, &le)
	return le, ok
}

// work is one answer's budget: the tree entries it has visited, its
// limits, and its request's context, which every walk checks as it
// visits.
type work struct {
	ctx     context.Context
	lim     Limits
	visited int64
	extra   int64 // granted by extend
}

func newWork(ctx context.Context, lim Limits) *work {
	return &work{ctx: ctx, lim: lim.withDefaults()}
}

// visit counts n entries about to be looked at. Past MaxEntries it fails
// with the limit; a request whose client is gone fails with its
// context's error.
func (w *work) visit(n int) error {
	w.visited += int64(n)
	if w.visited > int64(w.lim.MaxEntries)+w.extra {
		return limitErr("answer visits too many tree entries", int64(w.lim.MaxEntries), "", SettingMaxEntries)
	}
	return w.ctx.Err()
}

// extend lets the answer visit n more entries: an archive sized within
// the limits writes every entry it holds, after sizing visited its
// distinct ones.
func (w *work) extend(n int64) { w.extra += n }

// treeSize is what an archive of a tree holds: entries (files, links and
// directories, the tree itself not counted) and file bytes.
type treeSize struct {
	entries, bytes int64
}

// add is s plus o, with ok false once a total passes its limit: the
// total is then just past it (sizing stops there, so the sums never
// overflow).
func (s treeSize) add(o treeSize, lim Limits) (sum treeSize, ok bool) {
	maxE, maxB := int64(lim.MaxEntries), lim.MaxArchiveBytes
	switch {
	case o.entries > maxE-s.entries:
		return treeSize{maxE + 1, s.bytes}, false
	case o.bytes > maxB-s.bytes:
		return treeSize{s.entries, maxB + 1}, false
	}
	return treeSize{s.entries + o.entries, s.bytes + o.bytes}, true
}

// archiveVerdict is the decision on an archive: nil, or the limit its
// size is over. An over-limit size is reported as past the limit, not
// exactly (sizing stops at the limit).
//
//	entries > MaxEntries          refuse: RGIT_API_MAX_ENTRIES
//	bytes > MaxArchiveBytes       refuse: RGIT_API_MAX_ARCHIVE_BYTES
//	otherwise                     stream it
func archiveVerdict(s treeSize, lim Limits) error {
	switch {
	case s.entries > int64(lim.MaxEntries):
		return limitErr("archive has too many entries", int64(lim.MaxEntries), "", SettingMaxEntries)
	case s.bytes > lim.MaxArchiveBytes:
		return limitErr("archive too large", lim.MaxArchiveBytes, "bytes", SettingMaxArchiveBytes)
	}
	return nil
}

// Estimates of what an expensive answer holds in memory, reserved in the
// node's budget before it starts: a diff holds its changes, its text
// (twice: the text and its JSON), and two files with the line diff's
// own copies of them; an archive holds compression buffers and a file
// being delta-rebuilt; a log the trees of a path walk.
func (l Limits) diffEstimate() int64 {
	return 4<<20 + 3*int64(l.MaxDiffBytes) + 6*l.MaxDiffFileBytes
}

// blameEstimate: a blame holds two versions of the file, their lines
// and the line diff's tables (about ten words a line).
func (l Limits) blameEstimate() int64 { return 4<<20 + 8*l.MaxBlameFileBytes }

// searchEstimate: a search holds one file at a time (and a copy of a
// line it shows) and its page of hits.
func (l Limits) searchEstimate() int64 { return 1<<20 + 2*l.MaxSearchFileBytes }

const (
	archiveEstimate = 8 << 20
	logEstimate     = 2 << 20
)

// Metrics are the read API's work counters, and its front's requests
// and cache lookups (metrics.go).
type Metrics struct {
	visited *prometheus.CounterVec
	limited *prometheus.CounterVec
	front   *frontMetrics
}

// NewMetrics registers the read API's metrics on reg (nil: none). One
// Metrics serves every Local and Handler of a process.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		front: newFrontMetrics(reg),
		visited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rgit_api_tree_entries_visited_total",
			Help: "Tree entries the read API visited to answer, by endpoint (bounded per answer by RGIT_API_MAX_ENTRIES)."}, []string{"endpoint"}),
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rgit_api_limited_total",
			Help: "Read-API answers refused (422) or cut short by a limit, by endpoint and the setting that raises it."}, []string{"endpoint", "setting"}),
	}
	if reg != nil {
		reg.MustRegister(m.visited, m.limited)
	}
	return m
}

func (m *Metrics) done(ep Endpoint, w *work) {
	if m != nil && w != nil {
		m.visited.WithLabelValues(string(ep)).Add(float64(w.visited))
	}
}

func (m *Metrics) limit(ep Endpoint, setting string) {
	if m != nil {
		m.limited.WithLabelValues(string(ep), setting).Inc()
	}
}
