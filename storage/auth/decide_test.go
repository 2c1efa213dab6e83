package auth

import (
	"fmt"
	"testing"

	"github.com/rgit/rgit/storage/names"
)

// TestDecideMatrix enumerates every caller × repository × access
// combination and states the expected decision for each. The columns are
// public read/write/admin, private read/write/admin, missing read/write;
// A = Allow, U = Unauthorized, N = NotFound, F = Forbidden.
func TestDecideMatrix(t *testing.T) {
	grants := []Grant{{User: "ann", Role: RoleAdmin}, {User: "wes", Role: RoleWrite}, {User: "rea", Role: RoleRead}}
	user := func(o string) Identity { return Identity{Owner: o, Authenticated: true} }
	tests := []struct {
		name string
		id   Identity
		want string // pub R W A | priv R W A | missing R W
	}{
		{"owner", user("alice"), "AAA AAA NN"},
		{"owner-other-spelling", user("ALICE"), "AAA AAA NN"},
		{"admin", user("ann"), "AAA AAA NN"},
		{"admin-spelled", user("Ann"), "AAA AAA NN"},
		{"write", user("wes"), "AAF AAF NN"},
		{"read", user("rea"), "AFF AFF NN"},
		{"stranger", user("bob"), "AFF NNN NN"},
		{"anonymous", Anonymous, "AUU UUU UU"},
		// scoped tokens
		{"owner-read-token", Identity{Owner: "alice", Authenticated: true, ReadOnly: true}, "AFF AFF NN"},
		{"admin-read-token", Identity{Owner: "ann", Authenticated: true, ReadOnly: true}, "AFF AFF NN"},
		{"owner-token-this-repo", Identity{Owner: "alice", Authenticated: true, Repos: []string{"Alice/R"}}, "AAA AAA NN"},
		{"owner-token-other-repo", Identity{Owner: "alice", Authenticated: true, Repos: []string{"alice/other"}}, "AFF NNN NN"},
		{"write-token-bad-repo-entry", Identity{Owner: "wes", Authenticated: true, Repos: []string{"nonsense"}}, "AFF NNN NN"},
		// deploy keys
		{"deploy-write", Identity{DeployKey: "SHA256:x", Authenticated: true, Repos: []string{"alice/r"}}, "AAF AAF NN"},
		{"deploy-read", Identity{DeployKey: "SHA256:x", Authenticated: true, Repos: []string{"alice/r"}, ReadOnly: true}, "AFF AFF NN"},
		{"deploy-other-repo", Identity{DeployKey: "SHA256:x", Authenticated: true, Repos: []string{"alice/other"}}, "AFF NNN NN"},
		{"deploy-no-repo", Identity{DeployKey: "SHA256:x", Authenticated: true}, "AFF NNN NN"},
		// malformed identities behave as anonymous
		{"forged", Identity{Owner: "alice"}, "AUU UUU UU"},
		{"empty", Identity{Authenticated: true}, "AUU UUU UU"},
	}
	letter := map[Decision]byte{Allow: 'A', Unauthorized: 'U', NotFound: 'N', Forbidden: 'F'}
	pub := RepoInfo{Repo: names.MustParse("alice/r"), Public: true, Grants: grants}
	priv := RepoInfo{Repo: names.MustParse("alice/r"), Grants: grants}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := []byte{}
			for _, acc := range []Access{Read, Write, Admin} {
				got = append(got, letter[Decide(tc.id, pub, true, acc)])
			}
			got = append(got, ' ')
			for _, acc := range []Access{Read, Write, Admin} {
				got = append(got, letter[Decide(tc.id, priv, true, acc)])
			}
			got = append(got, ' ')
			// found=false must win over whatever RepoInfo says.
			got = append(got, letter[Decide(tc.id, pub, false, Read)], letter[Decide(tc.id, RepoInfo{}, false, Write)])
			if string(got) != tc.want {
				t.Fatalf("decisions = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestDecideHidesPrivate checks the non-disclosure property directly: for
// every caller who may not read a private repo, the answer equals the one
// for a missing repo.
func TestDecideHidesPrivate(t *testing.T) {
	private := RepoInfo{Repo: names.MustParse("alice/r"), Grants: []Grant{{User: "carol", Role: RoleRead}}}
	for _, id := range []Identity{
		Anonymous, {Owner: "bob", Authenticated: true},
		{Owner: "alice", Authenticated: true, Repos: []string{"alice/x"}},
		{DeployKey: "k", Authenticated: true, Repos: []string{"alice/x"}},
	} {
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

func TestCheckUpdate(t *testing.T) {
	rules := []Protection{
		{Pattern: "refs/heads/main", NoForcePush: true, NoDelete: true},
		{Pattern: "refs/heads/release/*", NoDelete: true},
		{Pattern: "refs/heads/release/*", NoForcePush: true},
		{Pattern: "refs/heads/wip", NoForcePush: true},
	}
	tests := []struct {
		ref  string
		kind UpdateKind
		ok   bool
	}{
		{"refs/heads/main", Create, true},
		{"refs/heads/main", FastForward, true},
		{"refs/heads/main", Force, false},
		{"refs/heads/main", Delete, false},
		{"refs/heads/release/1.0", Force, false}, // rules combine
		{"refs/heads/release/1.0", Delete, false},
		{"refs/heads/release/1.0", FastForward, true},
		{"refs/heads/release/1.0/fix", Force, true}, // * stays in one segment
		{"refs/heads/wip", Delete, true},
		{"refs/heads/wip", Force, false},
		{"refs/heads/wip", Recreate, false}, // delete allowed, re-create elsewhere not
		{"refs/heads/release/1.0/fix", Recreate, true},
		{"refs/heads/mainline", Force, true},
		{"refs/tags/main", Delete, true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%s", tc.ref, tc.kind), func(t *testing.T) {
			got := CheckUpdate(rules, tc.ref, tc.kind)
			if (got == "") != tc.ok {
				t.Fatalf("CheckUpdate = %q, want ok=%v", got, tc.ok)
			}
		})
	}
}

func TestValidatePattern(t *testing.T) {
	for p, ok := range map[string]bool{
		"refs/heads/main": true, "refs/heads/release/*": true, "refs/tags/v[0-9]*": true,
		"main": false, "refs/heads/[": false, "refs/heads/a b": false, "": false,
	} {
		if err := ValidatePattern(p); (err == nil) != ok {
			t.Errorf("ValidatePattern(%q) = %v, want ok=%v", p, err, ok)
		}
	}
}
