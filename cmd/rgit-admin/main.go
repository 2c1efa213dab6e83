// Command rgit-admin administers a running rgit node: it turns each command
// line into its typed message (admin.Parse) and sends it in a peer
// envelope to the node's peer stream port (RGIT_ADMIN_ADDR, default
// 127.0.0.1:8082), authenticated with the peer secret, and the node runs it
// through the repository's actor — nothing has to be stopped.
// `rgit-admin version` prints its own version and the node's;
// `rgit-admin help` lists the commands and `<command> --help` prints one's
// usage. With --json
// the answer is one JSON object on stdout (a structured command's result,
// {"output": …} for the others, {"error": …, "code": …} on failure), and
// the exit status says how it failed: 1 not found, 2 usage, 3 refused,
// 4 unreachable, 5 anything else. With peer TLS on, it reads the node's
// RGIT_PEER_TLS_CERT, RGIT_PEER_TLS_KEY and RGIT_PEER_TLS_CA;
// `rgit-admin gen-peer-certs <dir>` makes a CA and a certificate for them.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rgit/rgit/transport/node/version"
	"github.com/rgit/rgit/transport/product/admin"
	"github.com/rgit/rgit/transport/wire/peertls"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// local are the commands rgit-admin runs itself: name, synopsis and
// description, as admin.Help has them for the node's commands.
var local = [][3]string{
	{"gen-peer-certs", "<dir>", "write a new peer CA and a peer certificate it signs into dir (see docs/operations.md: Peer TLS)"},
	{"rollout", "[--statefulset rgit] [--namespace ns] [--container rgit] [--image ref@sha256:…] [--timeout 10m]",
		"partitioned rolling update of the StatefulSet through kubectl, gated on every node's rollout status"},
	{"help", "[command]", "this list, or one command's usage"},
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rgit-admin", flag.ContinueOnError)
	addr := fs.String("addr", envOr("RGIT_ADMIN_ADDR", "127.0.0.1:8082"), "node's peer stream address (RGIT_ADMIN_ADDR)")
	showVersion := fs.Bool("version", false, "print rgit-admin's version and the node's (same as the version command)")
	asJSON := fs.Bool("json", false, "print the answer as one JSON object (for scripts)")
	fs.SetOutput(stderr)
	usage := func(w io.Writer) {
		fmt.Fprintln(w, "usage: rgit-admin [--addr host:port] [--json] <command> [args]   (<command> --help: its usage)\n\ncommands:")
		for _, l := range admin.Usage() {
			fmt.Fprintln(w, "  "+l)
		}
		for _, c := range local {
			fmt.Fprintf(w, "  %s %s\n      %s\n", c[0], c[1], c[2])
		}
		fmt.Fprintln(w, "\nexit status: 0 ok, 1 not found, 2 usage, 3 refused, 4 unreachable, 5 other failure")
	}
	fs.Usage = func() { usage(stderr) }
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0 // asked for: the usage went out
	} else if err != nil {
		return admin.ExitUsage
	}
	if fs.NArg() >= 1 && wantsHelp(fs.Args()[1:]) {
		return commandHelp(fs.Arg(0), stdout, stderr)
	}
	if fs.NArg() >= 1 && fs.Arg(0) == "help" {
		if fs.NArg() == 1 {
			usage(stdout)
			return 0
		}
		return commandHelp(fs.Arg(1), stdout, stderr)
	}
	if fs.NArg() >= 1 && fs.Arg(0) == "gen-peer-certs" {
		return genPeerCerts(fs.Args()[1:], stdout, stderr)
	}
	tc, err := peertls.Load(peertls.FromEnv(os.Getenv))
	if err != nil {
		fmt.Fprintln(stderr, "rgit-admin:", err)
		return admin.ExitUsage
	}
	if *showVersion || (fs.NArg() == 1 && fs.Arg(0) == "version") {
		return printVersion(*addr, tc, stdout, stderr)
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return admin.ExitUsage
	}
	if fs.Arg(0) == "rollout" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return rollout(ctx, fs.Args()[1:], stdout, stderr)
	}
	command, args := fs.Arg(0), fs.Args()[1:]
	if command == "add-key" || command == "add-deploy-key" {
		if err := readKeyFile(args); err != nil {
			fmt.Fprintln(stderr, "rgit-admin: read public key:", err)
			return admin.ExitUsage
		}
	}
	secret, err := peerSecret()
	if err != nil {
		fmt.Fprintln(stderr, "rgit-admin:", err)
		return admin.ExitUsage
	}
	r, err := send(*addr, tc, secret, command, args, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "rgit-admin:", err)
	}
	if *asJSON {
		printJSON(stdout, r, err)
	} else if err == nil && r.Text() != "" {
		fmt.Fprintln(stdout, r.Text())
	}
	return admin.ExitCode(err)
}

