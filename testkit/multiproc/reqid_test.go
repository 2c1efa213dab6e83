package multiproc

import (
	"bufio"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// logLine is one JSON log line of a node (RGIT_LOG_FORMAT auto: the log
// is a file, so JSON).
type logLine struct {
	Msg       string `json:"msg"`
	RequestID string `json:"request_id"`
}

// requestLines returns n's log lines that carry a request id.
func requestLines(t *testing.T, n *Node) []logLine {
	t.Helper()
	var out []logLine
	sc := bufio.NewScanner(strings.NewReader(n.Log()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.RequestID != "" {
			out = append(out, l)
		}
	}
	return out
}

func hasID(lines []logLine, id string) bool {
	for _, l := range lines {
		if l.RequestID == id {
			return true
		}
	}
	return false
}

// TestClusterRequestIDs: a request's id reaches the owner's log lines
// when a non-owner forwards it: the client's X-Request-Id over HTTP, the
// id the entry node made for an SSH session.
func TestClusterRequestIDs(t *testing.T) {
	c, env := startCluster(t, "RGIT_LOG_LEVEL=debug")
	n0 := c.Nodes[0]
	tok := c.token(t, n0, "alice")
	c.mustAdmin(t, n0, "create-repo", "alice/rid")
	sshEnv := c.sshKey(t, env, n0, "alice")
	work := t.TempDir()
	env.Run(t, work, "init", "-q", "-b", "main")
	env.Commit(t, work, "one", map[string]string{"a.txt": "one\n"})
	env.Run(t, work, "push", "-q", n0.HTTPURL(tok, "alice/rid"), "main")
	owner := c.waitOwner(t, n0, "alice/rid", "")
	via := c.others(owner)
	httpVia, sshVia := via[0], via[1]

	const id = "rid-test-0123"
	env.Run(t, "", "-c", "http.extraHeader=X-Request-Id: "+id, "ls-remote", httpVia.HTTPURL(tok, "alice/rid"))
	if !hasID(requestLines(t, httpVia), id) {
		t.Errorf("entry node %s never logged request id %s", httpVia.Name, id)
	}
	if !hasID(requestLines(t, owner), id) {
		t.Errorf("owner %s never logged the forwarded request id %s", owner.Name, id)
	}

	// SSH: the entry node makes the id; the owner logs the same one.
	env.RunEnv(t, "", sshEnv, "clone", "-q", sshVia.SSHURL("alice/rid"), filepath.Join(t.TempDir(), "s"))
	var sshID string
	for _, l := range requestLines(t, sshVia) {
		if l.Msg == "git ssh session" {
			sshID = l.RequestID
		}
	}
	if sshID == "" {
		t.Fatalf("entry node %s logged no ssh session with a request id", sshVia.Name)
	}
	if !hasID(requestLines(t, owner), sshID) {
		t.Errorf("owner %s never logged the forwarded ssh session's id %s", owner.Name, sshID)
	}
}
