package packcache

import (
	"crypto/sha1"
	"errors"
	"math/rand"
	"testing"

	"github.com/rgit/rgit/storage/object"
)

func TestTrailerHasherAnyChunking(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	body := make([]byte, 5000)
	rng.Read(body)
	sum := sha1.Sum(body)
	full := append(append([]byte(nil), body...), sum[:]...)
	for trial := 0; trial < 50; trial++ {
		th := newTrailerHasher()
		for rest := full; len(rest) > 0; {
			n := 1 + rng.Intn(40)
			if n > len(rest) {
				n = len(rest)
			}
			th.Write(rest[:n])
			rest = rest[n:]
		}
		if err := th.check(object.ID(sum)); err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
	}
	th := newTrailerHasher()
	th.Write(full[:len(full)-1])
	th.Write([]byte{full[len(full)-1] ^ 1})
	if err := th.check(object.ID(sum)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bad trailer: %v", err)
	}
}

func TestVerifyIdxRejectsDamage(t *testing.T) {
	fx := makePack(t, "v")
	want, err := nameHash(fx.name)
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyIdx(fx.idx, want); err != nil {
		t.Fatalf("good idx: %v", err)
	}
	cases := map[string][]byte{
		"truncated": fx.idx[:len(fx.idx)-1],
		"short":     fx.idx[:100],
		"flipped":   flip(fx.idx, 8+256*4+3),
		"magic":     flip(fx.idx, 0),
	}
	for name, data := range cases {
		if err := verifyIdx(data, want); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	var other object.ID
	if err := verifyIdx(fx.idx, other); !errors.Is(err, ErrCorrupt) {
		t.Errorf("wrong pack: %v", err)
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0xff
	return c
}

func TestNameHash(t *testing.T) {
	for _, bad := range []string{"", "pack-", "pack-xyz", "foo-0000000000000000000000000000000000000000"} {
		if _, err := nameHash(bad); err == nil {
			t.Errorf("nameHash(%q) accepted", bad)
		}
	}
}
