package multiproc

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rgit/rgit/testkit/gitenv"
)

// memoryBudget is the node's RGIT_MEMORY_LIMIT in TestMemoryAdmission.
const memoryBudget = 64 << 20

// peakRSS is the process's high-water resident set (VmHWM) in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}

// TestMemoryAdmission: a real node with a 64 MiB budget takes many
// concurrent clones (HTTP and SSH) and pushes of a repository of
// incompressible data. Every operation either succeeds, and is then
// correct (clones pass fsck at the pushed tip; pushed branches are on the
// server), or is refused cleanly as busy (503 / ERR server busy) and
// changed nothing; some are refused, some served; and the node's peak RSS
// stays under the budget.
func TestMemoryAdmission(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process load test: skipped with -short")
	}
	bin := rgitBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Ports are probed free and bound later by the node; another process
	// may take one meanwhile, so a node that fails to start is started
	// again on fresh ports.
	var c *Cluster
	for attempt := 0; ; attempt++ {
		var err error
		c, err = Start(ctx, Options{Bin: bin, Dir: t.TempDir(), Nodes: 1,
			Env: []string{"RGIT_MEMORY_LIMIT=" + strconv.Itoa(memoryBudget), "RGIT_CLONE_CACHE_BYTES=0"}})
		if err == nil {
			break
		}
		if attempt == 2 {
			t.Fatal(err)
		}
		t.Logf("start node (attempt %d): %v", attempt, err)
	}
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			t.Logf("node log tail:\n%s", c.Nodes[0].LogTail(40))
		}
	})
	n := c.Nodes[0]
	env := gitenv.New(t)
	admin1 := func(cmd string, args ...string) string {
		out, err := c.Admin(ctx, n, cmd, args...)
		if err != nil {
			t.Fatalf("admin %s: %v", cmd, err)
		}
		return out
	}
	admin1("create-repo", "alice/load")
	lines := strings.Split(admin1("add-token", "alice"), "\n")
	tok := strings.TrimSpace(lines[len(lines)-1])
	key := env.NewSSHKey(t, "alice")
	pub, err := os.ReadFile(key.Public)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admin(ctx, n, "add-key", "alice", string(pub)); err != nil {
		t.Fatal(err)
	}
	url := n.HTTPURL(tok, "alice/load")

	// 24 MiB of incompressible blobs, so serving takes long enough for the
	// clients to overlap.
	work := env.Scratch(t)
	files := map[string]string{}
	for i := range 96 {
		files[fmt.Sprintf("d%02d/blob%03d.bin", i%8, i)] = rand.Text() + string(randomBytes(t, 256<<10))
	}
	tip := env.Commit(t, work, "data", files)
	env.Run(t, work, "push", "-q", url, "main")
	const pushes = 6
	branchTips := map[string]string{}
	for i := range pushes {
		b := fmt.Sprintf("b%d", i)
		env.Run(t, work, "checkout", "-q", "-b", b, "main")
		branchTips[b] = env.Commit(t, work, b, map[string]string{b + ".bin": string(randomBytes(t, 1<<20))})
	}

	type op struct {
		kind, target string
		res          gitenv.Result
	}
	var ops []*op
	for i := range 14 {
		ops = append(ops, &op{kind: "http-clone", target: filepath.Join(t.TempDir(), fmt.Sprint("h", i))})
	}
	for i := range 6 {
		ops = append(ops, &op{kind: "ssh-clone", target: filepath.Join(t.TempDir(), fmt.Sprint("s", i))})
	}
	for i := range pushes {
		ops = append(ops, &op{kind: "push", target: fmt.Sprintf("b%d", i)})
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, o := range ops {
		wg.Go(func() {
			<-start
			switch o.kind {
			case "http-clone":
				o.res = env.Try("", "clone", "-q", url, o.target)
			case "ssh-clone":
				o.res = env.TryEnv("", gitenv.SSHEnv(key), "clone", "-q", n.SSHURL("alice/load"), o.target)
			case "push":
				o.res = env.Try(work, "push", "-q", url, o.target)
			}
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(began)

	served, refused := map[string]int{}, map[string]int{}
	remote := env.Run(t, "", "ls-remote", url)
	for _, o := range ops {
		switch {
		case o.res.OK():
			served[o.kind]++
			if o.kind == "push" {
				if !strings.Contains(remote, branchTips[o.target]+"\trefs/heads/"+o.target) {
					t.Errorf("acknowledged push of %s is not on the server:\n%s", o.target, remote)
				}
				continue
			}
			if got := strings.TrimSpace(env.Run(t, o.target, "rev-parse", "HEAD")); got != tip {
				t.Errorf("%s: HEAD %s, want %s", o.kind, got, tip)
			}
			env.Fsck(t, o.target)
		case strings.Contains(o.res.Stderr, "server busy") || strings.Contains(o.res.Stderr, "503"):
			refused[o.kind]++
			if o.kind == "push" && strings.Contains(remote, "refs/heads/"+o.target) {
				t.Errorf("refused push of %s changed the server:\n%s", o.target, remote)
			}
		default:
			t.Errorf("%s %s failed other than busy: %s", o.kind, o.target, o.res)
		}
	}
	peak := peakRSS(t, n.Pid())
	t.Logf("served %v, refused %v in %v; peak RSS %d MiB of a %d MiB budget", served, refused, elapsed.Round(time.Millisecond), peak>>20, memoryBudget>>20)
	if len(refused) == 0 {
		t.Error("nothing was refused: the budget did not bind")
	}
	if len(served) == 0 {
		t.Error("nothing was served")
	}
	if peak >= memoryBudget {
		t.Errorf("peak RSS %d MiB is over the %d MiB budget", peak>>20, memoryBudget>>20)
	}
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}
