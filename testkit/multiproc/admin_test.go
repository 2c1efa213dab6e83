package multiproc

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/transport/product/admin"
)

// TestClusterAdminOverview: on three real nodes, status names the node it
// ran on, the leader and the live members; where says whose view of the
// ownership map it answers from and how old that view is; rollout-status
// goes to the node at the admin address like every other command.
func TestClusterAdminOverview(t *testing.T) {
	c, _ := startCluster(t)
	n0, n1, n2 := c.Nodes[0], c.Nodes[1], c.Nodes[2]

	// Every node heartbeats the leader once it serves; a follower's view
	// shows the sessions within a poll.
	deadline := time.Now().Add(20 * time.Second)
	var out string
	for {
		out = c.mustAdmin(t, n1, "status")
		if strings.Contains(out, "live members (3): rgit-0, rgit-1, rgit-2\n") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("status on rgit-1:\n%s", out)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^node: rgit-1 \(follower; ownership map view \d+ ms old\)$`),
		regexp.MustCompile(`(?m)^leader: rgit-0 \(reachable\)$`),
		regexp.MustCompile(`(?m)^live members \(3\): rgit-0, rgit-1, rgit-2$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("status on rgit-1 lacks %s:\n%s", want, out)
		}
	}
	if out := c.mustAdmin(t, n0, "status"); !strings.Contains(out, "node: rgit-0 (leader; ownership map view 0 ms old)\n") {
		t.Errorf("status on the leader:\n%s", out)
	}

	c.mustAdmin(t, n0, "create-repo", "alice/where")
	if out := c.mustAdmin(t, n2, "where", "alice/where"); !regexp.MustCompile(
		`^alice/where is unowned \(.*\)\naccording to rgit-2's view of the ownership map, \d+ ms old$`).MatchString(out) {
		t.Errorf("where on rgit-2:\n%s", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Admin(ctx, n2, "where", "alice/nope"); admin.ExitCode(err) != admin.ExitNotFound {
		t.Errorf("where of a missing repository: %v, want not found", err)
	}

	var st admin.RolloutStatus
	if err := json.Unmarshal([]byte(c.mustAdmin(t, n2, "rollout-status")), &st); err != nil || st.State != "serving" || st.BootID == "" {
		t.Errorf("rollout-status over the admin port: %+v, %v", st, err)
	}
}
