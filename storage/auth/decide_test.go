package auth

import (
	"fmt"
	"testing"
)

// TestDecideMatrix enumerates every caller × repository × access
// combination and states the expected decision for each.
func TestDecideMatrix(t *testing.T) {
	anon := Anonymous
	owner := Identity{Owner: "alice", Authenticated: true}
	other := Identity{Owner: "bob", Authenticated: true}
	// An identity claiming an owner without being authenticated must be
	// treated as anonymous, and so must an authenticated empty owner.
	forged := Identity{Owner: "alice"}
	empty := Identity{Authenticated: true}

	type repoCase struct {
		name  string
		repo  RepoInfo
		found bool
	}
	public := repoCase{"public", RepoInfo{Owner: "alice", Name: "r", Public: true}, true}
	private := repoCase{"private", RepoInfo{Owner: "alice", Name: "r"}, true}
	missing := repoCase{"missing", RepoInfo{}, false}
	// found=false must win over whatever RepoInfo says.
	missingStale := repoCase{"missing-stale-info", RepoInfo{Owner: "alice", Name: "r", Public: true}, false}

	tests := []struct {
		id   Identity
		idN  string
		repo repoCase
		acc  Access
		want Decision
	}{
		// anonymous
		{anon, "anon", public, Read, Allow},
		{anon, "anon", public, Write, Unauthorized},
		{anon, "anon", public, Admin, Unauthorized},
		{anon, "anon", private, Read, Unauthorized},
		{anon, "anon", private, Write, Unauthorized},
		{anon, "anon", private, Admin, Unauthorized},
		{anon, "anon", missing, Read, Unauthorized},
		{anon, "anon", missing, Write, Unauthorized},
		{anon, "anon", missing, Admin, Unauthorized},
		{anon, "anon", missingStale, Read, Unauthorized},
		// owner
		{owner, "owner", public, Read, Allow},
		{owner, "owner", public, Write, Allow},
		{owner, "owner", public, Admin, Allow},
		{owner, "owner", private, Read, Allow},
		{owner, "owner", private, Write, Allow},
		{owner, "owner", private, Admin, Allow},
		{owner, "owner", missing, Read, NotFound},
		{owner, "owner", missing, Write, NotFound},
		{owner, "owner", missing, Admin, NotFound},
		{owner, "owner", missingStale, Write, NotFound},
		// another authenticated user
		{other, "other", public, Read, Allow},
		{other, "other", public, Write, Forbidden},
		{other, "other", public, Admin, Forbidden},
		{other, "other", private, Read, NotFound},
		{other, "other", private, Write, NotFound},
		{other, "other", private, Admin, NotFound},
		{other, "other", missing, Read, NotFound},
		{other, "other", missing, Write, NotFound},
		{other, "other", missing, Admin, NotFound},
		// malformed identities behave as anonymous
		{forged, "forged", private, Read, Unauthorized},
		{forged, "forged", public, Write, Unauthorized},
		{forged, "forged", public, Read, Allow},
		{empty, "empty", private, Read, Unauthorized},
		{empty, "empty", public, Write, Unauthorized},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%s/%s", tc.idN, tc.repo.name, tc.acc), func(t *testing.T) {
			got := Decide(tc.id, tc.repo.repo, tc.repo.found, tc.acc)
			if got != tc.want {
				t.Fatalf("Decide = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDecideHidesPrivate checks the non-disclosure property directly: for
// every caller who may not read a private repo, the answer equals the one
// for a missing repo.
func TestDecideHidesPrivate(t *testing.T) {
	private := RepoInfo{Owner: "alice", Name: "r"}
	for _, id := range []Identity{Anonymous, {Owner: "bob", Authenticated: true}} {
		for _, acc := range []Access{Read, Write, Admin} {
			p := Decide(id, private, true, acc)
			m := Decide(id, RepoInfo{}, false, acc)
			if p != m {
				t.Errorf("id=%+v acc=%v: private=%v missing=%v", id, acc, p, m)
			}
			if p == Forbidden || p == Allow {
				t.Errorf("id=%+v acc=%v: private repo answered %v", id, acc, p)
			}
		}
	}
}
