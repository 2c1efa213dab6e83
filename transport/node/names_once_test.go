package node_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// nameParsers are the functions that turn text into a validated
// repository name (names.Repo): storage/names' constructors and the front
// ends' path readers in gitserve, which call them.
var nameParsers = map[string][]string{
	"github.com/rgit/rgit/storage/names":              {"New", "Clean", "Parse", "MustParse", "Validate"},
	"github.com/rgit/rgit/transport/service/gitserve": {"ParsePath", "ParseRepo"},
}

// nameEntries are the only packages (directories from the module root)
// whose production code calls a name parser, each for the text it reads
// from outside. Everything else takes a names.Repo: the gate, the engine,
// the actors and the cluster cannot validate a name again, since they
// have no text to validate, and a package added here needs a reason.
var nameEntries = map[string]string{
	"transport/frontend/httpgit": "the smart HTTP path (public and peer HTTP ports)",
	"transport/frontend/sshgit":  "the SSH command's path",
	"transport/frontend/peer":    "a forwarded session's X-Rgit-Repo header",
	"transport/product/api":      "the read API's path",
	"transport/product/lfs":      "the LFS paths and SSH command",
	"transport/product/admin":    "an admin message's repository",
	"transport/product/hooks":    "a stored outbox's key, listed from the object store",
	"transport/node":             "a draining peer's prewarm hint and the drain's repository list",
	"storage/repo":               "the name index's stored keys and entries",
	"storage/auth":               "a token's stored repository scopes",
	"transport/service/gitserve": "ParsePath and ParseRepo themselves (only: see below)",
	"cmd/rgit-bench":             "the benchmark's flags",
	"testkit/cluster":            "test clusters' arguments",
}

// TestNamesValidatedAtEntry: a repository name is validated once per
// node, where the request enters. The request path below the front ends
// (gitserve.Gate, engine.NodeResolver, the Mover and Rerouter, the
// actors, the cluster) takes names.Repo, which only a parser makes; this
// test finds every call of a parser in production code and fails for one
// outside the entry packages, or one in gitserve outside its own
// ParsePath and ParseRepo. So an HTTP clone through a non-owner is
// validated once on each node: by httpgit on the public port of the
// node it reached, and by httpgit on the owner's peer port.
func TestNamesValidatedAtEntry(t *testing.T) {
	root := filepath.Join("..", "..")
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == ".tools" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		dir := path.Dir(rel)
		if dir == "storage/names" {
			return nil // the rule itself
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
		if err != nil {
			return err
		}
		for fn, call := range parserCalls(f, dir) {
			seen[dir] = true
			if _, ok := nameEntries[dir]; !ok {
				t.Errorf("%s: %s calls %s: only the entry packages validate names; take a names.Repo instead", rel, fn, call)
			} else if dir == "transport/service/gitserve" && fn != "ParsePath" && fn != "ParseRepo" {
				t.Errorf("%s: %s calls %s: the gate takes a names.Repo the front end made", rel, fn, call)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"transport/frontend/httpgit", "transport/frontend/sshgit", "transport/frontend/peer", "transport/product/api"} {
		if !seen[dir] {
			t.Errorf("%s calls no name parser: where does its request's name get validated?", dir)
		}
	}
}

// parserCalls yields, for each call of a name parser in f (package dir),
// the enclosing function's name and the call as written.
func parserCalls(f *ast.File, dir string) map[string]string {
	local := map[string][]string{} // file's import name → parsers
	for _, is := range f.Imports {
		p, _ := strconv.Unquote(is.Path.Value)
		fns, ok := nameParsers[p]
		if !ok {
			continue
		}
		name := path.Base(p)
		if is.Name != nil {
			name = is.Name.Name
		}
		local[name] = fns
	}
	own := nameParsers["github.com/rgit/rgit/"+dir] // unqualified calls inside the parser's package
	out := map[string]string{}
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			switch fun := call.Fun.(type) {
			case *ast.SelectorExpr:
				if x, ok := fun.X.(*ast.Ident); ok && slices.Contains(local[x.Name], fun.Sel.Name) {
					out[fd.Name.Name] = x.Name + "." + fun.Sel.Name
				}
			case *ast.Ident:
				if slices.Contains(own, fun.Name) {
					out[fd.Name.Name] = fun.Name
				}
			}
			return true
		})
	}
	return out
}
