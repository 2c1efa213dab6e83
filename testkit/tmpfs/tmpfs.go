// Package tmpfs gives a test a small filesystem of its own to fill (a
// tmpfs mounted for the test) and counts the descriptors the test process
// holds on files in it. Mounting needs root (CAP_SYS_ADMIN): without it
// the test stops through need.Missing, which fails it under CI.
package tmpfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rgit/rgit/testkit/need"
)

// Mount mounts a tmpfs of size bytes on a new directory and unmounts it
// when the test ends.
func Mount(t testing.TB, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		if errors.Is(err, syscall.EPERM) {
			need.Missing(t, "permission to mount a tmpfs", "run the test as root")
		}
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// Fill writes a file at path until its filesystem is full, and returns
// the bytes written: removing it frees them again.
func Fill(t testing.TB, path string) int64 {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	var n int64
	for {
		w, err := f.Write(buf)
		n += int64(w)
		if errors.Is(err, syscall.ENOSPC) {
			return n
		}
		if err != nil {
			t.Fatalf("fill %s: %v", path, err)
		}
	}
}

// OpenUnder lists the files under dir that this process holds
// descriptors on, deleted ones included ("... (deleted)").
func OpenUnder(t testing.TB, dir string) []string {
	t.Helper()
	des, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		need.Missing(t, "/proc/self/fd", "run the test on Linux")
	}
	var out []string
	for _, de := range des {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", de.Name()))
		if err == nil && strings.HasPrefix(target, dir+"/") {
			out = append(out, target)
		}
	}
	return out
}
