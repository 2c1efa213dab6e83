package config

import (
	"os"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaults(t *testing.T) {
	c, err := Parse(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.StoreURL != "file://./data" || c.HTTPAddr != ":8080" || c.MaxWarm != 64 ||
		c.WarmTTL != 300*time.Second || c.StoreTimeout != 900*time.Second || c.FlushInterval != 0 {
		t.Fatalf("unexpected defaults: %+v", c)
	}
	if a, _ := c.PeerStreamAddr(); a != ":8082" {
		t.Fatalf("peer stream addr = %q", a)
	}
}

func TestBadValuesNameTheVariable(t *testing.T) {
	cases := map[string]map[string]string{
		"RGIT_MAX_WARM":          {"RGIT_MAX_WARM": "many"},
		"RGIT_WARM_TTL_SECS":     {"RGIT_WARM_TTL_SECS": "0"},
		"RGIT_HTTP_ADDR":         {"RGIT_HTTP_ADDR": "8080"},
		"RGIT_SELF":              {"RGIT_PEER_SVC": "rgit.ns.svc", "RGIT_PEER_SECRET": "0123456789abcdef"},
		"RGIT_PEER_SECRET":       {"RGIT_PEER_SECRET": "short"},
		"RGIT_LOG_LEVEL":         {"RGIT_LOG_LEVEL": "loud"},
		"RGIT_LOG_FORMAT":        {"RGIT_LOG_FORMAT": "xml"},
		"RGIT_FLUSH_INTERVAL_MS": {"RGIT_FLUSH_INTERVAL_MS": "-1"},
	}
	for name, m := range cases {
		_, err := Parse(env(m))
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v does not name the variable", name, err)
		}
	}
}

// TestLogEncoding: RGIT_LOG_FORMAT picks the zap encoding; unset, a
// terminal gets console lines and anything else (a pipe to a collector)
// gets JSON.
func TestLogEncoding(t *testing.T) {
	cases := []struct {
		env      string // RGIT_LOG_FORMAT; "" = unset
		terminal bool
		want     string
	}{
		{"", true, "console"},
		{"", false, "json"},
		{"auto", false, "json"},
		{"json", true, "json"},
		{"json", false, "json"},
		{"console", false, "console"},
		{"console", true, "console"},
	}
	for _, c := range cases {
		cfg, err := Parse(env(map[string]string{"RGIT_LOG_FORMAT": c.env}))
		if err != nil {
			t.Fatalf("RGIT_LOG_FORMAT=%q: %v", c.env, err)
		}
		if got := LogEncoding(cfg.LogFormat, c.terminal); got != c.want {
			t.Errorf("RGIT_LOG_FORMAT=%q terminal=%v: encoding %q, want %q", c.env, c.terminal, got, c.want)
		}
	}
}

// TestReadmeDocumentsEveryVariable keeps the README's configuration section
// true: every variable the server reads must be described there.
func TestReadmeDocumentsEveryVariable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range Vars {
		if !strings.Contains(string(readme), "`"+v.Name+"`") {
			t.Errorf("README.md does not document %s", v.Name)
		}
	}
}

func TestClusterMode(t *testing.T) {
	const sec = "0123456789abcdef"
	c, err := Parse(env(map[string]string{
		"RGIT_PEERS": "rgit-0=127.0.0.1:9081, rgit-1=127.0.0.1:9181", "RGIT_SELF": "rgit-1", "RGIT_PEER_SECRET": sec}))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Cluster() || c.Peers["rgit-1"] != "127.0.0.1:9181" || len(c.Peers) != 2 {
		t.Fatalf("static peers: %+v", c)
	}
	if c, _ := Parse(env(nil)); c.Cluster() {
		t.Fatal("single node reports cluster mode")
	}
	bad := map[string]map[string]string{
		"RGIT_PEERS":       {"RGIT_PEERS": "rgit-0", "RGIT_SELF": "rgit-0", "RGIT_PEER_SECRET": sec},
		"RGIT_SELF":        {"RGIT_PEERS": "rgit-0=127.0.0.1:9081", "RGIT_SELF": "rgit-3", "RGIT_PEER_SECRET": sec},
		"RGIT_PEER_SECRET": {"RGIT_PEERS": "rgit-0=127.0.0.1:9081", "RGIT_SELF": "rgit-0"},
		"not both":         {"RGIT_PEERS": "rgit-0=127.0.0.1:9081", "RGIT_PEER_SVC": "svc", "RGIT_SELF": "rgit-0", "RGIT_PEER_SECRET": sec},
		"ordinal":          {"RGIT_PEER_SVC": "svc", "RGIT_SELF": "rgit", "RGIT_PEER_SECRET": sec},
	}
	for name, m := range bad {
		if _, err := Parse(env(m)); err == nil || (!strings.Contains(err.Error(), name) && !strings.Contains(err.Error(), "RGIT_SELF")) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
