package api

import (
	"bytes"
	"container/heap"
	"errors"
	"fmt"
	"strings"

	"github.com/rgit/rgit/storage/object"
)

// What a branches or tags page needs beyond refs, by id: a tag's
// annotation, and how far two commits have diverged.

// tagAnswer is tag's JSON: an annotated tag object.
type tagAnswer struct {
	OID     string  `json:"oid"`
	Object  string  `json:"object"`
	Type    string  `json:"type"`
	Name    string  `json:"name"`
	Tagger  *person `json:"tagger,omitempty"`
	Message string  `json:"message"`
}

// tag reads id as an annotated tag.
func (rd reader) tag(id object.ID) (tagAnswer, error) {
	t, data, err := rd.read(id)
	if err != nil {
		return tagAnswer{}, err
	}
	if t != object.Tag {
		return tagAnswer{}, notFound("%s is a %s, not a tag", id, t)
	}
	info, err := object.ParseTag(data)
	if err != nil {
		return tagAnswer{}, fmt.Errorf("tag %s: %w", id, err)
	}
	a := tagAnswer{OID: id.String(), Object: info.Object.String(), Type: info.ObjectType.String(),
		Name: strings.ToValidUTF8(string(info.Name), "\uFFFD")}
	header, msg, _ := bytes.Cut(data, []byte("\n\n"))
	a.Message = strings.ToValidUTF8(string(msg), "\uFFFD")
	for line := range bytes.SplitSeq(header, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("tagger ")); ok {
			p := parsePerson(v)
			a.Tagger = &p
		}
	}
	return a, nil
}

// MaxAheadBehindWalk bounds the commits one ahead-behind answer reads.
// A branches page asks once per branch shown, so this times the page
// size is the page's worst case.
const MaxAheadBehindWalk = 2000

// aheadBehindAnswer is ahead-behind's JSON. Complete is false when the
// walk stopped at MaxAheadBehindWalk: the counts are then those found
// so far, a lower bound.
type aheadBehindAnswer struct {
	Base     string `json:"base"`
	Head     string `json:"head"`
	Ahead    int    `json:"ahead"`
	Behind   int    `json:"behind"`
	Complete bool   `json:"complete"`
}

// Which tips reach a commit.
const (
	fromBase uint8 = 1
	fromHead uint8 = 2
	fromBoth       = fromBase | fromHead
)

// aheadBehind counts the commits head reaches and base does not (ahead)
// and the reverse (behind), as git rev-list --count --left-right
// base...head. It walks from both tips newest first (committer time),
// marking each commit with the tips that reach it, and stops as soon as
// every commit still queued is reached by both: nothing below those can
// count. So two tips close together cost a few reads however long their
// history. Like git's merge-base walk without a commit-graph it trusts
// committer times: a commit reached again after it was counted is
// counted again with its new marks, but one that skew hides below the
// stop is missed. It reads at most budget commits.
func (rd reader) aheadBehind(base, head object.ID, budget int) (aheadBehindAnswer, error) {
	w := abWalk{rd: rd, commits: map[object.ID]*abCommit{}}
	out := aheadBehindAnswer{}
	for _, tip := range []struct {
		id   object.ID
		mark uint8
		oid  *string
	}{{base, fromBase, &out.Base}, {head, fromHead, &out.Head}} {
		cid, _, err := rd.peelTo(tip.id, object.Commit)
		if err != nil {
			return out, err
		}
		*tip.oid = cid.String()
		c, err := w.commit(cid)
		if err != nil {
			return out, err
		}
		w.mark(c, tip.mark)
	}
	for w.active > 0 {
		if w.reads >= budget {
			out.Ahead, out.Behind = w.ahead, w.behind
			return out, nil
		}
		if err := rd.w.ctx.Err(); err != nil {
			return out, err
		}
		if err := w.step(); err != nil {
			return out, err
		}
	}
	out.Ahead, out.Behind, out.Complete = w.ahead, w.behind, true
	return out, nil
}

// abWalk is aheadBehind's state: the commits read, the queue (newest
// first) and how many queued commits are pending.
type abWalk struct {
	rd            reader
	commits       map[object.ID]*abCommit
	q             abQueue
	active        int
	reads, seq    int
	ahead, behind int
}

// abCommit is one commit of the walk: its time and parents, the tips
// that reach it (marks), the marks it was counted with, and whether it
// is queued.
type abCommit struct {
	id             object.ID
	when           int64
	parents        []object.ID
	marks, counted uint8
	queued         bool
	seq            int // queueing order: equal times go first in, first out, as git's walk does
}

// commit reads id once; a missing commit (a shallow boundary) has no
// parents and ends its line.
func (w *abWalk) commit(id object.ID) (*abCommit, error) {
	if c, ok := w.commits[id]; ok {
		return c, nil
	}
	c := &abCommit{id: id}
	w.commits[id] = c
	w.reads++
	t, data, err := w.rd.objs.ReadObject(id)
	switch {
	case errors.Is(err, object.ErrNotFound):
		return c, nil
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", id, err)
	case t != object.Commit:
		return nil, notFound("%s is not a commit", id)
	}
	info, err := object.ParseCommit(data)
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", id, err)
	}
	c.when, c.parents = info.CommitterTime, info.Parents
	return c, nil
}

// pending says whether a queued commit still matters: it is not yet
// reached by both tips, or was counted with fewer marks than it has.
func (c *abCommit) pending() bool {
	return c.marks != fromBoth || c.counted != 0 && c.counted != c.marks
}

// mark adds m to c's marks, queueing c when they grow.
func (w *abWalk) mark(c *abCommit, m uint8) {
	if c.marks|m == c.marks {
		return
	}
	if c.queued && c.pending() {
		w.active--
	}
	c.marks |= m
	if !c.queued {
		c.queued = true
		w.seq++
		c.seq = w.seq
		heap.Push(&w.q, c)
	}
	if c.pending() {
		w.active++
	}
}

// step takes the newest queued commit, counts it by its marks (undoing
// an earlier count with fewer marks) and passes its marks to its
// parents.
func (w *abWalk) step() error {
	c := heap.Pop(&w.q).(*abCommit)
	c.queued = false
	if c.pending() {
		w.active--
	}
	w.count(c.counted, -1)
	w.count(c.marks, 1)
	c.counted = c.marks
	for _, id := range c.parents {
		p, err := w.commit(id)
		if err != nil {
			return err
		}
		w.mark(p, c.marks)
	}
	return nil
}

func (w *abWalk) count(m uint8, d int) {
	switch m {
	case fromHead:
		w.ahead += d
	case fromBase:
		w.behind += d
	}
}

// abQueue is a max-heap on committer time.
type abQueue []*abCommit

func (q abQueue) Len() int { return len(q) }
func (q abQueue) Less(i, j int) bool {
	if q[i].when != q[j].when {
		return q[i].when > q[j].when
	}
	return q[i].seq < q[j].seq
}
func (q abQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *abQueue) Push(x any)   { *q = append(*q, x.(*abCommit)) }
func (q *abQueue) Pop() any {
	old := *q
	c := old[len(old)-1]
	*q = old[:len(old)-1]
	return c
}
