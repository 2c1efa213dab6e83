package api

import (
	"container/heap"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rgit/rgit/storage/object"
)

// lastCommitAnswer is lastcommit's JSON: for each entry of a directory
// (in git's tree order), the newest commit that changed it, as `git log
// -1 -- {path}/{name}` finds it. Entries the budget left unresolved have
// no commit, and Truncated says why.
type lastCommitAnswer struct {
	// Commit is the commit asked about (a tag peeled); Path the
	// directory ("" for the root).
	Commit  string           `json:"commit"`
	Path    string           `json:"path"`
	Entries []lastCommitName `json:"entries"`
	// Commits describes every commit an entry names, by id.
	Commits map[string]lastCommitInfo `json:"commits"`
	// Examined is the number of commits the walk looked at.
	Examined int `json:"examined"`
	cutShort
}

// lastCommitName is one entry of lastcommit; Commit is "" when the
// budget ran out before the entry's commit was found.
type lastCommitName struct {
	Name   string `json:"name"`
	Commit string `json:"commit,omitempty"`
}

// lastCommitInfo is what a listing shows of a commit: who, when, and the
// subject (the message's first line, at most maxSubject bytes).
type lastCommitInfo struct {
	Author    person `json:"author"`
	Committer person `json:"committer"`
	Subject   string `json:"subject"`
}

// maxSubject bounds a subject in the answer: a listing shows one line.
const maxSubject = 1000

func subjectOf(msg string) string {
	s, _, _ := strings.Cut(msg, "\n")
	if len(s) > maxSubject {
		s = strings.ToValidUTF8(s[:maxSubject], "")
	}
	return s
}

// lcCommit is one commit of the walk: its parents, committer time, the
// id of the directory at the asked path in its tree (zero: none), and
// the entries (indices into the listing) still looking for their commit
// through it.
type lcCommit struct {
	id      object.ID
	parents []object.ID
	time    int64
	dir     object.ID
	pending []int32 // sorted
	queued  bool
	seq     int // push order: equal times pop first-in first-out, as git's queue
}

// lcQueue pops the newest commit first (git log's date order).
type lcQueue []*lcCommit

func (q lcQueue) Len() int { return len(q) }
func (q lcQueue) Less(i, j int) bool {
	if q[i].time != q[j].time {
		return q[i].time > q[j].time
	}
	return q[i].seq < q[j].seq
}
func (q lcQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *lcQueue) Push(x any)   { *q = append(*q, x.(*lcCommit)) }
func (q *lcQueue) Pop() any {
	old := *q
	c := old[len(old)-1]
	*q = old[:len(old)-1]
	return c
}

// lastCommitWalk is one lastcommit answer's history walk.
type lastCommitWalk struct {
	rd      reader
	path    *pathWalk // the commits' facts at the directory
	seen    map[object.ID]*lcCommit
	decoded map[object.ID]map[string]pathEntry // see dirEntries
	queue   lcQueue
	seq     int
	names   []string
	found   []object.ID // by entry; zero: not yet
	left    int         // entries not found yet
}

// lastCommits answers lastcommit for the directory sub of id: one walk
// of history in date order for the whole directory, as forges do it,
// not one walk per entry. Each commit carries the entries still looking
// for their commit through it, and decides them with git's history
// simplification for a path (an entry is the same when its id and mode
// are):
//
//	no parent                          found: the entry was created here
//	some parent has the entry the same follow the first such parent only
//	every parent differs (or lacks it) found: the entry changed here
//
// A first parent whose directory is the same tree takes every entry on
// without a look at the entries. The walk stops when every entry is
// found, or cuts the answer short (Truncated) after MaxLastCommitScan
// commits, past the time budget (timeout, at most LastCommitTimeout),
// or past the tree entries budget. The listing itself is refused as
// tree's is.
func (rd reader) lastCommits(id object.ID, sub []string, timeout time.Duration) (lastCommitAnswer, error) {
	cid, _, err := rd.peelTo(id, object.Commit)
	if err != nil {
		return lastCommitAnswer{}, err
	}
	_, data, n, err := rd.treeData(cid, sub)
	if err != nil {
		return lastCommitAnswer{}, err
	}
	lim := rd.w.lim
	if timeout <= 0 || timeout > lim.LastCommitTimeout {
		timeout = lim.LastCommitTimeout
	}
	deadline := time.Now().Add(timeout)
	path := rd.pathWalk(sub)
	defer path.done()
	w := &lastCommitWalk{rd: rd, path: path, seen: map[object.ID]*lcCommit{}, decoded: map[object.ID]map[string]pathEntry{},
		names: make([]string, 0, n), found: make([]object.ID, n), left: n}
	all := make([]int32, 0, n)
	it := object.NewTreeIter(data)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		all = append(all, int32(len(w.names)))
		w.names = append(w.names, string(e.Name))
	}
	if err := it.Err(); err != nil {
		return lastCommitAnswer{}, fmt.Errorf("tree at %s: %w", cid, err)
	}
	out := lastCommitAnswer{Commit: cid.String(), Path: strings.Join(sub, "/"), Entries: make([]lastCommitName, n),
		Commits: map[string]lastCommitInfo{}}
	if n > 0 {
		start, err := w.commit(cid)
		if err != nil {
			return out, err
		}
		w.pass(start, all)
		err = w.run(deadline, &out)
		if le, ok := asLimit(err); ok {
			out.Truncated, out.TruncatedReason, out.limit = true, le.Error(), le
		} else if err != nil {
			return out, err
		}
	}
	for i, name := range w.names {
		out.Entries[i].Name = name
		if c := w.found[i]; !c.IsZero() {
			out.Entries[i].Commit = c.String()
			if _, ok := out.Commits[c.String()]; !ok {
				a, _, err := rd.commit(c)
				if err != nil {
					return out, err
				}
				out.Commits[c.String()] = lastCommitInfo{Author: a.Author, Committer: a.Committer, Subject: subjectOf(a.Message)}
			}
		}
	}
	return out, nil
}

