package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/testkit/attack"
	"github.com/rgit/rgit/testkit/gitrun"
)

// slowClients times a real fetch while slow clients hold connections.
func (h *hostile) slowClients(ctx context.Context) (bool, error) {
	n, err := h.startNode(ctx)
	if err != nil {
		return false, err
	}
	defer n.kill()
	const repo = "slow"
	if err := n.createPublic(ctx, repo); err != nil {
		return false, err
	}
	src, clone := filepath.Join(h.work, "slow-src"), filepath.Join(h.work, "slow-clone")
	commit := func(msg string) error {
		if err := os.WriteFile(filepath.Join(src, msg), []byte(msg+"\n"), 0o644); err != nil {
			return err
		}
		for _, args := range [][]string{{"add", msg}, {"commit", "-q", "-m", msg}, {"push", "-q", n.url(h.token, repo), "main"}} {
			if _, err := h.git.Output(ctx, src, nil, args...); err != nil {
				return err
			}
		}
		return nil
	}
	if _, err := h.git.Output(ctx, "", nil, "init", "-q", "-b", "main", src); err != nil {
		return false, err
	}
	if err := commit("one"); err != nil {
		return false, err
	}
	public := "http://" + n.httpAddr + "/" + benchOwner + "/" + repo + ".git"
	if _, err := h.git.Output(ctx, "", nil, "clone", "-q", public, clone); err != nil {
		return false, err
	}
	if err := commit("two"); err != nil {
		return false, err
	}

	signer, err := newSSHSigner() // a key the node does not know: anonymous
	if err != nil {
		return false, err
	}
	holdCtx, release := context.WithCancel(ctx)
	defer release()
	clients := make([]*slowClient, h.flags.clients)
	var ready sync.WaitGroup
	for i := range clients {
		ready.Add(1)
		// Each slow client from its own loopback address, as many
		// attackers would come: the per-address cap of unauthenticated
		// connections is not what this measures (the honest fetch comes
		// from 127.0.0.1).
		from := sourceAddr(i)
		if i%2 == 0 {
			clients[i] = slowSSH(holdCtx, from, n.sshAddr, signer, "git-upload-pack '"+benchOwner+"/"+repo+".git'", h.flags.interval, ready.Done)
		} else {
			clients[i] = slowHTTP(holdCtx, from, public+"/git-upload-pack", h.flags.interval, ready.Done)
		}
	}
	if !waitGroupTimeout(&ready, 30*time.Second) {
		fmt.Fprintln(os.Stderr, "  note op=slow-clients: not every slow client was connected after 30 s")
	}

	fetchTimeout := 60 * time.Second
	if h.flags.quick {
		fetchTimeout = 20 * time.Second
	}
	fctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	cmd := h.git.Command(fctx, clone, "fetch", "-q", "origin")
	// git's transport helper keeps the output open after git is killed.
	cmd.WaitDelay = time.Second
	start := time.Now()
	r := gitrun.Exec(cmd)
	secs := time.Since(start).Seconds()
	timedOut := fctx.Err() != nil
	cancel()
	var ferr error
	if !r.OK() {
		ferr = fmt.Errorf("git fetch: %w: %s", r.Err, strings.TrimSpace(r.Stderr))
	}
	var heldSSH, heldHTTP int
	for i, c := range clients {
		if !c.closed.Load() {
			if i%2 == 0 {
				heldSSH++
			} else {
				heldHTTP++
			}
		}
	}
	release()
	fetch := "ok"
	switch {
	case timedOut:
		fetch = "timeout"
	case ferr != nil:
		fetch = "failed"
		fmt.Fprintf(os.Stderr, "  note op=slow-clients fetch error=%q\n", ferr)
	}
	ok := ferr == nil && secs <= slowFetchTargetS
	fmt.Printf("hostile op=slow-clients clients=%d fetch_s=%.2f target_s=%d ok=%t fetch=%s held_ssh=%d held_http=%d\n",
		h.flags.clients, secs, slowFetchTargetS, ok, fetch, heldSSH, heldHTTP)
	return ok, nil
}

