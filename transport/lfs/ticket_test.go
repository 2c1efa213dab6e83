package lfs

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/auth"
)

func TestTicketRoundTripAndForgery(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := newSigner("a peer secret of some length")
	tk := ticket{Op: opAuth, Owner: "alice", Name: "game", Exp: now.Add(time.Minute).Unix(),
		ID: &auth.Identity{Owner: "bob", Authenticated: true, ReadOnly: true, Repos: []string{"alice/game"}}}
	tok := s.sign(tk)
	got, err := s.open(tok, now)
	if err != nil || got.Owner != "alice" || got.ID == nil || got.ID.Owner != "bob" || !got.ID.ReadOnly {
		t.Fatalf("open = %+v, %v", got, err)
	}
	payload, sig, _ := strings.Cut(tok, ".")
	other := newSigner("another cluster's secret").sign(tk)
	for name, bad := range map[string]string{
		"expired":        "",
		"other secret":   other,
		"payload edited": strings.Replace(payload, payload[3:6], "AAA", 1) + "." + sig,
		"no signature":   payload,
		"garbage":        "not.a-ticket",
		"too long":       tok + strings.Repeat("A", maxTicket),
	} {
		at := now
		if name == "expired" {
			bad, at = tok, now.Add(time.Minute)
		}
		if _, err := s.open(bad, at); !errors.Is(err, errBadTicket) {
			t.Errorf("%s: open error %v, want errBadTicket", name, err)
		}
	}
}
