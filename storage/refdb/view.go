package refdb

import (
	"bytes"
	"hash/maphash"
	"iter"
	"strings"
)

// View is an immutable snapshot of the database at one log sequence
// number. Taking one is a pointer load; reads never block writers.
//
// Values returned by Get and Scan are shared with the database and with
// other views: callers must not modify them.
type View struct {
	root *node
	n    int
	seq  uint64
}

// The state is a persistent treap: an update copies only the path to the
// changed node, so each committed batch yields a new View while older
// views stay valid. Priorities come from a hash of the key, which makes
// the shape a function of the key set (expected depth O(log n)).
type node struct {
	key         string
	val         []byte
	prio        uint64
	left, right *node
}

var prioSeed = maphash.MakeSeed()

func prio(key string) uint64 { return maphash.String(prioSeed, key) }

var emptyView = &View{}

// Get returns the value stored under key.
func (v *View) Get(key string) ([]byte, bool) {
	n := v.root
	for n != nil {
		switch c := strings.Compare(key, n.key); {
		case c < 0:
			n = n.left
		case c > 0:
			n = n.right
		default:
			return n.val, true
		}
	}
	return nil, false
}

// Scan yields every pair whose key starts with prefix, in ascending key
// order.
func (v *View) Scan(prefix string) iter.Seq2[string, []byte] {
	return func(yield func(string, []byte) bool) {
		scan(v.root, prefix, yield)
	}
}

// scan walks n in order, skipping subtrees that lie wholly below prefix,
// and returns false once the caller stops or the keys pass the prefix.
func scan(n *node, prefix string, yield func(string, []byte) bool) bool {
	for n != nil {
		if n.key >= prefix {
			if !scan(n.left, prefix, yield) {
				return false
			}
			if !strings.HasPrefix(n.key, prefix) {
				return false // every later key is past the prefix too
			}
			if !yield(n.key, n.val) {
				return false
			}
		}
		n = n.right
	}
	return true
}

// Seq is the sequence number of the last log record the view includes.
func (v *View) Seq() uint64 { return v.seq }

// Len is the number of keys.
func (v *View) Len() int { return v.n }

// with returns a view with m applied (seq unchanged).
func (v *View) with(m mutation) *View {
	_, exists := v.Get(m.key)
	switch {
	case m.delete && !exists:
		return v
	case m.delete:
		return &View{root: remove(v.root, m.key), n: v.n - 1, seq: v.seq}
	case exists:
		return &View{root: insert(v.root, m.key, m.value, prio(m.key)), n: v.n, seq: v.seq}
	default:
		return &View{root: insert(v.root, m.key, m.value, prio(m.key)), n: v.n + 1, seq: v.seq}
	}
}

// apply returns the view after one log record.
func (v *View) apply(seq uint64, muts []mutation) *View {
	out := v
	for _, m := range muts {
		out = out.with(m)
	}
	if out == v {
		out = &View{root: v.root, n: v.n}
	}
	out.seq = seq
	return out
}

func insert(n *node, key string, val []byte, p uint64) *node {
	if n == nil {
		return &node{key: key, val: val, prio: p}
	}
	if key == n.key {
		c := *n
		c.val = val
		return &c
	}
	if p > n.prio {
		// key cannot be below n: its priority would break the heap order.
		l, r := split(n, key)
		return &node{key: key, val: val, prio: p, left: l, right: r}
	}
	c := *n
	if key < n.key {
		c.left = insert(n.left, key, val, p)
	} else {
		c.right = insert(n.right, key, val, p)
	}
	return &c
}

// split partitions n (which does not contain key) into keys below and
// above key.
func split(n *node, key string) (l, r *node) {
	if n == nil {
		return nil, nil
	}
	c := *n
	if n.key < key {
		c.right, r = split(n.right, key)
		return &c, r
	}
	l, c.left = split(n.left, key)
	return l, &c
}

func remove(n *node, key string) *node {
	if n == nil {
		return nil
	}
	c := *n
	switch {
	case key < n.key:
		c.left = remove(n.left, key)
	case key > n.key:
		c.right = remove(n.right, key)
	default:
		return merge(n.left, n.right)
	}
	return &c
}

// merge joins a and b where every key of a is below every key of b.
func merge(a, b *node) *node {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	if a.prio >= b.prio {
		c := *a
		c.right = merge(a.right, b)
		return &c
	}
	c := *b
	c.left = merge(a, b.left)
	return &c
}

// builder builds a treap from keys added in ascending order in O(n).
type builder struct {
	stack []*node // right spine
	n     int
}

func newBuilder() *builder { return &builder{stack: make([]*node, 0, 32)} }

func (b *builder) add(key string, val []byte) {
	nd := &node{key: key, val: val, prio: prio(key)}
	var last *node
	for len(b.stack) > 0 && b.stack[len(b.stack)-1].prio < nd.prio {
		last = b.stack[len(b.stack)-1]
		b.stack = b.stack[:len(b.stack)-1]
	}
	nd.left = last
	if len(b.stack) > 0 {
		b.stack[len(b.stack)-1].right = nd
	}
	b.stack = append(b.stack, nd)
	b.n++
}

func (b *builder) view(seq uint64) *View {
	if len(b.stack) == 0 {
		return &View{seq: seq}
	}
	return &View{root: b.stack[0], n: b.n, seq: seq}
}

// equalValue is the IfEquals test.
func equalValue(v []byte, ok bool, expect []byte) bool { return ok && bytes.Equal(v, expect) }
