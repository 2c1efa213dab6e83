//go:build !unix

package pack

import (
	"io"
	"os"
)

// mapFile reads f into memory where mmap is not available.
func mapFile(f *os.File) ([]byte, func() error, error) {
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}
