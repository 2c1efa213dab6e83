package fsck

import (
	"fmt"
	"testing"

	"github.com/rgit/rgit/storage/object"
)

func BenchmarkCheckTree(b *testing.B) {
	var es []ent
	for i := range 100 {
		es = append(es, file(fmt.Sprintf("file%03d.go", i)))
	}
	tree := mkTree(es...)
	id := object.Hash(object.Tree, tree)
	c := NewChecker(Options{})
	b.SetBytes(int64(len(tree)))
	for b.Loop() {
		if err := c.Check(id, object.Tree, tree); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckCommit(b *testing.B) {
	data := commitCases[0].data
	c := NewChecker(Options{})
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if err := c.Check(commitID, object.Commit, data); err != nil {
			b.Fatal(err)
		}
	}
}
