//go:build !linux

package packcache

import (
	"fmt"
	"os"
)

// memFile: only Linux has anonymous memory files; elsewhere a full cache
// disk fails the pack with ErrDiskFull.
func memFile(name string) (*os.File, error) {
	return nil, fmt.Errorf("memory file for %s: not supported on this platform", name)
}

// preallocate: not done here; a full disk fails the download's writes.
func preallocate(*os.File, int64) error { return nil }
