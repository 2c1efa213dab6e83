package fsck

import (
	"bytes"
	"fmt"
	"slices"
	"sync"

	"github.com/rgit/rgit/storage/object"
)

// Options configures a Checker.
type Options struct {
	// Skip holds check ids to ignore (see ParseSkipList). Security checks
	// are never skipped, even if listed; unknown ids are ignored here.
	Skip map[string]bool
	// Strict rejects cosmetic findings too (RGIT_FSCK_STRICT), as git's
	// receive.fsckObjects does; by default they are accepted and reported
	// through Accepted.
	Strict bool
	// RejectInfo, with Strict, also rejects info-level findings (git's
	// INFO severity, which receive.fsckObjects only prints), e.g.
	// missingTaggerEntry.
	RejectInfo bool
}

// Finding is a check that failed on an object without rejecting it.
type Finding struct {
	ID     object.ID
	Check  string
	Detail string
}

// maxAccepted bounds the findings a Checker keeps: a hostile pack may hold
// millions, and the caller only logs a sample.
const maxAccepted = 16

// Checker checks objects. It is safe for concurrent use; the only state it
// keeps is the set of blobs that trees name .gitmodules.
type Checker struct {
	skip       map[string]bool
	strict     bool
	rejectInfo bool

	mu sync.Mutex
	// gitmodules holds ids seen as .gitmodules in checked trees; the value
	// is true once the blob's content has been checked.
	gitmodules map[object.ID]bool
	accepted   []Finding // the first maxAccepted accepted findings
	nAccepted  int
}

// NewChecker returns a Checker for opts.
func NewChecker(opts Options) *Checker {
	c := &Checker{skip: map[string]bool{}, strict: opts.Strict, rejectInfo: opts.RejectInfo, gitmodules: map[object.ID]bool{}}
	for id, on := range opts.Skip {
		if ci, ok := Lookup(id); ok && on && ci.Class != Security {
			c.skip[ci.ID] = true
		}
	}
	return c
}

// rejects reports whether a finding of check fails the object.
func (c *Checker) rejects(check string) bool {
	ci, ok := Lookup(check)
	if !ok { // programming error: every reported id is registered
		return true
	}
	return Rejects(ci, c.skip[ci.ID], c.strict, c.rejectInfo)
}

// accept records a finding that did not reject its object.
func (c *Checker) accept(f Finding) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nAccepted++
	if len(c.accepted) < maxAccepted {
		c.accepted = append(c.accepted, f)
	}
}

// Accepted returns a sample of the findings that were accepted (at most
// 16) and how many there were in all, for the caller to log.
func (c *Checker) Accepted() (sample []Finding, total int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.accepted), c.nAccepted
}

// report collects the first rejecting finding for one object.
type report struct {
	c     *Checker
	id    object.ID
	err   *Error
	found []string // every finding, rejecting or not (for tests)
}

// add records a finding and reports whether it rejects the object, so that
// callers mirroring git's "return report(...)" can stop at the first one.
func (r *report) add(check, format string, args ...any) bool {
	r.found = append(r.found, check)
	if !r.c.rejects(check) {
		if !r.c.skip[check] {
			r.c.accept(Finding{ID: r.id, Check: check, Detail: fmt.Sprintf(format, args...)})
		}
		return false
	}
	if r.err == nil {
		r.err = &Error{ID: r.id, Check: check, Detail: fmt.Sprintf(format, args...)}
	}
	return true
}

func (r *report) result() error {
	if r.err == nil {
		return nil
	}
	return r.err
}

// Check checks one object of type t whose content is data and returns nil
// or the first rejecting finding as an *Error. A blob that a checked tree
// names .gitmodules also gets the .gitmodules checks.
func (c *Checker) Check(id object.ID, t object.Type, data []byte) error {
	r := &report{c: c, id: id}
	switch t {
	case object.Blob:
		if c.claimGitmodules(id) {
			checkGitmodules(r, data)
		}
		return r.result()
	case object.Tree:
		c.checkTree(r, data)
	case object.Commit:
		checkCommit(r, data)
	case object.Tag:
		checkTag(r, data)
	default:
		r.add(UnknownType, "unknown object type %v", t)
		return r.result()
	}
	if c.claimGitmodules(id) {
		r.add(GitmodulesBlob, "non-blob (%v) found at .gitmodules", t)
	}
	return r.result()
}

// GitmodulesBlobs returns, sorted, the ids that checked trees name
// .gitmodules and whose content has not been checked yet: they were not
// passed to Check as blobs after the tree naming them was checked. The
// caller must read each and pass it to CheckGitmodules if it is a blob,
// to Check if it is another type, or report MissingGitmodules if absent.
func (c *Checker) GitmodulesBlobs() []object.ID {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []object.ID
	for id, done := range c.gitmodules {
		if !done {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b object.ID) int { return bytes.Compare(a[:], b[:]) })
	return ids
}

// CheckGitmodules checks the content of a .gitmodules blob.
func (c *Checker) CheckGitmodules(id object.ID, data []byte) error {
	c.mu.Lock()
	c.gitmodules[id] = true
	c.mu.Unlock()
	r := &report{c: c, id: id}
	checkGitmodules(r, data)
	return r.result()
}

// MissingGitmodules returns the error for a .gitmodules blob (from
// GitmodulesBlobs) that is neither in the push nor in the repository.
func (c *Checker) MissingGitmodules(id object.ID) error {
	r := &report{c: c, id: id}
	r.add(GitmodulesMissing, "unable to read .gitmodules blob")
	return r.result()
}

// noteGitmodules records that a tree names id .gitmodules.
func (c *Checker) noteGitmodules(id object.ID) {
	c.mu.Lock()
	if _, ok := c.gitmodules[id]; !ok {
		c.gitmodules[id] = false
	}
	c.mu.Unlock()
}

// claimGitmodules reports whether id is a known .gitmodules blob and marks
// it checked.
func (c *Checker) claimGitmodules(id object.ID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.gitmodules[id]; !ok {
		return false
	}
	c.gitmodules[id] = true
	return true
}
