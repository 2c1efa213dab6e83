package pack

import (
	"container/list"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// FileBudget bounds the pack files open at once across every Pack that
// shares it, so a node serving repositories with many packs stays within
// its descriptor limit. A pack's file is opened on the first read that
// needs it and closed again, least recently used first, once more than
// the budget are open and it has no read in flight; an open Pack (its
// index mapping, its caches) stays usable throughout. Reads in flight are
// never interrupted: when every open file is busy the budget is exceeded
// until one finishes. Safe for concurrent use.
type FileBudget struct {
	max int

	mu   sync.Mutex
	open int       // files currently open
	idle list.List // open files without reads in flight; front = most recent
}

// NewFileBudget returns a budget of n open pack files (at least 1).
func NewFileBudget(n int) *FileBudget {
	return &FileBudget{max: max(n, 1)}
}

// Open reports the pack files open now.
func (b *FileBudget) Open() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.open
}

// packFile is a pack's data file: an *os.File kept open for the Pack's
// life when there is no budget, or opened on demand within one.
type packFile struct {
	path   string
	budget *FileBudget // nil: f stays open until close

	// Guarded by budget.mu when budget is set.
	f      *os.File
	inUse  int           // reads in flight
	elem   *list.Element // position in budget.idle while open and unused
	pinned bool          // exempt from the budget (the file may be deleted)
	closed bool

	arrival  *Arrival // nil: the file is whole
	arriving bool     // pinned only until settle
}

var errPackClosed = errors.New("pack closed")

// newPackFile wraps f, already open, for path. A file still arriving is
// kept open outside the budget until Settle: its path is temporary.
func newPackFile(path string, f *os.File, b *FileBudget, a *Arrival) *packFile {
	pf := &packFile{path: path, budget: b, f: f, arrival: a}
	if b != nil && a != nil {
		pf.pinned, pf.arriving = true, true
	} else if b != nil {
		b.mu.Lock()
		b.open++
		pf.elem = b.idle.PushFront(pf)
		toClose := b.trimLocked()
		b.mu.Unlock()
		closeAll(toClose)
	}
	return pf
}

// ReadAt reads from the pack file, opening it first if the budget closed
// it, and waiting for the bytes if the file is still arriving.
func (pf *packFile) ReadAt(p []byte, off int64) (int, error) {
	if a := pf.arrival; a != nil {
		if err := a.waitFor(min(off+int64(len(p)), a.size)); err != nil {
			return 0, err
		}
	}
	if pf.budget == nil {
		return pf.f.ReadAt(p, off)
	}
	f, err := pf.acquire()
	if err != nil {
		return 0, err
	}
	defer pf.release()
	return f.ReadAt(p, off)
}

func (pf *packFile) acquire() (*os.File, error) {
	b := pf.budget
	b.mu.Lock()
	if pf.closed {
		b.mu.Unlock()
		return nil, fmt.Errorf("%s: %w", pf.path, errPackClosed)
	}
	if pf.f == nil {
		// Opening under the lock keeps the count exact; an open of a
		// cached local file is quick.
		f, err := os.Open(pf.path)
		if err != nil {
			b.mu.Unlock()
			return nil, fmt.Errorf("reopen pack: %w", err)
		}
		pf.f = f
		b.open++
	} else if pf.elem != nil {
		b.idle.Remove(pf.elem)
		pf.elem = nil
	}
	pf.inUse++
	f := pf.f
	toClose := b.trimLocked()
	b.mu.Unlock()
	closeAll(toClose)
	return f, nil
}

func (pf *packFile) release() {
	b := pf.budget
	b.mu.Lock()
	pf.inUse--
	if pf.inUse == 0 && !pf.pinned && pf.f != nil {
		pf.elem = b.idle.PushFront(pf)
	}
	toClose := b.trimLocked()
	b.mu.Unlock()
	closeAll(toClose)
}

// trimLocked takes the least recently used idle files beyond the budget
// out of it and returns them for closing after unlocking.
func (b *FileBudget) trimLocked() []*os.File {
	var out []*os.File
	for b.open > b.max {
		el := b.idle.Back()
		if el == nil {
			break
		}
		pf := el.Value.(*packFile)
		b.idle.Remove(el)
		pf.elem = nil
		out = append(out, pf.f)
		pf.f = nil
		b.open--
	}
	return out
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		_ = f.Close() // read-only: nothing to lose
	}
}

// pin opens the file if needed and keeps it open, outside the budget,
// until close: its path is about to be deleted.
func (pf *packFile) pin() error {
	if pf.budget == nil {
		return nil
	}
	b := pf.budget
	b.mu.Lock()
	defer b.mu.Unlock()
	if pf.closed || pf.pinned {
		pf.arriving = false // pinned for good now
		return nil
	}
	if pf.f == nil {
		f, err := os.Open(pf.path)
		if err != nil {
			return fmt.Errorf("pin pack: %w", err)
		}
		pf.f = f
	} else {
		b.open--
		if pf.elem != nil {
			b.idle.Remove(pf.elem)
			pf.elem = nil
		}
	}
	pf.pinned = true
	return nil
}

// settle moves a file that has arrived whole to its final path and, with
// a budget, back into it.
func (pf *packFile) settle(path string) {
	b := pf.budget
	if b == nil {
		pf.path = path
		return
	}
	b.mu.Lock()
	pf.path = path
	var toClose []*os.File
	if pf.arriving && !pf.closed {
		pf.pinned, pf.arriving = false, false
		b.open++
		if pf.inUse == 0 {
			pf.elem = b.idle.PushFront(pf)
		}
		toClose = b.trimLocked()
	}
	b.mu.Unlock()
	closeAll(toClose)
}

// closeIdle closes the file now if it is open within a budget and no
// read is in flight; the next read reopens it.
func (pf *packFile) closeIdle() {
	b := pf.budget
	if b == nil {
		return
	}
	b.mu.Lock()
	f := pf.f
	if f == nil || pf.inUse > 0 || pf.pinned {
		b.mu.Unlock()
		return
	}
	pf.f = nil
	b.open--
	if pf.elem != nil {
		b.idle.Remove(pf.elem)
		pf.elem = nil
	}
	b.mu.Unlock()
	_ = f.Close()
}

func (pf *packFile) close() error {
	if pf.budget == nil {
		return pf.f.Close()
	}
	b := pf.budget
	b.mu.Lock()
	if pf.closed {
		b.mu.Unlock()
		return nil
	}
	pf.closed = true
	f := pf.f
	pf.f = nil
	if f != nil && !pf.pinned {
		b.open--
	}
	if pf.elem != nil {
		b.idle.Remove(pf.elem)
		pf.elem = nil
	}
	b.mu.Unlock()
	if f == nil {
		return nil
	}
	return f.Close()
}

var _ io.ReaderAt = (*packFile)(nil)