// slowClient is one connection sending a fetch request a byte at a time;
// closed is set once the node has ended it.
type slowClient struct {
	closed atomic.Bool
}

// sourceAddr dials from the i-th address of 127.0.1.0/24 (every 127/8
// address is the loopback interface's on Linux).
func sourceAddr(i int) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(1+i%254))}, Timeout: 10 * time.Second}
}

// dialSSH opens an SSH client connection to addr through d.
func dialSSH(ctx context.Context, d *net.Dialer, addr string, signer ssh.Signer) (*ssh.Client, error) {
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	cc, chans, reqs, err := ssh.NewClientConn(nc, addr, sshClientConfig(signer))
	if err != nil {
		nc.Close()
		return nil, err
	}
	return ssh.NewClient(cc, chans, reqs), nil
}

// slowPrefix is the start of a v0 want line (0x32 bytes in all); the rest
// follows one byte per interval.
const slowPrefix = "0032want "

// trickle writes slowPrefix to w, calls ready, then writes one byte every
// interval until ctx ends or a write fails; it calls ready on failure too.
func trickle(ctx context.Context, w io.Writer, interval time.Duration, ready func()) {
	var once sync.Once
	defer once.Do(ready)
	if _, err := io.WriteString(w, slowPrefix); err != nil {
		return
	}
	once.Do(ready)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := w.Write([]byte("0")); err != nil {
				return
			}
		}
	}
}

// slowSSH opens an SSH session running command and trickles a request
// into it.
func slowSSH(ctx context.Context, from *net.Dialer, addr string, signer ssh.Signer, command string, interval time.Duration, ready func()) *slowClient {
	c := &slowClient{}
	go func() {
		conn, err := dialSSH(ctx, from, addr, signer)
		if err != nil {
			c.closed.Store(true)
			ready()
			fmt.Fprintf(os.Stderr, "  note op=slow-clients ssh dial error=%q\n", err)
			return
		}
		defer conn.Close()
		sess, err := conn.NewSession()
		if err != nil {
			c.closed.Store(true)
			ready()
			return
		}
		defer sess.Close()
		stdin, err1 := sess.StdinPipe()
		stdout, err2 := sess.StdoutPipe()
		if err := errors.Join(err1, err2, sess.Start(command)); err != nil {
			c.closed.Store(true)
			ready()
			return
		}
		tctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() {
			io.Copy(io.Discard, stdout) // the advertisement, then the node's end
			c.closed.Store(true)
			stop()
		}()
		trickle(tctx, stdin, interval, ready)
	}()
	return c
}

// slowHTTP posts a chunked request body to url and trickles it.
func slowHTTP(ctx context.Context, from *net.Dialer, url string, interval time.Duration, ready func()) *slowClient {
	c := &slowClient{}
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, pr)
	if err != nil {
		ready()
		c.closed.Store(true)
		return c
	}
	req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: from.DialContext}}
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		resp, err := client.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		c.closed.Store(true)
		pr.CloseWithError(errors.New("answered"))
	}()
	go func() {
		tctx, stop := context.WithCancel(ctx)
		go func() { <-answered; stop() }()
		trickle(tctx, pw, interval, ready)
		pw.Close()
	}()
	return c
}

