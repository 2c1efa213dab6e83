package node_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportDirection: nothing outside cmd/ imports a package under
// cmd/, and this package (with its config and version) is imported only
// by cmd/, testkit and tests: composition sits at the top, and nothing
// below it reaches up. Inside transport/ the rooms import only rooms
// below them (transport/doc.go), and nothing in actors/, cluster/ or
// storage/ imports transport/.
func TestImportDirection(t *testing.T) {
	const mod = "github.com/rgit/rgit/"
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == ".tools" || d.Name() == "bench" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		inCmd, inTestkit := strings.HasPrefix(rel, "cmd/"), strings.HasPrefix(rel, "testkit/")
		inNode := strings.HasPrefix(rel, "transport/node/")
		from := roomOf(rel)
		for _, is := range f.Imports {
			p, _ := strconv.Unquote(is.Path.Value)
			if to := roomOf(strings.TrimPrefix(p, mod) + "/"); strings.HasPrefix(p, mod) && from >= 0 && to > from && !strings.HasSuffix(rel, "_test.go") {
				t.Errorf("%s imports %s: a room imports only the rooms below it (%s may not import %s)", rel, p, rooms[from], rooms[to])
			}
			switch {
			case strings.HasPrefix(p, mod+"cmd/") && !inCmd:
				t.Errorf("%s imports %s: nothing outside cmd/ imports a command's package", rel, p)
			case (p == mod+"transport/node" || strings.HasPrefix(p, mod+"transport/node/")) &&
				!inCmd && !inTestkit && !inNode && !strings.HasSuffix(rel, "_test.go"):
				t.Errorf("%s imports %s: only cmd/, testkit and tests assemble nodes", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// rooms, lowest first: a package imports only its own room and those
// before it.
var rooms = []string{"storage/", "cluster/", "actors/", "transport/wire/", "transport/service/", "transport/frontend/", "transport/product/", "transport/node/"}

// roomOf is the index in rooms of the package at path rel (a directory
// or file path from the module root), or -1.
func roomOf(rel string) int {
	for i, r := range rooms {
		if strings.HasPrefix(rel, r) {
			return i
		}
	}
	return -1
}
