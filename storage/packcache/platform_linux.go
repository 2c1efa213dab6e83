package packcache

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// memFile is an anonymous file in memory (memfd): a pack served while the
// cache disk is full is written here, not to any disk.
func memFile(name string) (*os.File, error) {
	fd, err := unix.MemfdCreate("rgit-pack", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memory file for %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), "memfd:"+name), nil
}

// preallocate allocates n bytes for f without changing its size; a
// filesystem that cannot is not an error.
func preallocate(f *os.File, n int64) error {
	err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, n)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return nil
	}
	return err
}