// deltaBomb pushes the delta bombs at once and reads the node's peak.
func (h *hostile) deltaBomb(ctx context.Context) (bool, error) {
	n, err := h.startNode(ctx)
	if err != nil {
		return false, err
	}
	defer n.kill()
	const repo = "bomb"
	if _, err := n.admin(ctx, "create-repo", benchOwner+"/"+repo); err != nil {
		return false, err
	}
	signer, err := newSSHSigner()
	if err != nil {
		return false, err
	}
	if _, err := n.admin(ctx, "add-key", benchOwner, string(ssh.MarshalAuthorizedKey(signer.PublicKey()))); err != nil {
		return false, err
	}
	const baseSize = 16 << 20
	pack, blob := attack.DeltaBomb(baseSize, h.flags.copies)
	fmt.Fprintf(os.Stderr, "  note op=deltabomb pack_bytes=%d declared_mb=%d\n", len(pack), baseSize*h.flags.copies>>20)

	w := watchRSS(n, h.flags.guardMB<<10)
	answers := make([]string, h.flags.pushes)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := fmt.Sprintf("%s %s refs/heads/bomb%d", object.ID{}, blob, i)
			body := attack.ReceivePackRequest("report-status", []string{cmd}, pack)
			var err error
			if i%2 == 0 {
				answers[i], err = pushHTTP(ctx, n, h.token, repo, body)
			} else {
				answers[i], err = pushSSH(n.sshAddr, signer, repo, body)
			}
			if err != nil {
				answers[i] = "error: " + err.Error()
			}
		}()
	}
	wg.Wait()
	seen := w.stop()
	refused, limit := bombVerdict(answers)
	for i, a := range answers {
		fmt.Fprintf(os.Stderr, "  note op=deltabomb push=%d answer=%q\n", i, firstLine(a))
	}
	peak := kbToMB(seen.peakKB)
	ok := !seen.killed && refused == h.flags.pushes && limit == "RGIT_MAX_OBJECT_SIZE" && peak <= deltaBombTarget
	killed := ""
	if seen.killed {
		killed = " killed=rss"
	}
	fmt.Printf("hostile op=deltabomb pushes=%d peak_rss_mb=%.0f refused=%d limit=%s target_mb=%d ok=%t%s\n",
		h.flags.pushes, peak, refused, limit, deltaBombTarget, ok, killed)
	return ok, nil
}

var settingRE = regexp.MustCompile(`set (RGIT_[A-Z_]+)`)

// bombVerdict counts the pushes the node refused (an unpack error) and
// names the setting their refusals name: "none" when one names none or
// they differ.
func bombVerdict(answers []string) (refused int, limit string) {
	for _, a := range answers {
		if !strings.Contains(a, "unpack ") || strings.Contains(a, "unpack ok") {
			continue
		}
		refused++
		m := settingRE.FindStringSubmatch(a)
		switch {
		case m == nil || (limit != "" && limit != m[1]):
			limit = "none"
		case limit == "":
			limit = m[1]
		}
	}
	if limit == "" {
		limit = "none"
	}
	return refused, limit
}

// firstLine is the unpack line of a receive-pack answer, or its start.
func firstLine(a string) string {
	if i := strings.Index(a, "unpack "); i >= 0 {
		a = a[i:]
	}
	if i := strings.IndexByte(a, '\n'); i >= 0 {
		a = a[:i]
	}
	return a
}

// pushHTTP posts a receive-pack request as benchOwner and returns the
// answer.
func pushHTTP(ctx context.Context, n *hostileNode, token, repo string, body []byte) (string, error) {
	url := "http://" + n.httpAddr + "/" + benchOwner + "/" + repo + ".git/git-receive-pack"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.SetBasicAuth(benchOwner, token)
	req.Header.Set("Content-Type", "application/x-git-receive-pack-request")
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("HTTP %d: %s", resp.StatusCode, b), err
	}
	return string(b), err
}

// pushSSH sends a receive-pack request over SSH and returns everything
// the node answered (advertisement, then the report).
func pushSSH(addr string, signer ssh.Signer, repo string, body []byte) (string, error) {
	conn, err := ssh.Dial("tcp", addr, sshClientConfig(signer))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	sess, err := conn.NewSession()
	if err != nil {
		return "", err
	}
	defer sess.Close()
	sess.Stdin = bytes.NewReader(body)
	out, err := sess.Output("git-receive-pack '" + benchOwner + "/" + repo + ".git'")
	return string(out), err
}

func newSSHSigner() (ssh.Signer, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	return ssh.NewSignerFromKey(key)
}

func sshClientConfig(signer ssh.Signer) *ssh.ClientConfig {
	return &ssh.ClientConfig{
		User:            "git",
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), // the bench's own fresh node
		Timeout:         10 * time.Second,
	}
}
