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
// below it reaches up.
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
		for _, is := range f.Imports {
			p, _ := strconv.Unquote(is.Path.Value)
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
