package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/transport/product/api"
	"github.com/rgit/rgit/transport/wire/gitproto"
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
	if c.HTTPIdle != 120*time.Second || c.HTTPBodyStall != 60*time.Second || c.SSHIdle != 300*time.Second || c.SSHStall != 60*time.Second {
		t.Fatalf("unexpected timeout defaults: %+v", c)
	}
	// A pod restart of the leader takes about 20 s.
	if c.LeaderWait != 30*time.Second {
		t.Fatalf("RGIT_LEADER_WAIT_SECS defaults to %s, want 30s", c.LeaderWait)
	}
	if c.StoreGrace != 60*time.Second {
		t.Fatalf("RGIT_LEASE_STORE_GRACE_SECS defaults to %s, want 60s", c.StoreGrace)
	}
	// Large hosts refuse single files over 100 MiB; "no limit" would let a
	// delta of a few bytes declare gigabytes.
	if c.MaxObjectSize != 100<<20 {
		t.Fatalf("RGIT_MAX_OBJECT_SIZE defaults to %d, want 100 MiB", c.MaxObjectSize)
	}
}

// TestPeerStreamAddr: the peer stream port (rgit-admin) of a single node
// listens on loopback unless RGIT_PEER_ADDR says otherwise; in a cluster
// peers must reach it, so it follows RGIT_PEER_ADDR.
func TestPeerStreamAddr(t *testing.T) {
	const sec = "0123456789abcdef"
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"single node, default", nil, "127.0.0.1:8082"},
		{"single node, explicit any host", map[string]string{"RGIT_PEER_ADDR": ":9081"}, ":9082"},
		{"single node, explicit host", map[string]string{"RGIT_PEER_ADDR": "10.0.0.5:9081"}, "10.0.0.5:9082"},
		{"cluster, default", map[string]string{"RGIT_PEER_SVC": "rgit.ns.svc", "RGIT_SELF": "rgit-0", "RGIT_PEER_SECRET": sec}, ":8082"},
		{"cluster, explicit", map[string]string{"RGIT_PEERS": "rgit-0=127.0.0.1:9081", "RGIT_SELF": "rgit-0", "RGIT_PEER_SECRET": sec,
			"RGIT_PEER_ADDR": "127.0.0.1:9081"}, "127.0.0.1:9082"},
	}
	for _, c := range cases {
		cfg, err := Parse(env(c.env))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got, err := cfg.PeerStreamAddr(); err != nil || got != c.want {
			t.Errorf("%s: stream addr %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

func TestBadValuesNameTheVariable(t *testing.T) {
	cases := map[string]map[string]string{
		"RGIT_MAX_WARM":               {"RGIT_MAX_WARM": "many"},
		"RGIT_MEMORY_LIMIT":           {"RGIT_MEMORY_LIMIT": "4GB"},
		"RGIT_PREWARM_BYTES":          {"RGIT_PREWARM_BYTES": "-1"},
		"RGIT_GC_INTERVAL_SECS":       {"RGIT_GC_INTERVAL_SECS": "-1"},
		"RGIT_WARM_TTL_SECS":          {"RGIT_WARM_TTL_SECS": "0"},
		"RGIT_LEADER_WAIT_SECS":       {"RGIT_LEADER_WAIT_SECS": "-5"},
		"RGIT_LEASE_STORE_GRACE_SECS": {"RGIT_LEASE_STORE_GRACE_SECS": "-1"},
		"RGIT_HTTP_ADDR":              {"RGIT_HTTP_ADDR": "8080"},
		"RGIT_SELF":                   {"RGIT_PEER_SVC": "rgit.ns.svc", "RGIT_PEER_SECRET": "0123456789abcdef"},
		"RGIT_PEER_SECRET":            {"RGIT_PEER_SECRET": "short"},
		"RGIT_LOG_LEVEL":              {"RGIT_LOG_LEVEL": "loud"},
		"RGIT_FLUSH_INTERVAL_MS":      {"RGIT_FLUSH_INTERVAL_MS": "-1"},
		"RGIT_MAX_WANTS":              {"RGIT_MAX_WANTS": "0"},
		"RGIT_MAX_HAVES":              {"RGIT_MAX_HAVES": "lots"},
		"RGIT_MAX_ARG_BYTES":          {"RGIT_MAX_ARG_BYTES": "10"},
		"RGIT_MAX_NEGOTIATIONS":       {"RGIT_MAX_NEGOTIATIONS": "0"},
		"RGIT_HTTP_IDLE_SECS":         {"RGIT_HTTP_IDLE_SECS": "0"},
		"RGIT_HTTP_BODY_STALL_SECS":   {"RGIT_HTTP_BODY_STALL_SECS": "soon"},
		"RGIT_SSH_IDLE_SECS":          {"RGIT_SSH_IDLE_SECS": "-5"},
		"RGIT_SSH_STALL_SECS":         {"RGIT_SSH_STALL_SECS": "0"},
		"RGIT_LOG_FORMAT":             {"RGIT_LOG_FORMAT": "xml"},
		"RGIT_PACK_URIS":              {"RGIT_PACK_URIS": "sometimes"},
		"RGIT_PACK_URI_SECS":          {"RGIT_PACK_URI_SECS": "604801"},
		"RGIT_PACK_URI_MIN_BYTES":     {"RGIT_PACK_URI_MIN_BYTES": "-1"},
		"RGIT_STORE_OP_TIMEOUT_MS":    {"RGIT_STORE_OP_TIMEOUT_MS": "20", "RGIT_STORE_TIMEOUT_SECS": "5"},
		"RGIT_STORE_OP_TIMEOUT_MS ":   {"RGIT_STORE_OP_TIMEOUT_MS": "6000", "RGIT_STORE_TIMEOUT_SECS": "5"},
		"RGIT_PEER_TLS_KEY":           {"RGIT_PEER_TLS_CERT": "/x/peer.pem", "RGIT_PEER_TLS_CA": "/x/ca.pem"},
		"RGIT_PEER_TLS_CA":            {"RGIT_PEER_TLS_CERT": "/x/peer.pem", "RGIT_PEER_TLS_KEY": "/x/peer-key.pem"},
		"RGIT_PEER_TLS_CERT":          {"RGIT_PEER_TLS_CERT": "/nonexistent/peer.pem", "RGIT_PEER_TLS_KEY": "/x/k", "RGIT_PEER_TLS_CA": "/x/ca"},
	}
	for name, m := range cases {
		_, err := Parse(env(m))
		if name = strings.TrimSpace(name); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v does not name the variable", name, err)
		}
	}
}

// TestFetchLimits: the protocol's limit errors name these variables, and
// their defaults are the protocol's.
func TestFetchLimits(t *testing.T) {
	c, err := Parse(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][2]int{
		gitproto.SettingMaxWants:    {c.MaxWants, gitproto.DefaultMaxWants},
		gitproto.SettingMaxHaves:    {c.MaxHaves, gitproto.DefaultMaxHaves},
		gitproto.SettingMaxArgBytes: {c.MaxArgBytes, gitproto.DefaultMaxArgBytes},
	} {
		if got[0] != got[1] {
			t.Errorf("%s defaults to %d, the protocol's default is %d", name, got[0], got[1])
		}
	}
	c, err = Parse(env(map[string]string{"RGIT_MAX_HAVES": "5000", "RGIT_MAX_NEGOTIATIONS": "4"}))
	if err != nil || c.MaxHaves != 5000 || c.MaxNegotiations != 4 {
		t.Fatalf("Parse: %+v, %v", c, err)
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
	readme, err := os.ReadFile("../../../README.md")
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

func TestMemoryLimitSuffixes(t *testing.T) {
	for in, want := range map[string]int64{"": 0, "0": 0, "1048576": 1 << 20, "512Mi": 512 << 20, "4Gi": 4 << 30, "64Ki": 64 << 10} {
		c, err := Parse(env(map[string]string{"RGIT_MEMORY_LIMIT": in}))
		if err != nil {
			t.Errorf("RGIT_MEMORY_LIMIT=%q: %v", in, err)
		} else if c.MemoryLimit != want {
			t.Errorf("RGIT_MEMORY_LIMIT=%q: %d, want %d", in, c.MemoryLimit, want)
		}
	}
	for _, bad := range []string{"-1", "4G", "Gi", "9999999Ti"} {
		if _, err := Parse(env(map[string]string{"RGIT_MEMORY_LIMIT": bad})); err == nil || !strings.Contains(err.Error(), "RGIT_MEMORY_LIMIT") {
			t.Errorf("RGIT_MEMORY_LIMIT=%q: %v, want an error naming the variable", bad, err)
		}
	}
}

// TestReadAPIVariables: the read API's variables are validated and named
// in the error.
func TestReadAPIVariables(t *testing.T) {
	c, err := Parse(env(map[string]string{"RGIT_REDIS_URL": "rediss://:pw@cache:6380/0", "RGIT_UPSTREAM": "http://rgit:8081"}))
	if err != nil || c.RedisURL != "rediss://:pw@cache:6380/0" || c.APIAddr != ":8090" {
		t.Fatalf("%+v, %v", c, err)
	}
	for name, v := range map[string]string{
		"RGIT_REDIS_URL": "memcache://x:1",
		"RGIT_UPSTREAM":  "rgit:8081",
		"RGIT_API_ADDR":  "8090",
	} {
		if _, err := Parse(env(map[string]string{name: v})); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: %v", name, v, err)
		}
	}
}

// TestUnknownVariables: an RGIT_* variable that nothing reads stops the
// start with its name and, for a typo, the variable meant; variables that
// other rgit programs read pass.
func TestUnknownVariables(t *testing.T) {
	cases := []struct {
		env  []string
		want string // "" means accepted
	}{
		{[]string{"RGIT_HTTPADDR=:9090"}, "RGIT_HTTPADDR: unknown variable; did you mean RGIT_HTTP_ADDR?"},
		{[]string{"RGIT_PEER_SECRETS=0123456789abcdef"}, "RGIT_PEER_SECRETS: unknown variable; did you mean RGIT_PEER_SECRET?"},
		{[]string{"RGIT_MAXWARM=8", "RGIT_STORE=file:///x"}, "RGIT_MAXWARM: unknown variable; did you mean RGIT_MAX_WARM?\nRGIT_STORE: unknown variable; did you mean RGIT_STORE_URL?"},
		{[]string{"RGIT_FROBNICATE=1"}, "RGIT_FROBNICATE: unknown variable (`rgit` without arguments lists them)"},
		{[]string{"RGIT_ADMIN_ADR=x"}, "RGIT_ADMIN_ADR: unknown variable; did you mean RGIT_ADMIN_ADDR?"},
		{[]string{"RGIT_HTTP_ADDR=:9090", "RGIT_ADMIN_ADDR=127.0.0.1:8082", "RGIT_VERSITYGW=/x", "PATH=/bin", "RGITX=1"}, ""},
	}
	for _, c := range cases {
		_, err := FromEnviron(c.env)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.env, err)
		case c.want != "" && (err == nil || err.Error() != c.want):
			t.Errorf("%v: %v, want %q", c.env, err, c.want)
		}
	}
	// With a bad value besides, both are reported.
	if _, err := FromEnviron([]string{"RGIT_HTTPADDR=:1", "RGIT_MAX_WARM=many"}); err == nil ||
		!strings.Contains(err.Error(), "RGIT_HTTPADDR") || !strings.Contains(err.Error(), "RGIT_MAX_WARM") {
		t.Errorf("typo and bad value: %v", err)
	}
}

// TestSelfNeedsPeers: RGIT_SELF without a way to find peers would start a
// lone node that owns everything: refused, naming the variables.
func TestSelfNeedsPeers(t *testing.T) {
	_, err := Parse(env(map[string]string{"RGIT_SELF": "rgit-1"}))
	if err == nil || !strings.Contains(err.Error(), "RGIT_SELF: set without RGIT_PEER_SVC or RGIT_PEERS") {
		t.Fatalf("RGIT_SELF alone: %v", err)
	}
}

// TestEveryVariableIsKnown: every RGIT_* name the code spells out is one
// Parse reads or one listed in Elsewhere, so a node started by a test (or
// next to rgit-admin) is never refused for a variable rgit itself uses.
// config's own tests are skipped: they spell typos on purpose.
func TestEveryVariableIsKnown(t *testing.T) {
	read := map[string]bool{}
	if _, err := Parse(func(k string) string { read[k] = true; return "" }); err != nil {
		t.Fatal(err)
	}
	lit := regexp.MustCompile(`"(RGIT_[A-Z0-9_]+)"`)
	own := filepath.Join("..", "..", "..", "transport", "node", "config")
	err := filepath.WalkDir("../../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == ".tools" || d.Name() == "bench") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || (filepath.Dir(path) == own && strings.HasSuffix(path, "_test.go")) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range lit.FindAllSubmatch(b, -1) {
			if name := string(m[1]); !read[name] && !slices.Contains(Elsewhere, name) {
				t.Errorf("%s: %s is neither read by config.Parse nor listed in config.Elsewhere", path, name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPublicURLs: the public addresses are validated, the error naming
// the variable, and kept without a trailing slash.
func TestPublicURLs(t *testing.T) {
	c, err := Parse(env(map[string]string{"RGIT_PUBLIC_URL": "https://git.example.com/", "RGIT_PUBLIC_SSH_URL": "ssh://git@git.example.com:2222",
		"RGIT_WEB_URL": "https://code.example.com:8443", "RGIT_METRICS_ADDR": ":9100"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.PublicURL != "https://git.example.com" || c.PublicSSHURL != "ssh://git@git.example.com:2222" || c.WebURL != "https://code.example.com:8443" || c.MetricsAddr != ":9100" {
		t.Fatalf("parsed %q %q %q %q", c.PublicURL, c.PublicSSHURL, c.WebURL, c.MetricsAddr)
	}
	if c, err := Parse(env(nil)); err != nil || c.PublicURL != "" || c.PublicSSHURL != "" || c.WebURL != "" || c.MetricsAddr != "" {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	for name, bad := range map[string][]string{
		"RGIT_PUBLIC_URL":     {"git.example.com", "ftp://git.example.com", "https://", "https://git.example.com/git", "https://u:p@git.example.com", "https://h?x=1", "https://h:99999", "https://h#f"},
		"RGIT_PUBLIC_SSH_URL": {"git@git.example.com:2222", "https://git.example.com", "ssh://git@h/owner", "ssh://git:pw@h", "ssh://"},
		"RGIT_WEB_URL":        {"code.example.com", "ssh://code.example.com"},
		"RGIT_METRICS_ADDR":   {"9100", "localhost:metrics"},
		"RGIT_PACK_URI_BASE":  {"cdn.example.com/packs", "s3://bucket", "https://", "https://cdn.example.com/p?sig=1", "https://cdn.example.com/p?", "https://cdn.example.com#f", "https://u:p@cdn.example.com", "https://h:0"},
	} {
		for _, v := range bad {
			if _, err := Parse(env(map[string]string{name: v})); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%q: %v, want an error naming the variable", name, v, err)
			}
		}
	}
}

// TestPackURIBase: RGIT_PACK_URI_BASE keeps a path prefix (a proxy's
// location) without its trailing slash; unset is none.
func TestPackURIBase(t *testing.T) {
	for v, want := range map[string]string{
		"":                                   "",
		"https://cdn.example.com":            "https://cdn.example.com",
		"http://proxy.internal:8080/":        "http://proxy.internal:8080",
		"https://cdn.example.com/git/packs/": "https://cdn.example.com/git/packs",
	} {
		c, err := Parse(env(map[string]string{"RGIT_PACK_URI_BASE": v}))
		if err != nil || c.PackURIBase != want {
			t.Errorf("RGIT_PACK_URI_BASE=%q: %q, %v; want %q", v, c.PackURIBase, err, want)
		}
	}
	if c, err := Parse(env(map[string]string{"RGIT_PACK_URI_MIN_BYTES": "4Mi"})); err != nil || c.PackURIMinBytes != 4<<20 {
		t.Fatalf("RGIT_PACK_URI_MIN_BYTES=4Mi: %v, %v", c.PackURIMinBytes, err)
	}
}

// TestReadAPILimits: the read API's limits default to the API's own
// defaults, which name these variables; none can be turned off with 0.
func TestReadAPILimits(t *testing.T) {
	c, err := Parse(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][2]int64{
		api.SettingMaxEntries:         {int64(c.APIMaxEntries), api.DefaultMaxEntries},
		api.SettingMaxDiffFiles:       {int64(c.APIMaxDiffFiles), api.DefaultMaxDiffFiles},
		api.SettingMaxDiffBytes:       {c.APIMaxDiffBytes, api.DefaultMaxDiffBytes},
		api.SettingMaxDiffFileBytes:   {c.APIMaxDiffFileBytes, api.DefaultMaxDiffFileBytes},
		api.SettingDiffTimeout:        {c.APIDiffTimeout.Milliseconds(), api.DefaultDiffTimeout.Milliseconds()},
		api.SettingRenameLimit:        {int64(c.APIRenameLimit), api.DefaultRenameLimit},
		api.SettingMaxLogScan:         {int64(c.APIMaxLogScan), api.DefaultMaxLogScan},
		api.SettingMaxArchiveBytes:    {c.APIMaxArchiveBytes, api.DefaultMaxArchiveBytes},
		api.SettingMaxActive:          {int64(c.APIMaxActive), 0},
		api.SettingMaxBlameCommits:    {int64(c.APIMaxBlameCommits), api.DefaultMaxBlameCommits},
		api.SettingBlameTimeout:       {c.APIBlameTimeout.Milliseconds(), api.DefaultBlameTimeout.Milliseconds()},
		api.SettingMaxBlameFileBytes:  {c.APIMaxBlameFileBytes, api.DefaultMaxBlameFileBytes},
		api.SettingMaxSearchBytes:     {c.APISearchMaxBytes, api.DefaultMaxSearchBytes},
		api.SettingMaxSearchFiles:     {int64(c.APISearchMaxFiles), api.DefaultMaxSearchFiles},
		api.SettingMaxSearchBlobs:     {int64(c.APISearchMaxBlobs), api.DefaultMaxSearchBlobs},
		api.SettingSearchTimeout:      {c.APISearchTimeout.Milliseconds(), api.DefaultSearchTimeout.Milliseconds()},
		api.SettingMaxSearchFileBytes: {c.APISearchMaxFileBytes, api.DefaultMaxSearchFileBytes},
		api.SettingMaxLastCommitScan:  {int64(c.APILastCommitScan), api.DefaultMaxLastCommitScan},
		api.SettingLastCommitTimeout:  {c.APILastCommitTimeout.Milliseconds(), api.DefaultLastCommitTimeout.Milliseconds()},
	} {
		if got[0] != got[1] {
			t.Errorf("%s defaults to %d, the read API's default is %d", name, got[0], got[1])
		}
	}
	for _, name := range []string{api.SettingMaxEntries, api.SettingMaxDiffFiles, api.SettingMaxDiffBytes, api.SettingMaxDiffFileBytes,
		api.SettingDiffTimeout, api.SettingRenameLimit, api.SettingMaxLogScan, api.SettingMaxArchiveBytes,
		api.SettingMaxBlameCommits, api.SettingBlameTimeout, api.SettingMaxBlameFileBytes,
		api.SettingMaxSearchBytes, api.SettingMaxSearchFiles, api.SettingMaxSearchBlobs, api.SettingSearchTimeout, api.SettingMaxSearchFileBytes,
		api.SettingMaxLastCommitScan, api.SettingLastCommitTimeout} {
		if _, err := Parse(env(map[string]string{name: "0"})); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=0: %v, want an error naming the variable", name, err)
		}
	}
	c, err = Parse(env(map[string]string{api.SettingMaxArchiveBytes: "64Mi", api.SettingMaxActive: "3"}))
	if err != nil || c.APIMaxArchiveBytes != 64<<20 || c.APIMaxActive != 3 {
		t.Fatalf("Parse: %+v, %v", c, err)
	}
}

// TestPackURIs: RGIT_PACK_URIS is on where the store can presign unless
// turned off, and asking for it on a store that cannot is an error
// naming the variable.
func TestPackURIs(t *testing.T) {
	cases := []struct {
		value    string
		presigns bool
		on       bool
		err      bool
	}{
		{"", true, true, false},
		{"", false, false, false},
		{"auto", true, true, false},
		{"AUTO", false, false, false},
		{"1", true, true, false},
		{"1", false, false, true},
		{"on", false, false, true},
		{"0", true, false, false},
		{"off", false, false, false},
	}
	for _, c := range cases {
		cfg, err := Parse(env(map[string]string{"RGIT_PACK_URIS": c.value}))
		if err != nil {
			t.Fatalf("%q: %v", c.value, err)
		}
		on, err := cfg.PackURIsOn(c.presigns)
		if on != c.on || (err != nil) != c.err {
			t.Errorf("RGIT_PACK_URIS=%q, presigns %v: on %v, err %v; want on %v, error %v", c.value, c.presigns, on, err, c.on, c.err)
		}
		if err != nil && !strings.Contains(err.Error(), "RGIT_PACK_URIS") {
			t.Errorf("error %v does not name the variable", err)
		}
	}
	cfg, err := Parse(env(nil))
	if err != nil || cfg.PackURITTL != 10*time.Minute {
		t.Fatalf("RGIT_PACK_URI_SECS default: %v, %v", cfg.PackURITTL, err)
	}
}
