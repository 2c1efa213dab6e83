package api

import (
	"bytes"
	"container/heap"
	"errors"
	"fmt"
	"strings"

	"github.com/rgit/rgit/storage/object"
)

// What a branches or tags page needs beyond refs, by id: its refs'
// commits, a tag's annotation, and how far two commits have diverged.

// MaxCommits is the most ids one commits answer reads: a branches page
// asks once for every branch it dates (at most 100).
const MaxCommits = 100

// commits reads each id (peeling tags) as a commit, in the order asked:
// nil for one that is missing or not a commit, as log would answer 404
// for it alone, so one ref gone since the refs were read does not fail
// the others.
func (rd reader) commits(ids []object.ID) ([]*commitAnswer, error) {
	out := make([]*commitAnswer, len(ids))
	for i, id := range ids {
		if err := rd.w.ctx.Err(); err != nil {
			return nil, err
		}
		c, _, err := rd.commit(id)
		switch {
		case errors.Is(err, ErrNotFound):
			continue
		case err != nil:
			return nil, err
		}
		out[i] = &c
	}
	return out, nil
}

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

// MaxAheadBehindWalk bounds the commits one ahead-behind answer reads,
// however many heads it counts: a branches page asks once for all the
// branches it shows, so this is the page's worst case.
const MaxAheadBehindWalk = 10_000

// MaxAheadBehindHeads is the most heads one ahead-behind answer counts:
// the walk marks each commit with one bit per tip (the base and the
// heads) in a uint64.
const MaxAheadBehindHeads = 63

// aheadBehindAnswer is ahead-behind's JSON: each head's counts against
// base, in the order asked. Head, Ahead, Behind and Complete repeat the
// first head's (the whole answer when one head is asked).
type aheadBehindAnswer struct {
	Base string `json:"base"`
	headCounts
	Heads []headCounts `json:"heads"`
}

// headCounts is one head's divergence from the base. Complete is false
// when the walk stopped at its budget before this head's counts were
// settled: they are then those found so far, a lower bound.
type headCounts struct {
	Head     string `json:"head"`
	Ahead    int    `json:"ahead"`
	Behind   int    `json:"behind"`
	Complete bool   `json:"complete"`
}

// baseMark is the base's bit in a commit's marks; head i has bit i+1.
const baseMark uint64 = 1

// aheadBehind counts, for each head, the commits it reaches and base
// does not (ahead) and the reverse (behind), as git rev-list --count
// --left-right base...head does for one. It is one walk for every head:
// newest first (committer time) from all the tips at once, marking each
// commit with the tips that reach it, so a commit is read once however
// many heads share it. A commit's marks decide whose counts it adds to:
//
//	base among them    behind of each head not among them
//	base not among     ahead of each head among them
//
// The walk stops as soon as every commit still queued is reached by
// every tip: nothing below those can count. So tips close together cost
// a few reads however long their history. Like git's merge-base walk
// without a commit-graph it trusts committer times: a commit reached
// again after it was counted is counted again with its new marks, but
// one that skew hides below the stop is missed. It reads at most budget
// commits; a head whose counts the queue could still change then is not
// Complete.
func (rd reader) aheadBehind(base object.ID, heads []object.ID, budget int) (aheadBehindAnswer, error) {
	if len(heads) == 0 || len(heads) > MaxAheadBehindHeads {
		return aheadBehindAnswer{}, fmt.Errorf("ahead-behind of %d heads (1 to %d)", len(heads), MaxAheadBehindHeads)
	}
	facts, done := rd.facts(noPath)
	defer done()
	w := abWalk{rd: rd, commits: map[object.ID]*abCommit{}, facts: facts, all: 1<<(len(heads)+1) - 1,
		ahead: make([]int, len(heads)), behind: make([]int, len(heads))}
	out := aheadBehindAnswer{Heads: make([]headCounts, len(heads))}
	for i, tip := range append([]object.ID{base}, heads...) {
		cid, _, err := rd.peelTo(tip, object.Commit)
		if err != nil {
			return out, err
		}
		if i == 0 {
			out.Base = cid.String()
		} else {
			out.Heads[i-1].Head = cid.String()
		}
		c, err := w.commit(cid)
		if err != nil {
			return out, err
		}
		w.mark(c, 1<<i)
	}
	for w.active > 0 && w.reads < budget {
		if err := rd.w.ctx.Err(); err != nil {
			return out, err
		}
		if err := w.step(); err != nil {
			return out, err
		}
	}
	open := w.unsettled()
	for i := range out.Heads {
		h := &out.Heads[i]
		h.Ahead, h.Behind, h.Complete = w.ahead[i], w.behind[i], open&(2<<i) == 0
	}
	out.headCounts = out.Heads[0]
	return out, nil
}

