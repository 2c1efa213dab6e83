package node_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/testkit/freeport"
	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/transport/node"
	"github.com/rgit/rgit/transport/node/config"
)

// TestFleetHostKeyWarning: nodes of one cluster compare their SSH host
// keys in the heartbeat. Two nodes sharing RGIT_HOST_KEY say nothing; a
// third with its own key is named in a warning on the leader, and warns
// about the leader itself.
func TestFleetHostKeyWarning(t *testing.T) {
	const secret = "fleet-host-key-secret-0123"
	const warning = "a peer presents a different SSH host key"
	ports, err := freeport.Runs(3, 2) // each node's peer port and the stream port after it
	if err != nil {
		t.Fatal(err)
	}
	var peers []string
	for i, p := range ports {
		peers = append(peers, "rgit-"+strconv.Itoa(i)+"=127.0.0.1:"+strconv.Itoa(p))
	}
	store := gitenv.FileStore(t)
	shared := filepath.Join(t.TempDir(), "host_key")
	var nodes []*gitenv.Server
	for i, p := range ports {
		vars := []string{"RGIT_PEERS=" + strings.Join(peers, ","), "RGIT_SELF=rgit-" + strconv.Itoa(i),
			"RGIT_PEER_SECRET=" + secret, "RGIT_PEER_ADDR=127.0.0.1:" + strconv.Itoa(p)}
		if i < 2 {
			vars = append(vars, "RGIT_HOST_KEY="+shared)
		}
		nodes = append(nodes, gitenv.StartServer(t, store, vars...))
	}
	warned := func(i int, peer string) bool {
		for _, l := range strings.Split(nodes[i].LogTail(1<<20), "\n") {
			if strings.Contains(l, warning) && strings.Contains(l, `"peer": "`+peer+`"`) {
				return true
			}
		}
		return false
	}
	// Heartbeats go out every 3 s once a node serves.
	for deadline := time.Now().Add(time.Minute); !warned(0, "rgit-2") || !warned(2, "rgit-0"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no warning about rgit-2's host key within a minute:\nrgit-0:\n%s\nrgit-2:\n%s", nodes[0].LogTail(30), nodes[2].LogTail(30))
		}
	}
	if warned(0, "rgit-1") || warned(1, "rgit-0") {
		t.Errorf("nodes sharing a host key warned about each other")
	}
}

// TestPortInUseWritesNothing: a node whose SSH or peer stream port is
// taken stops at start with the variable named, and leaves no host key
// (nor peer secret) behind.
func TestPortInUseWritesNothing(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	_, busyPort, _ := net.SplitHostPort(busy.Addr().String())
	n, _ := strconv.Atoi(busyPort)
	free, err := freeport.Run(2)
	if err != nil {
		t.Fatal(err)
	}
	for name, vars := range map[string]map[string]string{
		"RGIT_SSH_ADDR":  {"RGIT_SSH_ADDR": busy.Addr().String()},
		"RGIT_PEER_ADDR": {"RGIT_PEER_ADDR": "127.0.0.1:" + strconv.Itoa(n-1)}, // its stream port is the busy one
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			env := map[string]string{
				"RGIT_STORE_URL": "file://" + filepath.Join(dir, "store"),
				"RGIT_CACHE_DIR": filepath.Join(dir, "cache"),
				"RGIT_HOST_KEY":  filepath.Join(dir, "host_key"),
				"RGIT_HTTP_ADDR": "127.0.0.1:0",
				"RGIT_SSH_ADDR":  "127.0.0.1:0",
				"RGIT_PEER_ADDR": "127.0.0.1:" + strconv.Itoa(free),
			}
			for k, v := range vars {
				env[k] = v
			}
			cfg, err := config.Parse(func(k string) string { return env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(cfg.CacheDir, 0o755); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			s, err := node.Start(ctx, cfg, zap.NewNop())
			if err == nil {
				s.Shutdown(ctx)
				t.Fatal("Start succeeded with a port in use")
			}
			if !strings.HasPrefix(err.Error(), name) || !strings.Contains(err.Error(), "address already in use") {
				t.Errorf("start error %q, want one naming %s and the port in use", err, name)
			}
			for _, f := range []string{cfg.HostKey, cfg.HostKey + ".pub", filepath.Join(cfg.CacheDir, "peer_secret")} {
				if _, err := os.Stat(f); !os.IsNotExist(err) {
					t.Errorf("%s written by a node that did not start (%v)", filepath.Base(f), err)
				}
			}
		})
	}
}

// TestHostKeyCommand: rgit-admin host-key prints the known_hosts line of
// the node's host key, the public key written beside it, for the node's
// own address or the name clients use; the start-up log has the same line.
func TestHostKeyCommand(t *testing.T) {
	dir := t.TempDir()
	hostKey := filepath.Join(dir, "keys", "host_key")
	srv := gitenv.StartServer(t, gitenv.FileStore(t), "RGIT_HOST_KEY="+hostKey)
	pub, err := os.ReadFile(hostKey + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(pub))
	_, port, _ := net.SplitHostPort(srv.SSHAddr)
	local := "[127.0.0.1]:" + port + ",[localhost]:" + port + " " + key
	if got := srv.Admin(t, "host-key"); got != local {
		t.Errorf("host-key: %q, want %q", got, local)
	}
	if got := srv.Admin(t, "host-key", "--host", "git.example.com:2222"); got != "[git.example.com]:2222 "+key {
		t.Errorf("host-key --host git.example.com:2222: %q", got)
	}
	if got := srv.Admin(t, "host-key", "--host", "git.example.com"); got != "git.example.com "+key {
		t.Errorf("host-key --host git.example.com: %q", got)
	}
	if log := srv.LogTail(1 << 20); !strings.Contains(log, `"known_hosts": "`+local+`"`) {
		t.Errorf("the start-up log lacks the known_hosts line %q", local)
	}
}
