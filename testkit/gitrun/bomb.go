package gitrun

import (
	"fmt"
	"strings"
)

// TreeBomb writes into the repository r a tree nesting levels levels of
// fanout subtrees named "0", "1", …, whose innermost trees hold fanout
// files with content, and returns its id: fanout^levels paths from
// levels trees and one blob, a few kilobytes to push (6 levels of 10 is
// a million paths). It is the hostile input for code that expands trees.
func (r *Repo) TreeBomb(levels, fanout int, content string) string {
	r.T.Helper()
	id := strings.TrimSpace(string(r.Output([]byte(content), "hash-object", "-w", "--stdin")))
	mode, kind := "100644", "blob"
	for range levels {
		var b strings.Builder
		for i := range fanout {
			fmt.Fprintf(&b, "%s %s %s\t%d\n", mode, kind, id, i)
		}
		id = strings.TrimSpace(string(r.Output([]byte(b.String()), "mktree")))
		mode, kind = "040000", "tree"
	}
	return id
}
