package multiproc

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/transport/product/admin"
	"github.com/rgit/rgit/transport/wire/peertls"
)

// peerCerts generates a peer CA and certificate into a new directory.
func peerCerts(t *testing.T) peertls.Files {
	t.Helper()
	dir := t.TempDir()
	if err := peertls.Generate(dir, "test"); err != nil {
		t.Fatal(err)
	}
	return peertls.Files{Cert: filepath.Join(dir, peertls.PeerFile), Key: filepath.Join(dir, peertls.PeerKeyFile),
		CA: filepath.Join(dir, peertls.CAFile)}
}

// setEnv replaces or adds KEY=value in env.
func setEnv(env []string, key, value string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// TestClusterPeerTLS: three nodes with mutual TLS on both peer ports
// serve forwarded HTTP and SSH traffic, leader calls and relayed admin
// commands; plaintext and a foreign certificate are refused, and a node
// restarted with a certificate another CA signed cannot reach its peers.
func TestClusterPeerTLS(t *testing.T) {
	files := peerCerts(t)
	c, env := startClusterWith(t, Options{PeerTLS: files})
	n0 := c.Nodes[0]
	tok := c.token(t, n0, "alice")
	sshEnv := c.sshKey(t, env, n0, "alice")
	const repo = "alice/tls"
	c.mustAdmin(t, n0, "create-repo", repo)
	work := env.Scratch(t)
	c1 := env.Commit(t, work, "one", map[string]string{"a.txt": "one\n"})
	// Pushed through a non-leader: its claim is a leader call over TLS.
	env.Run(t, work, "push", "-q", c.Nodes[1].HTTPURL(tok, repo), "main")
	owner := c.waitOwner(t, n0, repo, "")
	others := c.others(owner)
	for _, n := range others {
		clone := filepath.Join(t.TempDir(), "h")
		env.Run(t, "", "clone", "-q", n.HTTPURL(tok, repo), clone)
		if got := env.Run(t, clone, "rev-parse", "HEAD"); got != c1 {
			t.Fatalf("http clone via %s: HEAD %s, want %s", n.Name, got, c1)
		}
		sclone := filepath.Join(t.TempDir(), "s")
		env.RunEnv(t, "", sshEnv, "clone", "-q", n.SSHURL(repo), sclone)
		// Relayed to the owner over the TLS stream port.
		c.mustAdmin(t, n, "gc", repo)
	}
	for _, n := range others {
		if c.openOn(t, n, repo) {
			t.Errorf("%s opened %s: served there, not forwarded", n.Name, repo)
		}
	}

	// Plaintext, and TLS without a certificate from the CA, are refused on
	// both peer ports.
	for _, addr := range []string{owner.PeerAddr, owner.StreamAddr} {
		r := env.Command("", nil, "curl", "-s", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}",
			"-H", "X-Rgit-Peer-Secret: "+c.Secret, "-H", "Authorization: Bearer "+c.Secret, "-H", "X-Rgit-Hop: 1",
			"http://"+addr+"/"+repo+".git/info/refs?service=git-upload-pack")
		if code := strings.TrimSpace(r.Stdout); code != "400" && code != "000" {
			t.Errorf("plaintext to peer port %s: %q, want refused", addr, code)
		}
		r = env.Command("", nil, "curl", "-s", "-k", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}",
			"-H", "X-Rgit-Peer-Secret: "+c.Secret, "-H", "X-Rgit-Hop: 1",
			"https://"+addr+"/"+repo+".git/info/refs?service=git-upload-pack")
		if code := strings.TrimSpace(r.Stdout); code != "000" {
			t.Errorf("TLS without a client certificate to %s: %q, want the handshake refused", addr, code)
		}
	}
	// A foreign certificate: signed by another CA, used by a client that
	// trusts the cluster's CA (whose certificate is no secret), so the
	// node's own check is what refuses it.
	foreign := peerCerts(t)
	foreign.CA = files.CA
	ftls, err := peertls.Load(foreign)
	if err != nil {
		t.Fatal(err)
	}
	const unknownCA = "certificate signed by unknown authority"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := admin.Do(ctx, owner.StreamAddr, ftls, c.Secret, admin.ShowStatus{}, nil); err == nil {
		t.Error("admin with a foreign certificate was served")
	}
	// The server logs the failed handshake after the client has seen it
	// fail: wait for the line.
	refusals := waitLogCount(owner, unknownCA, 0, 5*time.Second)
	if refusals == 0 {
		t.Errorf("owner %s did not log refusing the foreign certificate", owner.Name)
	}

	// A node restarted with a foreign certificate cannot forward: its
	// peers refuse it, and it refuses them. (Not the leader: the others
	// would lose their claims.)
	var bad *Node
	for _, n := range others {
		if n != n0 {
			bad = n
			break
		}
	}
	if err := bad.Term(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	bad.env = setEnv(setEnv(bad.env, peertls.EnvCert, foreign.Cert), peertls.EnvKey, foreign.Key)
	if err := bad.Start(); err != nil {
		t.Fatal(err)
	}
	if err := bad.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := env.Try("", "ls-remote", bad.HTTPURL(tok, repo)); r.OK() {
		t.Fatalf("ls-remote via %s with a foreign certificate succeeded: %s", bad.Name, r.Stdout)
	}
	if waitLogCount(owner, unknownCA, refusals, 5*time.Second) == refusals {
		t.Errorf("owner %s did not refuse %s's foreign certificate", owner.Name, bad.Name)
	}
	for _, n := range c.Nodes {
		if strings.Contains(n.Log(), "fenced") {
			t.Errorf("%s logged fencing", n.Name)
		}
	}
}

// waitLogCount waits until n's log holds more than after occurrences of
// line, or for d, and returns the count.
func waitLogCount(n *Node, line string, after int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		got := strings.Count(n.Log(), line)
		if got > after || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}
