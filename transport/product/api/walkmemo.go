package api

import (
	"fmt"
	"strings"
	"sync"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
)

// What history walks learn about a commit (its parents, its time and the
// entry at the path they follow) is a fact of the commit's id: it never
// changes. A tree page or a file's blame is asked again and again over
// the same history, so the walks keep these facts across requests, per
// object store (a repository's pack set: one repository's facts never
// answer another's, whose objects may differ) and path, within a byte
// budget.
// The walk itself still runs on every request, with every budget; only
// the reads and parses of what it already saw are saved.

// commitFacts is what a walk keeps of one commit. at is the entry at the
// walk's path (zero: none), whatever it is: a tree to lastcommit, a
// blob to blame.
type commitFacts struct {
	parents []object.ID
	time    int64
	at      pathEntry
}

// pathEntry is a tree entry as walks compare it: an entry is the same
// when its id and mode are.
type pathEntry struct {
	id   object.ID
	mode uint32
}

// factBytes is about what one commit's facts hold in memory: the map
// slot, the key, the facts and a parent.
const factBytes = 168

// memoKey names one walk's facts: the object store (pack.Set.ID) and
// the path its dir is at.
type memoKey struct {
	set  uint64
	path string
}

// WalkMemo keeps facts by store and path in two generations, an
// approximation of LRU as walk.Graph's: the facts given go to the
// current one; when it would pass half the budget it becomes the
// previous one, and the old previous one is dropped. A walk takes its
// facts out (take) and gives them back grown (give), so it reads and
// adds to them without a lock; two walks of the same key at once each
// start from what was there, and the larger result is kept.
type WalkMemo struct {
	half int64 // the budget of a generation

	mu        sync.Mutex
	cur, prev map[memoKey]memoEntry
	curBytes  int64
}

type memoEntry struct {
	facts map[object.ID]commitFacts
	size  int64
}

// WalkMemoBytes is a node's budget for walk facts: a walk examines at
// most MaxLastCommitScan (10,000) commits, about 1.7 MB of facts, a blame
// DefaultMaxBlameCommits (20,000), 3.4 MB, so this holds a few of the
// largest and many of the usual.
const WalkMemoBytes = 16 << 20

// NewWalkMemo returns a WalkMemo that keeps at most about limit bytes.
func NewWalkMemo(limit int64) *WalkMemo {
	return &WalkMemo{half: limit / 2, cur: map[memoKey]memoEntry{}, prev: map[memoKey]memoEntry{}}
}

// take removes and returns the facts kept for k (empty when none).
func (m *WalkMemo) take(k memoKey) map[object.ID]commitFacts {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.cur[k]; ok {
		delete(m.cur, k)
		m.curBytes -= e.size
		return e.facts
	}
	if e, ok := m.prev[k]; ok {
		delete(m.prev, k)
		return e.facts
	}
	return map[object.ID]commitFacts{}
}

// give keeps facts for k, unless a walk of k gave more meanwhile; facts
// over a generation's budget are not kept.
func (m *WalkMemo) give(k memoKey, facts map[object.ID]commitFacts) {
	size := int64(len(facts)) * factBytes
	if size == 0 || size > m.half {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.cur[k]; ok {
		if e.size >= size {
			return
		}
		delete(m.cur, k)
		m.curBytes -= e.size
	}
	delete(m.prev, k)
	if m.curBytes+size > m.half {
		m.prev, m.cur, m.curBytes = m.cur, map[memoKey]memoEntry{}, 0
	}
	m.cur[k] = memoEntry{facts: facts, size: size}
	m.curBytes += size
}

// noPath is the key path of walks that follow no path (ahead-behind): no
// path holds a NUL.
const noPath = "\x00"

// facts returns the facts walks of path over rd's objects learnt, and
// done, which keeps what this walk adds for the next. Without a memo, or
// over objects other than a pack set (tests' stores), a walk starts
// empty and keeps nothing.
func (rd reader) facts(path string) (facts map[object.ID]commitFacts, done func()) {
	set, ok := rd.objs.(*pack.Set)
	if !ok || rd.memo == nil {
		return map[object.ID]commitFacts{}, func() {}
	}
	k := memoKey{set.ID(), path}
	facts = rd.memo.take(k)
	return facts, func() { rd.memo.give(k, facts) }
}

// pathWalk reads what a walk along one path needs of each commit: its
// facts, read once unless a walk of the path learnt them before (rd.facts).
type pathWalk struct {
	rd    reader
	sub   []string
	facts map[object.ID]commitFacts
	// known[k] maps a tree at depth k of the path (0: the root) to the
	// entry at sub below it. Most commits change a few files: the
	// subtree one level down is often one seen already, so a commit
	// costs one tree read, not one per level.
	known []map[object.ID]pathEntry
	// done keeps what this walk learnt for the next.
	done func()
}

func (rd reader) pathWalk(sub []string) *pathWalk {
	facts, done := rd.facts(strings.Join(sub, "/"))
	return &pathWalk{rd: rd, sub: sub, facts: facts, known: make([]map[object.ID]pathEntry, len(sub)), done: done}
}

// commit is the facts of commit id.
func (w *pathWalk) commit(id object.ID) (commitFacts, error) {
	if f, ok := w.facts[id]; ok {
		return f, nil
	}
	t, data, err := w.rd.readShared(id)
	if err != nil {
		return commitFacts{}, err
	}
	if t != object.Commit {
		return commitFacts{}, fmt.Errorf("%s is a %s, not a commit", id, t)
	}
	info, err := object.ParseCommit(data)
	if err != nil {
		return commitFacts{}, fmt.Errorf("commit %s: %w", id, err)
	}
	at, err := w.entryAt(info.Tree)
	if err != nil {
		return commitFacts{}, err
	}
	f := commitFacts{parents: info.Parents, time: info.CommitterTime, at: at}
	w.facts[id] = f
	return f, nil
}

// entryAt is the entry at sub in tree root (the root itself for no sub;
// zero when there is none). It descends until it meets a tree whose
// answer is known, and remembers the answer for every tree it passed.
func (w *pathWalk) entryAt(root object.ID) (pathEntry, error) {
	if len(w.sub) == 0 {
		return pathEntry{root, object.ModeTree}, nil
	}
	var passed [8]object.ID
	trees := passed[:0]
	at := pathEntry{root, object.ModeTree}
	for k, name := range w.sub {
		if e, ok := w.known[k][at.id]; ok {
			at = e
			break
		}
		trees = append(trees, at.id)
		var err error
		if at.id, at.mode, err = w.rd.child(at.id, at.mode, name); err != nil {
			return pathEntry{}, err
		}
		if at.id.IsZero() {
			at = pathEntry{}
			break
		}
	}
	for k, t := range trees {
		if w.known[k] == nil {
			w.known[k] = map[object.ID]pathEntry{}
		}
		w.known[k][t] = at
	}
	return at, nil
}
