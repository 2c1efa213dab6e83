package web

import "testing"

// TestViewOf: every route the page registers names its view, and the
// label's values are the routes' words, never a path's.
func TestViewOf(t *testing.T) {
	for pattern, want := range map[string]string{
		"GET /{$}":                                 "index",
		"GET /-/signin":                            "signin",
		"POST /-/signout":                          "signout",
		"GET /-/static/style.css":                  "static",
		"GET /{owner}/{name}":                      "repo",
		"GET /{owner}/{name}/tree/{oid}/{path...}": "tree",
		"GET /{owner}/{name}/blob/{oid}/{path...}": "blob",
		"GET /{owner}/{name}/commits/{oid}":        "commits",
		"GET /{owner}/{name}/compare":              "compare",
		"GET /{owner}/{name}/{rest...}":            "other",
		"/":                                        "other",
		"":                                         "other",
	} {
		if got := viewOf(pattern); got != want {
			t.Errorf("viewOf(%q) = %q, want %q", pattern, got, want)
		}
	}
}
