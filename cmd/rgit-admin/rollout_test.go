package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeKubectl answers like kubectl for a 3-replica StatefulSet: a patch
// of the partition to N restarts pod N (a new boot id), exec runs
// rollout-status; every call is logged.
const fakeKubectl = `#!/bin/sh
echo "$*" >> "$STATE/calls"
case "$1" in
get) echo 3 ;;
patch) n=$(echo "$7" | sed 's/.*"partition":\([0-9]*\).*/\1/'); echo new > "$STATE/boot-$n" ;;
set) ;;
exec) n=${2#rgit-}; boot=old; [ -f "$STATE/boot-$n" ] && boot=$(cat "$STATE/boot-$n")
  echo "{\"state\":\"serving\",\"boot_id\":\"$boot\",\"map_age_ms\":0,\"leader_reachable\":true}" ;;
*) echo "unexpected kubectl $*" >&2; exit 1 ;;
esac
`

// TestRolloutKubectl: rollout --image stages (partition = replicas, then
// the image) and lowers the partition one ordinal at a time, leader last,
// each after the restarted pod reports a new process.
func TestRolloutKubectl(t *testing.T) {
	bin, state := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "kubectl"), []byte(fakeKubectl), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("STATE", state)
	var out, errOut bytes.Buffer
	if code := run([]string{"rollout", "--statefulset", "rgit", "--image", "reg/rgit@sha256:abc"}, &out, &errOut); code != 0 {
		t.Fatalf("rollout: exit %d\n%s", code, errOut.String())
	}
	b, err := os.ReadFile(filepath.Join(state, "calls"))
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		switch f := strings.Fields(l); f[0] {
		case "patch":
			steps = append(steps, "partition "+strings.TrimSuffix(strings.SplitAfter(f[6], `"partition":`)[1], "}}}}"))
		case "set":
			steps = append(steps, strings.Join(f[:4], " "))
		}
	}
	want := []string{"partition 3", "set image statefulset/rgit rgit=reg/rgit@sha256:abc", "partition 2", "partition 1", "partition 0"}
	if strings.Join(steps, "; ") != strings.Join(want, "; ") {
		t.Fatalf("kubectl steps:\n%s\nwant:\n%s", strings.Join(steps, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(out.String(), "rollout of statefulset/rgit done") {
		t.Fatalf("stdout %q", out.String())
	}
}
