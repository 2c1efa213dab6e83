package walk

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// FilterKind selects a partial-clone object filter.
type FilterKind int

// Supported filters (git's --filter=<spec>).
const (
	FilterNone      FilterKind = iota
	FilterBlobNone             // blob:none
	FilterBlobLimit            // blob:limit=<n>
	FilterTreeDepth            // tree:<depth>
)

// Filter is a parsed partial-clone filter. Objects a client names directly
// in its wants are never filtered out.
type Filter struct {
	Kind FilterKind
	// BlobLimit: blobs of this size or larger are omitted.
	BlobLimit int64
	// TreeDepth: trees and blobs at this depth or deeper are omitted; the
	// root tree of a commit is at depth 0, its entries at depth 1.
	TreeDepth int
}

// ErrUnsupportedFilter is wrapped by ParseFilter for filter specs rgit does
// not implement or cannot parse.
var ErrUnsupportedFilter = errors.New("unsupported filter")

// ParseFilter parses "blob:none", "blob:limit=<n>[kmg]" and "tree:<depth>".
func ParseFilter(spec string) (Filter, error) {
	switch {
	case spec == "blob:none":
		return Filter{Kind: FilterBlobNone}, nil
	case strings.HasPrefix(spec, "blob:limit="):
		n, err := parseSize(spec[len("blob:limit="):])
		if err != nil {
			return Filter{}, fmt.Errorf("filter %q: %w: %v", spec, ErrUnsupportedFilter, err)
		}
		return Filter{Kind: FilterBlobLimit, BlobLimit: n}, nil
	case strings.HasPrefix(spec, "tree:"):
		d, err := strconv.ParseUint(spec[len("tree:"):], 10, 31)
		if err != nil {
			return Filter{}, fmt.Errorf("filter %q: %w: bad depth", spec, ErrUnsupportedFilter)
		}
		return Filter{Kind: FilterTreeDepth, TreeDepth: int(d)}, nil
	default:
		return Filter{}, fmt.Errorf("filter %q: %w (supported: blob:none, blob:limit=<n>, tree:<depth>)", spec, ErrUnsupportedFilter)
	}
}

// parseSize parses a non-negative integer with an optional k/m/g suffix
// (binary multiples, case-insensitive), as git_parse_ulong does.
func parseSize(s string) (int64, error) {
	mult := int64(1)
	if s != "" {
		switch s[len(s)-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'g', 'G':
			mult = 1 << 30
		}
		if mult != 1 {
			s = s[:len(s)-1]
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	if n > (1<<63-1)/mult {
		return 0, fmt.Errorf("size %q overflows", s)
	}
	return n * mult, nil
}

// String returns the filter in git's spec syntax ("" for FilterNone).
func (f Filter) String() string {
	switch f.Kind {
	case FilterBlobNone:
		return "blob:none"
	case FilterBlobLimit:
		return "blob:limit=" + strconv.FormatInt(f.BlobLimit, 10)
	case FilterTreeDepth:
		return "tree:" + strconv.Itoa(f.TreeDepth)
	}
	return ""
}
