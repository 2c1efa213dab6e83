package lfs

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/testkit/faultstore"
	"github.com/rgit/rgit/transport/wire/clientlimit"
)

// newCountedFixture is a fixture whose store counts its calls, from zero.
func newCountedFixture(t *testing.T, limits Limits, set ...func(*Config)) (*fixture, *faultstore.Store) {
	t.Helper()
	fs := faultstore.New(memstore.New(), 1)
	f := newFixture(t, fs, limits, set...)
	fs.ResetCounts()
	return f, fs
}

// TestAnonymousBatchBudget: a batch without credentials over
// RGIT_LFS_MAX_ANON_BATCH_OBJECTS is refused with the documented message
// before any store lookup, whatever the repository (public, private or
// missing: the same answer); under it, each object costs one lookup, as
// an authenticated caller's up to RGIT_LFS_MAX_BATCH_OBJECTS.
func TestAnonymousBatchBudget(t *testing.T) {
	f, fs := newCountedFixture(t, Limits{MaxBatchObjects: 5, MaxAnonBatchObjects: 2})
	objs := []objectSpec{newObject("a").spec, newObject("b").spec, newObject("c").spec}
	const want = "too many objects in one batch without credentials (limit 2, set RGIT_LFS_MAX_ANON_BATCH_OBJECTS); authenticate to send more"
	for _, name := range []string{"pub", "priv", "nope"} {
		var m message
		code, _ := f.do(t, http.MethodPost, "/alice/"+name+".git/info/lfs/objects/batch", "",
			batchRequest{Operation: "download", Objects: objs}, &m)
		if code != http.StatusRequestEntityTooLarge || m.Message != want {
			t.Errorf("anonymous batch of 3 on alice/%s: %d %q, want 413 %q", name, code, m.Message, want)
		}
	}
	if n := fs.Count(faultstore.AllOps); n != 0 {
		t.Fatalf("over-cap anonymous batches cost %d store calls, want 0", n)
	}

	// A private repository answers anonymous callers as a missing one
	// does, before any lookup.
	var priv, missing message
	cp, hp := f.do(t, http.MethodPost, "/alice/priv.git/info/lfs/objects/batch", "", batchRequest{Operation: "download", Objects: objs[:2]}, &priv)
	cm, hm := f.do(t, http.MethodPost, "/alice/nope.git/info/lfs/objects/batch", "", batchRequest{Operation: "download", Objects: objs[:2]}, &missing)
	if cp != cm || priv.Message != missing.Message || hp.Get("LFS-Authenticate") != hm.Get("LFS-Authenticate") {
		t.Errorf("private %d %q and missing %d %q answers differ", cp, priv.Message, cm, missing.Message)
	}
	if n := fs.Count(faultstore.AllOps); n != 0 {
		t.Fatalf("denied batches cost %d store calls, want 0", n)
	}

	if code, resp := f.batch(t, "alice/pub", "", "download", objs[:2]...); code != http.StatusOK || len(resp.Objects) != 2 {
		t.Fatalf("anonymous batch at the cap: %d %+v", code, resp)
	}
	if n := fs.Count(faultstore.OpHead); n != 2 {
		t.Errorf("anonymous batch of 2: %d lookups, want 2", n)
	}
	fs.ResetCounts()
	if code, _ := f.batch(t, "alice/pub", "carol", "download", objs...); code != http.StatusOK {
		t.Fatalf("authenticated batch of 3: %d", code)
	}
	if n := fs.Count(faultstore.OpHead); n != 3 {
		t.Errorf("authenticated batch of 3: %d lookups, want 3", n)
	}
}

// TestAnonymousPerAddressCap: batch, lock and node-served download
// requests without credentials share the per-address cap git's do
// (RGIT_MAX_ANON_PER_ADDR): each holds a unit while it runs, and over
// the cap they are refused 429 with the documented message and
// Retry-After. Authenticated callers, and downloads handed to them, hold
// nothing.
func TestAnonymousPerAddressCap(t *testing.T) {
	anon := clientlimit.NewPerAddr(1, "RGIT_MAX_ANON_PER_ADDR")
	f, fs := newCountedFixture(t, Limits{}, func(c *Config) { c.Unauthenticated = anon })
	o, p := newObject("stored"), newObject("another")
	for _, x := range []object{o, p} {
		if err := f.store.Put(context.Background(), repo.LFSKey(names.MustParse("alice/pub"), x.spec.OID), strings.NewReader(string(x.data)), x.spec.Size); err != nil {
			t.Fatal(err)
		}
	}
	// Every request but the parked batch touches p only: o's lookups
	// are parked below.
	_, resp := f.batch(t, "alice/pub", "", "download", p.spec)
	anonHref := resp.Objects[0].Actions["download"].Href
	_, resp = f.batch(t, "alice/pub", "carol", "download", p.spec)
	carolHref := resp.Objects[0].Actions["download"].Href
	if anonHref == "" || carolHref == "" {
		t.Fatal("no download actions")
	}
	if n := anon.Held("127.0.0.1"); n != 0 {
		t.Fatalf("%d units held after the requests ended", n)
	}

	// An anonymous batch parked in its store lookup holds the address's
	// one unit: every other anonymous request is refused meanwhile.
	gate := fs.Hold(faultstore.OpHead, repo.LFSKey(names.MustParse("alice/pub"), o.spec.OID))
	t.Cleanup(gate.Release) // before the server closes, should the test fail first
	done := make(chan int)
	go func() {
		code, _ := f.batch(t, "alice/pub", "", "download", o.spec)
		done <- code
	}()
	if err := gate.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	const want = "too many unauthenticated connections from your address (limit 1, set RGIT_MAX_ANON_PER_ADDR)"
	lookups := fs.Count(faultstore.AllOps)
	for _, c := range []struct{ name, method, url string }{
		{"batch", http.MethodPost, "/alice/pub.git/info/lfs/objects/batch"},
		{"lock list", http.MethodGet, "/alice/pub.git/info/lfs/locks"},
		{"download", http.MethodGet, anonHref},
	} {
		var m message
		var body any
		if c.method == http.MethodPost {
			body = batchRequest{Operation: "download", Objects: []objectSpec{p.spec}}
		}
		code, h := f.do(t, c.method, c.url, "", body, &m)
		if code != http.StatusTooManyRequests || m.Message != want || h.Get("Retry-After") == "" {
			t.Errorf("anonymous %s over the cap: %d %q (Retry-After %q), want 429 %q", c.name, code, m.Message, h.Get("Retry-After"), want)
		}
	}
	if n := fs.Count(faultstore.AllOps); n != lookups {
		t.Errorf("refused requests cost %d store calls", n-lookups)
	}
	if code, _ := f.batch(t, "alice/pub", "carol", "download", p.spec); code != http.StatusOK {
		t.Errorf("authenticated batch beside it: %d", code)
	}
	if code, _ := f.do(t, http.MethodGet, carolHref, "", nil, nil); code != http.StatusOK {
		t.Errorf("download handed to an authenticated caller: %d", code)
	}
	gate.Release()
	if code := <-done; code != http.StatusOK {
		t.Fatalf("parked anonymous batch: %d", code)
	}
	if code, _ := f.do(t, http.MethodGet, anonHref, "", nil, nil); code != http.StatusOK {
		t.Errorf("anonymous download once the unit is free: %d", code)
	}
	if n := anon.Held("127.0.0.1"); n != 0 {
		t.Fatalf("%d units held after the requests ended", n)
	}
}
