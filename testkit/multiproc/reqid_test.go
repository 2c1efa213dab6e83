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
	Msg             string `json:"msg"`
	RequestID       string `json:"request_id"`
	ClientRequestID string `json:"client_request_id"`
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

// clientIDs returns the request ids lines logged beside the client's id.
func clientIDs(lines []logLine, client string) map[string]bool {
	out := map[string]bool{}
	for _, l := range lines {
		if l.ClientRequestID == client {
			out[l.RequestID] = true
		}
	}
	return out
}

// TestClusterRequestIDs: a request's id reaches the owner's log lines
// when a non-owner forwards it: over HTTP the entry node's own id, with
// the client's X-Request-Id beside it (never in its place); the id the
// entry node made for an SSH session.
func TestClusterRequestIDs(t *testing.T) {
	c, env := startCluster(t, "RGIT_LOG_LEVEL=debug")
	n0 := c.Nodes[0]
	tok := c.token(t, n0, "alice")
	c.mustAdmin(t, n0, "create-repo", "alice/rid")
	sshEnv := c.sshKey(t, env, n0, "alice")
	work := env.Scratch(t)
	env.Commit(t, work, "one", map[string]string{"a.txt": "one\n"})
	env.Run(t, work, "push", "-q", n0.HTTPURL(tok, "alice/rid"), "main")
	owner := c.waitOwner(t, n0, "alice/rid", "")
	via := c.others(owner)
	httpVia, sshVia := via[0], via[1]

	const id = "rid-test-0123"
	env.Run(t, "", "-c", "http.extraHeader=X-Request-Id: "+id, "ls-remote", httpVia.HTTPURL(tok, "alice/rid"))
	if hasID(requestLines(t, httpVia), id) || hasID(requestLines(t, owner), id) {
		t.Errorf("the client's X-Request-Id %s was taken as the request id", id)
	}
	// One ls-remote is several HTTP requests, each with an id of its own;
	// the forwarded ones reach the owner under the same ids.
	entry, atOwner := clientIDs(requestLines(t, httpVia), id), clientIDs(requestLines(t, owner), id)
	if len(entry) == 0 || len(atOwner) == 0 {
		t.Fatalf("client request id %s: logged under %v by entry node %s, %v by owner %s", id, entry, httpVia.Name, atOwner, owner.Name)
	}
	for rid := range atOwner {
		if !entry[rid] {
			t.Errorf("owner %s logged request %s, which entry node %s never did", owner.Name, rid, httpVia.Name)
		}
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
