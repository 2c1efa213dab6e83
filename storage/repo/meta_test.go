package repo

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/testkit/faultstore"
)

// TestNameIndex: create claims the case-folded name atomically, delete
// frees it, and set-visibility keeps the index in step with the database.
func TestNameIndex(t *testing.T) {
	d := newDeps(t, memstore.New())
	if err := Create(ctx, d, names.MustParse("alice/priv")); err != nil {
		t.Fatal(err)
	}
	for _, v := range [][2]string{{"alice", "PRIV"}, {"Alice", "priv"}, {"ALICE", "Priv"}} {
		if err := Create(ctx, d, rn(v[0], v[1])); !errors.Is(err, ErrExists) {
			t.Errorf("Create(%s/%s) = %v, want ErrExists", v[0], v[1], err)
		}
	}
	m, err := ReadMeta(ctx, d.Store, names.MustParse("ALICE/Priv"))
	if err != nil || !reflect.DeepEqual(m, auth.RepoInfo{Repo: rn("alice", "priv")}) {
		t.Fatalf("ReadMeta(ALICE/Priv) = %+v, %v", m, err)
	}
	r, err := Open(ctx, d, names.MustParse("alice/priv"))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetVisibility(ctx, true); err != nil {
		t.Fatal(err)
	}
	if m, _ := ReadMeta(ctx, d.Store, names.MustParse("alice/priv")); !m.Public || !r.Info().Public {
		t.Fatalf("after SetVisibility(true): index %+v, database public=%v", m, r.Info().Public)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := Delete(ctx, d, names.MustParse("alice/priv")); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadMeta(ctx, d.Store, names.MustParse("alice/priv")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("index entry after delete: %v", err)
	}
	if err := Create(ctx, d, names.MustParse("alice/PRIV")); err != nil {
		t.Fatalf("Create of a case variant after delete: %v", err)
	}
}

type owners map[string]string

func (o owners) ClaimOwner(_ context.Context, owner string) (string, error) {
	k := strings.ToLower(owner)
	if c, ok := o[k]; ok {
		return c, nil
	}
	o[k] = owner
	return owner, nil
}

// TestMigrateIndex: repositories created before the index get entries
// with their visibility; a legacy case collision keeps the first name and
// is reported; a second run changes nothing.
func TestMigrateIndex(t *testing.T) {
	d := newDeps(t, memstore.New())
	legacy := func(owner, name string, public bool) {
		if err := Create(ctx, d, rn(owner, name)); err != nil {
			t.Fatal(err)
		}
		r, err := Open(ctx, d, rn(owner, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.SetVisibility(ctx, public); err != nil {
			t.Fatal(err)
		}
		r.Close(ctx)
		if err := d.Store.Delete(ctx, MetaKey(rn(owner, name))); err != nil {
			t.Fatal(err)
		}
	}
	legacy("bob", "pub", true)
	legacy("alice", "x", false)
	legacy("Alice", "X", true) // differs only in case: possible before the index
	ow := owners{}
	n, coll, err := MigrateIndex(ctx, d, ow)
	if err != nil || n != 2 || len(coll) != 1 || coll[0] != "alice/x" {
		t.Fatalf("MigrateIndex = %d, %v, %v; want 2, [alice/x]", n, coll, err)
	}
	if m, _ := ReadMeta(ctx, d.Store, names.MustParse("bob/pub")); !reflect.DeepEqual(m, auth.RepoInfo{Repo: rn("bob", "pub"), Public: true}) {
		t.Errorf("bob/pub indexed as %+v", m)
	}
	if m, _ := ReadMeta(ctx, d.Store, names.MustParse("alice/x")); !reflect.DeepEqual(m, auth.RepoInfo{Repo: rn("Alice", "X"), Public: true}) {
		t.Errorf("alice/x indexed as %+v, want the first spelling Alice/X", m)
	}
	if ow["alice"] != "Alice" || ow["bob"] != "bob" {
		t.Errorf("owners claimed %v", ow)
	}
	// Done once: a later start neither scans nor rewrites, even if an
	// entry went missing since.
	if err := d.Store.Delete(ctx, MetaKey(names.MustParse("bob/pub"))); err != nil {
		t.Fatal(err)
	}
	if n, coll, err := MigrateIndex(ctx, d, ow); err != nil || n != 0 || len(coll) != 0 {
		t.Fatalf("second MigrateIndex = %d, %v, %v; want nothing done", n, coll, err)
	}
	if _, err := ReadMeta(ctx, d.Store, names.MustParse("bob/pub")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second MigrateIndex scanned again: %v", err)
	}
	// The shadowed legacy repository stays deletable by its exact name,
	// without touching the other's index entry.
	if err := Delete(ctx, d, names.MustParse("alice/x")); err != nil {
		t.Fatal(err)
	}
	if m, err := ReadMeta(ctx, d.Store, names.MustParse("alice/x")); err != nil || m.Repo.Owner() != "Alice" {
		t.Fatalf("index after deleting the shadowed repository: %+v, %v", m, err)
	}
}

// TestListMeta: every repository's entry with its canonical spelling,
// cut at max with truncated set; deleted repositories drop out.
func TestListMeta(t *testing.T) {
	d := newDeps(t, memstore.New())
	for _, n := range [][2]string{{"Alice", "One"}, {"alice", "two"}, {"bob", "x"}} {
		if err := Create(ctx, d, rn(n[0], n[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := Delete(ctx, d, names.MustParse("bob/x")); err != nil {
		t.Fatal(err)
	}
	all, truncated, err := ListMeta(ctx, d.Store, 10)
	if err != nil || truncated || len(all) != 2 || !reflect.DeepEqual(all[0], auth.RepoInfo{Repo: rn("Alice", "One")}) || all[1].Repo.Name() != "two" {
		t.Fatalf("ListMeta: %+v truncated=%v err=%v", all, truncated, err)
	}
	if some, truncated, err := ListMeta(ctx, d.Store, 1); err != nil || !truncated || len(some) != 1 {
		t.Errorf("ListMeta(max 1): %+v truncated=%v err=%v", some, truncated, err)
	}
}

// TestMetaCacheMissingLikePrivate: after a first probe, a private and a
// missing repository are answered alike at every moment (from memory
// while the entry lives, one store read once it expires), so the time
// an answer takes never tells them apart.
func TestMetaCacheMissingLikePrivate(t *testing.T) {
	fs := faultstore.New(memstore.New(), 1)
	d := newDeps(t, fs)
	if err := Create(ctx, d, names.MustParse("alice/priv")); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1e9, 0)
	mc := NewMetaCache(fs, MetaCacheOptions{Now: func() time.Time { return now }})
	probe := func(name string) (reads int64, public bool) {
		fs.ResetCounts()
		public, err := mc.Public(ctx, rn("alice", name))
		if err != nil {
			t.Fatalf("Public(alice/%s): %v", name, err)
		}
		return fs.Count(faultstore.OpGet), public
	}
	for _, name := range []string{"priv", "none"} {
		if reads, public := probe(name); reads != 1 || public {
			t.Fatalf("first probe of alice/%s: %d store reads, public %v; want 1, false", name, reads, public)
		}
	}
	start := now
	for step := time.Duration(0); step <= 2*DefaultMetaTTL; step += 250 * time.Millisecond {
		now = start.Add(step)
		priv, missing := mc.Cached(names.MustParse("alice/priv")), mc.Cached(names.MustParse("alice/none"))
		if priv != missing {
			t.Fatalf("%v after the first probes: private cached %v, missing cached %v", step, priv, missing)
		}
		pr, _ := probe("priv")
		mr, _ := probe("none")
		if pr != mr {
			t.Fatalf("%v after the first probes: private cost %d store reads, missing %d", step, pr, mr)
		}
	}
}