// wantsHelp reports whether a command's arguments ask for its usage
// (-h, -help or --help before any "--").
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// commandHelp prints one command's usage and description.
func commandHelp(command string, stdout, stderr io.Writer) int {
	if h, ok := admin.Help(command); ok {
		fmt.Fprintln(stdout, h)
		return admin.ExitOK
	}
	for _, c := range local {
		if c[0] == command {
			fmt.Fprintf(stdout, "usage: rgit-admin %s %s\n\n%s\n", c[0], c[1], c[2])
			return admin.ExitOK
		}
	}
	fmt.Fprintf(stderr, "rgit-admin: unknown command %q (rgit-admin help lists them)\n", command)
	return admin.ExitUsage
}

// send parses the command line into its message and sends it to the node
// at addr.
func send(addr string, tc *peertls.Config, secret, command string, args []string, progress io.Writer) (admin.Result, error) {
	m, err := admin.Parse(command, args)
	if err != nil {
		return nil, err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return admin.Do(ctx, addr, tc, secret, m, progress)
}

// printJSON prints the answer as one JSON object: the command's reply
// ({"output": …} for a line of text), or {"error": …, "code": …}.
func printJSON(w io.Writer, r admin.Result, err error) {
	var b []byte
	if err != nil {
		b, _ = json.Marshal(struct {
			Error string `json:"error"`
			Code  string `json:"code"`
		}{strings.TrimPrefix(err.Error(), admin.ErrCommand.Error()+": "), admin.ErrorCode(err)})
	} else {
		b, _ = json.Marshal(r)
	}
	fmt.Fprintf(w, "%s\n", b)
}

// printVersion prints this client's version and, when the node at addr
// answers, the node's. The client's version goes out first whatever
// happens; a node that cannot be asked is then an error (exit status as
// for any command: 4 unreachable, 3 refused), so scripts can tell.
func printVersion(addr string, tc *peertls.Config, stdout, stderr io.Writer) int {
	fmt.Fprintln(stdout, "rgit-admin", version.Get())
	secret, err := peerSecret()
	if err != nil {
		fmt.Fprintln(stderr, "rgit-admin: no node version:", err)
		return admin.ExitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := admin.Do(ctx, addr, tc, secret, admin.Version{}, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "rgit-admin: no node version:", err)
		return admin.ExitCode(err)
	}
	fmt.Fprintf(stdout, "node %s: rgit %s\n", addr, r.Text())
	return admin.ExitOK
}

// genPeerCerts writes a new peer CA and a peer certificate into args[0]
// (peertls.Generate) and says how to use them.
func genPeerCerts(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: rgit-admin gen-peer-certs <dir>")
		return admin.ExitUsage
	}
	if err := peertls.Generate(args[0], "rgit"); err != nil {
		fmt.Fprintln(stderr, "rgit-admin: gen-peer-certs:", err)
		return admin.ExitFailed
	}
	d := args[0]
	fmt.Fprintf(stdout, "wrote %s, %s, %s and %s\n", filepath.Join(d, peertls.CAFile), filepath.Join(d, peertls.CAKeyFile),
		filepath.Join(d, peertls.PeerFile), filepath.Join(d, peertls.PeerKeyFile))
	fmt.Fprintf(stdout, "set %s=%s %s=%s %s=%s on every node and for rgit-admin; keep %s off the cluster\n",
		peertls.EnvCert, filepath.Join(d, peertls.PeerFile), peertls.EnvKey, filepath.Join(d, peertls.PeerKeyFile),
		peertls.EnvCA, filepath.Join(d, peertls.CAFile), peertls.CAKeyFile)
	return admin.ExitOK
}

// peerSecret is RGIT_PEER_SECRET, or the secret a single node generated in
// its cache directory.
func peerSecret() (string, error) {
	if s := os.Getenv("RGIT_PEER_SECRET"); s != "" {
		return s, nil
	}
	path := filepath.Join(envOr("RGIT_CACHE_DIR", "./cache"), "peer_secret")
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("no RGIT_PEER_SECRET and no generated secret at %s: %w", path, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// readKeyFile replaces the key-file argument of add-key and add-deploy-key
// (the second one that is not a flag) with the file's contents: their
// messages carry the key itself.
func readKeyFile(args []string) error {
	n := 0
	for i, a := range args {
		if strings.HasPrefix(a, "--") {
			continue
		}
		if n++; n == 2 {
			key, err := os.ReadFile(a)
			if err != nil {
				return err
			}
			args[i] = string(key)
			return nil
		}
	}
	return nil
}
