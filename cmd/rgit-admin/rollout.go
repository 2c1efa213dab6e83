package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/rgit/rgit/transport/product/admin"
)

// rollout runs a partitioned rolling update of a StatefulSet through
// kubectl, gated by every node's rollout status (admin.Rollout).
func rollout(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rollout", flag.ContinueOnError)
	fs.SetOutput(stderr)
	k := &kubeFleet{}
	fs.StringVar(&k.sts, "statefulset", "rgit", "the git nodes' StatefulSet")
	fs.StringVar(&k.ns, "namespace", "", "its namespace (default: kubectl's)")
	fs.StringVar(&k.container, "container", "rgit", "the rgit container of each pod")
	image := fs.String("image", "", "new image (pinned by digest); empty: the StatefulSet was applied with the new revision behind partition = replicas")
	timeout := fs.Duration("timeout", 10*time.Minute, "per node, for the gate to open")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return admin.ExitOK
	} else if err != nil {
		return admin.ExitUsage
	}
	progress := func(m string) { fmt.Fprintf(stderr, "%s %s\n", time.Now().UTC().Format("15:04:05"), m) }
	if *image != "" {
		// Stage: hold every pod at its revision, then change the image.
		n, err := k.Size(ctx)
		if err == nil {
			err = k.partition(ctx, n)
		}
		if err == nil {
			_, err = k.kubectl(ctx, "set", "image", "statefulset/"+k.sts, k.container+"="+*image)
		}
		if err != nil {
			fmt.Fprintln(stderr, "rgit-admin: stage the update:", err)
			return admin.ExitUnreachable
		}
	}
	took, err := admin.Rollout(ctx, k, admin.RolloutOptions{Timeout: *timeout, Progress: progress})
	if err != nil {
		fmt.Fprintln(stderr, "rgit-admin: rollout stopped:", err)
		return admin.ExitFailed
	}
	fmt.Fprintf(stdout, "rollout of statefulset/%s done in %s\n", k.sts, took.Round(time.Second))
	return 0
}

// kubeFleet is a StatefulSet driven with kubectl: Update lowers the
// partition to the node's ordinal, Status runs rollout-status in its pod.
type kubeFleet struct {
	sts, ns, container string
}

func (k *kubeFleet) kubectl(ctx context.Context, args ...string) ([]byte, error) {
	if k.ns != "" {
		args = append([]string{"--namespace", k.ns}, args...)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "kubectl", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

func (k *kubeFleet) Size(ctx context.Context) (int, error) {
	out, err := k.kubectl(ctx, "get", "statefulset", k.sts, "-o", "jsonpath={.spec.replicas}")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(out)))
}

func (k *kubeFleet) partition(ctx context.Context, p int) error {
	patch := fmt.Sprintf(`{"spec":{"updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":%d}}}}`, p)
	_, err := k.kubectl(ctx, "patch", "statefulset", k.sts, "--type", "merge", "-p", patch)
	return err
}

// Update lets the controller replace pod i (and no lower ordinal).
func (k *kubeFleet) Update(ctx context.Context, i int) error { return k.partition(ctx, i) }

func (k *kubeFleet) Status(ctx context.Context, i int) (admin.RolloutStatus, error) {
	var st admin.RolloutStatus
	out, err := k.kubectl(ctx, "exec", fmt.Sprintf("%s-%d", k.sts, i), "-c", k.container, "--", "rgit-admin", "rollout-status")
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return st, fmt.Errorf("rollout status of %s-%d: %w", k.sts, i, err)
	}
	return st, nil
}
