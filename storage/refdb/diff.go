package refdb

import (
	"bytes"
	"iter"
	"strings"
)

// Diff yields the keys under prefix whose value differs between old and
// new: added, changed or removed, each once, in no particular order.
// Subtrees the two views share are skipped unvisited (a commit copies only
// the paths it changed), so between views a few commits apart it costs
// what changed, not the database's size. Views with nothing in common (a
// snapshot was loaded in between) are compared key by key. A nil view
// is empty.
func Diff(old, new *View, prefix string) iter.Seq[string] {
	return func(yield func(string) bool) {
		d := differ{prefix: prefix, yield: yield}
		d.diff(old.rootOrNil(), new.rootOrNil())
	}
}

func (v *View) rootOrNil() *node {
	if v == nil {
		return nil
	}
	return v.root
}

type differ struct {
	prefix string
	yield  func(string) bool
	visits int // node pairs compared (tests)
}

func (d *differ) all(n *node) bool {
	return scan(n, d.prefix, func(k string, _ []byte) bool { d.visits++; return d.yield(k) })
}

func (d *differ) diff(a, b *node) bool {
	d.visits++
	switch {
	case a == b:
		return true
	case a == nil:
		return d.all(b)
	case b == nil:
		return d.all(a)
	}
	// Take the root of higher priority (the one a shared key set would
	// have at the top) and cut the other treap at its key; any root would
	// be correct, this one keeps the cut short.
	top, other := a, b
	if b.prio > a.prio {
		top, other = b, a
	}
	l, m, r := cut(other, top.key)
	if (m == nil || !bytes.Equal(m.val, top.val)) && strings.HasPrefix(top.key, d.prefix) && !d.yield(top.key) {
		return false
	}
	if top == a {
		return d.diff(a.left, l) && d.diff(a.right, r)
	}
	return d.diff(l, b.left) && d.diff(r, b.right)
}

// cut partitions n into the keys below key, the node holding key (if
// any) and the keys above it, copying only the path to key: subtrees off
// that path stay shared, which is what lets diff skip them.
func cut(n *node, key string) (l, m, r *node) {
	if n == nil {
		return nil, nil, nil
	}
	switch {
	case n.key == key:
		return n.left, n, n.right
	case n.key < key:
		c := *n
		c.right, m, r = cut(n.right, key)
		return &c, m, r
	default:
		c := *n
		l, m, c.left = cut(n.left, key)
		return l, m, &c
	}
}