// abWalk is aheadBehind's state: the commits read, the queue (newest
// first), how many queued commits are pending, and the counts by head.
type abWalk struct {
	rd            reader
	commits       map[object.ID]*abCommit
	facts         map[object.ID]commitFacts // walkmemo.go
	q             abQueue
	all           uint64 // every tip's mark
	active        int
	reads, seq    int
	ahead, behind []int
}

// abCommit is one commit of the walk: its time and parents, the tips
// that reach it (marks), the marks it was counted with, and whether it
// is queued.
type abCommit struct {
	id             object.ID
	when           int64
	parents        []object.ID
	marks, counted uint64
	queued         bool
	seq            int // queueing order: equal times go first in, first out, as git's walk does
}

// commit reads id once, unless a walk learnt its parents and time
// before; a missing commit (a shallow boundary) has no parents and ends
// its line.
func (w *abWalk) commit(id object.ID) (*abCommit, error) {
	if c, ok := w.commits[id]; ok {
		return c, nil
	}
	c := &abCommit{id: id}
	w.commits[id] = c
	w.reads++
	if f, ok := w.facts[id]; ok {
		c.when, c.parents = f.time, f.parents
		return c, nil
	}
	t, data, err := w.rd.readShared(id)
	switch {
	case errors.Is(err, ErrNotFound):
		return c, nil
	case err != nil:
		return nil, err
	case t != object.Commit:
		return nil, notFound("%s is not a commit", id)
	}
	info, err := object.ParseCommit(data)
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", id, err)
	}
	c.when, c.parents = info.CommitterTime, info.Parents
	w.facts[id] = commitFacts{parents: c.parents, time: c.when}
	return c, nil
}

// pending says whether a queued commit still matters: some tip does not
// reach it yet, or it was counted with fewer marks than it has.
func (w *abWalk) pending(c *abCommit) bool {
	return c.marks != w.all || c.counted != 0 && c.counted != c.marks
}

// mark adds m to c's marks, queueing c when they grow.
func (w *abWalk) mark(c *abCommit, m uint64) {
	if c.marks|m == c.marks {
		return
	}
	if c.queued && w.pending(c) {
		w.active--
	}
	c.marks |= m
	if !c.queued {
		c.queued = true
		w.seq++
		c.seq = w.seq
		heap.Push(&w.q, c)
	}
	if w.pending(c) {
		w.active++
	}
}

// step takes the newest queued commit, counts it by its marks (undoing
// an earlier count with fewer marks) and passes its marks to its
// parents.
func (w *abWalk) step() error {
	c := heap.Pop(&w.q).(*abCommit)
	c.queued = false
	if w.pending(c) {
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

// count adds d to the counts a commit with marks m contributes to.
func (w *abWalk) count(m uint64, d int) {
	if m == 0 {
		return
	}
	for i := range w.ahead {
		switch in := m&(2<<i) != 0; {
		case m&baseMark != 0 && !in:
			w.behind[i] += d
		case m&baseMark == 0 && in:
			w.ahead[i] += d
		}
	}
}

// unsettled is the heads (by their marks) whose counts a queued commit
// could still change: one that base or the head reaches but not both, or
// whose count for the head is not yet the one its marks give.
func (w *abWalk) unsettled() uint64 {
	var open uint64
	for _, c := range w.q {
		b := 0 - c.marks&baseMark // every bit set when base reaches c
		open |= (c.marks ^ b) & w.all
		if c.counted != 0 {
			open |= c.counted ^ c.marks
			if (c.counted^c.marks)&baseMark != 0 {
				open |= w.all
			}
		}
	}
	return open &^ baseMark
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