// run pops commits until every entry is found, history ends, or a budget
// runs out (a *gitproto.LimitError; timedOut set for the time budget).
func (w *lastCommitWalk) run(deadline time.Time, out *lastCommitAnswer) error {
	lim := w.rd.w.lim
	for w.left > 0 && w.queue.Len() > 0 {
		c := heap.Pop(&w.queue).(*lcCommit)
		c.queued = false
		pending := w.unfound(c.pending)
		c.pending = nil
		if len(pending) == 0 {
			continue
		}
		if err := w.rd.w.ctx.Err(); err != nil {
			return err
		}
		if out.Examined == lim.MaxLastCommitScan {
			return limitErr("last commits examined too many commits", int64(lim.MaxLastCommitScan), "", SettingMaxLastCommitScan)
		}
		if time.Now().After(deadline) {
			out.timedOut = true
			return limitErr("last commits took too long", lim.LastCommitTimeout.Milliseconds(), "ms", SettingLastCommitTimeout)
		}
		out.Examined++
		if err := w.step(c, pending); err != nil {
			return err
		}
	}
	return nil
}

// step decides the pending entries of c: found here, or passed on to the
// first parent that has them unchanged.
func (w *lastCommitWalk) step(c *lcCommit, pending []int32) error {
	parents := make([]*lcCommit, 0, len(c.parents))
	for _, pid := range c.parents {
		p, err := w.commit(pid)
		if errors.Is(err, ErrNotFound) {
			continue // a shallow boundary or missing parent ends history there
		}
		if err != nil {
			return err
		}
		parents = append(parents, p)
	}
	// The usual case: the first parent's directory is the same tree.
	if len(parents) > 0 && parents[0].dir == c.dir {
		w.pass(parents[0], pending)
		return nil
	}
	cur, err := w.dirEntries(c.dir)
	if err != nil {
		return err
	}
	dirs := make([]map[string]pathEntry, len(parents))
	for i, p := range parents {
		if dirs[i], err = w.dirEntries(p.dir); err != nil {
			return err
		}
	}
	passed := make([][]int32, len(parents))
next:
	for _, e := range pending {
		ce, inC := cur[w.names[e]]
		for i := range parents {
			if pe, inP := dirs[i][w.names[e]]; inP == inC && pe == ce {
				passed[i] = append(passed[i], e)
				continue next
			}
		}
		w.found[e] = c.id
		w.left--
	}
	for i, p := range parents {
		w.pass(p, passed[i])
	}
	return nil
}

// unfound is the entries of pending not found yet.
func (w *lastCommitWalk) unfound(pending []int32) []int32 {
	out := pending[:0:0]
	for _, e := range pending {
		if w.found[e].IsZero() {
			out = append(out, e)
		}
	}
	return out
}

// pass hands entries to c, queueing it if it is not queued.
func (w *lastCommitWalk) pass(c *lcCommit, entries []int32) {
	if len(entries) == 0 {
		return
	}
	c.pending = union(c.pending, entries)
	if !c.queued {
		c.queued, c.seq = true, w.seq
		w.seq++
		heap.Push(&w.queue, c)
	}
}

// union merges two sorted index lists.
func union(a, b []int32) []int32 {
	if len(a) == 0 {
		return b
	}
	out := make([]int32, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i] < b[j]:
			out = append(out, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i, j = i+1, j+1
		}
	}
	return out
}

// commit is commit id of the walk, its facts read once (pathWalk).
func (w *lastCommitWalk) commit(id object.ID) (*lcCommit, error) {
	if c, ok := w.seen[id]; ok {
		return c, nil
	}
	f, err := w.path.commit(id)
	if err != nil {
		return nil, err
	}
	c := &lcCommit{id: id, parents: f.parents, time: f.time}
	if f.at.mode&0o170000 == object.ModeTree {
		c.dir = f.at.id
	}
	w.seen[id] = c
	return c, nil
}

// maxDecodedDirs bounds the directories a walk keeps decoded: a commit's
// directory is usually its child's parent directory, compared one step
// before, so a few suffice, and memory stays a few listings.
const maxDecodedDirs = 16

// dirEntries is directory id's entries by name (none for zero), decoded
// once while it stays among the last maxDecodedDirs: each step compares
// only the entries still pending, not whole listings.
func (w *lastCommitWalk) dirEntries(id object.ID) (map[string]pathEntry, error) {
	if id.IsZero() {
		return nil, nil
	}
	if m, ok := w.decoded[id]; ok {
		return m, nil
	}
	t, data, err := w.rd.readShared(id)
	if err != nil {
		return nil, err
	}
	if t != object.Tree {
		return nil, notFound("%s is a %s, not a tree", id, t)
	}
	m := map[string]pathEntry{}
	it := object.NewTreeIter(data)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		if err := w.rd.w.visit(1); err != nil {
			return nil, err
		}
		m[string(e.Name)] = pathEntry{e.ID, e.Mode}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("tree %s: %w", id, err)
	}
	if len(w.decoded) >= maxDecodedDirs {
		clear(w.decoded)
	}
	w.decoded[id] = m
	return m, nil
}
