package node_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/testkit/hookrecv"
	"github.com/rgit/rgit/transport/product/admin"
	"github.com/rgit/rgit/transport/product/hooks"
)

// hookFixture is one node with webhooks allowed to loopback, fast
// retries and a short attempt timeout, and alice's credentials.
type hookFixture struct {
	srv        *gitenv.Server
	env        *gitenv.Env
	token      string
	tokenID    string
	key        gitenv.Key
	keyFP      string
	http, ssh  transport
	seq        int
	firstRetry time.Duration
}

const hookSecret = "hook-secret-0123456789abcdef"

func newHookFixture(t *testing.T) *hookFixture {
	f := &hookFixture{firstRetry: 50 * time.Millisecond}
	f.srv = gitenv.StartServer(t, gitenv.FileStore(t), "RGIT_HOOK_ALLOW=127.0.0.0/8", "RGIT_HOOK_BACKOFF_MS=50",
		"RGIT_HOOK_TIMEOUT_SECS=1", "RGIT_HOOK_RETRY_SECS=600", "RGIT_HOOK_SWEEP_SECS=1")
	f.env = gitenv.New(t)
	f.token = f.srv.AddToken(t, "alice")
	f.key = f.env.NewSSHKey(t, "alice")
	f.srv.AddKey(t, "alice", f.key)
	f.srv.AddToken(t, "bob")
	f.tokenID = f.do(t, admin.ListTokens{Owner: "alice"}).(*admin.TokenList).Tokens[0].ID
	f.keyFP = f.do(t, admin.ListKeys{Owner: "alice"}).(*admin.KeyList).Keys[0].Fingerprint
	f.http = transport{name: "http", url: func(r string) string { return f.srv.HTTPURL(f.token, r) }}
	f.ssh = transport{name: "ssh", url: f.srv.SSHURL, env: gitenv.SSHEnv(f.key)}
	return f
}

// do runs an admin message and returns its typed answer.
func (f *hookFixture) do(t *testing.T, m admin.Msg) admin.Result {
	t.Helper()
	r, err := f.try(m)
	if err != nil {
		t.Fatalf("admin %T: %v", m, err)
	}
	return r
}

func (f *hookFixture) try(m admin.Msg) (admin.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return admin.Do(ctx, f.srv.AdminAddr, nil, f.srv.PeerSecret, m, nil)
}

// repoWithHook creates a repository, a receiver and a hook to it for
// events, and returns the repository, a work tree and the receiver.
func (f *hookFixture) repoWithHook(t *testing.T, prefix, events string) (string, string, *hookrecv.Receiver) {
	t.Helper()
	f.seq++
	repo := fmt.Sprintf("alice/%s-%d", prefix, f.seq)
	f.srv.CreateRepo(t, repo)
	rcv, err := hookrecv.Start(hookSecret)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rcv.Close)
	f.do(t, admin.AddHook{Repo: repo, URL: rcv.URL, Secret: hookSecret, Events: events})
	wt := f.env.Scratch(t)
	f.env.RunEnv(t, wt, nil, "remote", "add", "origin", f.http.url(repo))
	return repo, wt, rcv
}

func (f *hookFixture) commit(t *testing.T, wt, msg string) string {
	t.Helper()
	return f.env.Commit(t, wt, msg, map[string]string{"f.txt": msg + "\n"})
}

func (f *hookFixture) push(t *testing.T, tr transport, wt string, args ...string) {
	t.Helper()
	f.env.RunEnv(t, wt, tr.env, append([]string{"push", "-q", tr.url(f.repoOf(wt))}, args...)...)
}

// repoOf is the repository wt's origin names.
func (f *hookFixture) repoOf(wt string) string {
	url := strings.TrimSpace(f.env.Command(wt, nil, "git", "remote", "get-url", "origin").Stdout)
	i := strings.Index(url, "/alice/")
	return strings.TrimSuffix(url[i+1:], ".git")
}

// received waits until n deliveries answered OK have arrived (all of them
// signed correctly) and returns them decoded.
func received(t *testing.T, rcv *hookrecv.Receiver, n int) []hooks.Payload {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := rcv.Wait(ctx, func([]hookrecv.Delivery) bool { return len(rcv.Received()) >= n }); err != nil {
		t.Fatalf("waiting for %d deliveries: %v", n, err)
	}
	var out []hooks.Payload
	for _, d := range rcv.Received() {
		var p hooks.Payload
		if err := d.Decode(&p); err != nil || !d.SignatureOK || p.Delivery != d.ID || p.Event != d.Event {
			t.Fatalf("delivery %s (%s): signature ok %v, decode %v, payload %+v", d.ID, d.Event, d.SignatureOK, err, p)
		}
		out = append(out, p)
	}
	return out
}

func describe(ps []hooks.Payload) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%s %s", p.Event, p.Ref)
		if p.Created != nil && *p.Created {
			b.WriteString(" created")
		}
		if p.Deleted != nil && *p.Deleted {
			b.WriteString(" deleted")
		}
		if p.Forced != nil && *p.Forced {
			b.WriteString(" forced")
		}
		if p.Commits != nil {
			fmt.Fprintf(&b, " commits=%d", len(p.Commits))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestWebhooks: pushes over HTTP and SSH and tag creation and deletion
// are announced, signed, with the pusher's credential and the new
// commits; a push refused by branch protection announces nothing;
// visibility and access changes are announced; redeliver sends a
// delivery again under its id; a receiver that is down is retried with a
// growing backoff until it is back; one that hangs is cut off at the
// timeout and retried.
func TestWebhooks(t *testing.T) {
	f := newHookFixture(t)

	t.Run("pushes", func(t *testing.T) {
		repo, wt, rcv := f.repoWithHook(t, "push", "push,create,delete,tag")
		f.commit(t, wt, "one")
		f.commit(t, wt, "two")
		c3 := f.commit(t, wt, "three")
		f.push(t, f.http, wt, "HEAD:refs/heads/main")
		got := received(t, rcv, 2)
		if want := "push refs/heads/main created commits=3\ncreate refs/heads/main created\n"; describe(got) != want {
			t.Fatalf("after the first push:\n%swant\n%s", describe(got), want)
		}
		p := got[0]
		if p.Repository.FullName != repo || p.After != c3 || p.Before != strings.Repeat("0", 40) || p.RefType != "branch" ||
			p.Pusher == nil || p.Pusher.User != "alice" || p.Pusher.TokenID != f.tokenID || *p.Truncated {
			t.Errorf("push payload %+v pusher %+v", p, p.Pusher)
		}
		if c := p.Commits[0]; c.ID != c3 || strings.TrimSpace(c.Message) != "three" || c.Author.Email == "" || c.Timestamp == "" {
			t.Errorf("newest commit %+v", c)
		}
		if got[0].Delivery == got[1].Delivery {
			t.Error("two events share a delivery id")
		}

		// Over SSH: the pusher is the key.
		c4 := f.commit(t, wt, "four")
		f.push(t, f.ssh, wt, "HEAD:refs/heads/main")
		got = received(t, rcv, 3)
		if p := got[2]; p.Event != "push" || p.Before != c3 || p.After != c4 || *p.Forced || len(p.Commits) != 1 ||
			p.Pusher.Key != f.keyFP || p.Pusher.TokenID != "" {
			t.Errorf("ssh push: %s pusher %+v", describe(got[2:]), p.Pusher)
		}

		// A forced update says so.
		f.env.RunEnv(t, wt, nil, "reset", "-q", "--hard", "HEAD~1")
		c5 := f.commit(t, wt, "five")
		f.push(t, f.http, wt, "-f", "HEAD:refs/heads/main")
		got = received(t, rcv, 4)
		if p := got[3]; p.Before != c4 || p.After != c5 || !*p.Forced || len(p.Commits) != 1 {
			t.Errorf("forced push: %s", describe(got[3:]))
		}

		// Tags: created and deleted.
		f.env.RunEnv(t, wt, nil, "tag", "-a", "-m", "release", "v1")
		f.push(t, f.ssh, wt, "refs/tags/v1")
		f.push(t, f.http, wt, ":refs/tags/v1")
		got = received(t, rcv, 10)
		want := "push refs/tags/v1 created commits=0\ncreate refs/tags/v1 created\ntag refs/tags/v1 created\n" +
			"push refs/tags/v1 deleted commits=0\ndelete refs/tags/v1 deleted\ntag refs/tags/v1 deleted\n"
		if describe(got[4:]) != want {
			t.Errorf("tag events:\n%swant\n%s", describe(got[4:]), want)
		}

		// A push refused by protection has no event: the next accepted
		// push's event comes right after the tag's.
		f.do(t, admin.Protect{Repo: repo, Pattern: "refs/heads/main", NoForcePush: true})
		f.env.RunEnv(t, wt, nil, "reset", "-q", "--hard", "HEAD~1")
		f.commit(t, wt, "six")
		if r := f.env.TryEnv(wt, nil, "push", "-f", f.http.url(repo), "HEAD:refs/heads/main"); r.OK() || !strings.Contains(r.Stderr, "protected") {
			t.Fatalf("force push to a protected branch: %s", r)
		}
		f.push(t, f.http, wt, "HEAD:refs/heads/after")
		got = received(t, rcv, 12)
		if want := "push refs/heads/after created commits=1\ncreate refs/heads/after created\n"; describe(got[10:]) != want {
			t.Errorf("after the refused push:\n%swant\n%s", describe(got[10:]), want)
		}
		if n := len(rcv.All()); n != 12 {
			t.Errorf("%d requests arrived, want 12: an event of the refused push was sent", n)
		}

		// redeliver: the same delivery id again, marked in the listing.
		// (Its commits are walked again: a new ref's are those no other
		// ref reaches when it is delivered.)
		first := got[0].Delivery
		f.do(t, admin.Redeliver{Repo: repo, ID: first})
		got = received(t, rcv, 13)
		if got[12].Delivery != first || got[12].After != c3 {
			t.Errorf("redelivered %s %s, want %s", got[12].Delivery, describe(got[12:]), first)
		}
		f.waitListed(t, repo, func(ds []admin.DeliveryInfo) bool {
			return len(ds) > 0 && ds[0].ID == first && ds[0].Redelivered && ds[0].State == "delivered"
		})
		if _, err := f.try(admin.Redeliver{Repo: repo, ID: "no-such-delivery"}); !isCode(err, admin.CodeNotFound) {
			t.Errorf("redeliver of an unknown id: %v", err)
		}
	})

	t.Run("settings", func(t *testing.T) {
		repo, _, rcv := f.repoWithHook(t, "settings", "visibility,access")
		f.do(t, admin.SetVisibility{Repo: repo, Visibility: "public"})
		f.do(t, admin.Grant{Repo: repo, User: "bob", Role: "write"})
		f.do(t, admin.Protect{Repo: repo, Pattern: "refs/heads/main", As: "alice"})
		f.do(t, admin.Revoke{Repo: repo, User: "bob", As: "alice"})
		got := received(t, rcv, 4)
		var lines []string
		for _, p := range got {
			s := p.Event + " " + p.Visibility
			if p.Access != nil {
				s += fmt.Sprintf("%s %s %s %s", p.Access.Action, p.Access.User, p.Access.Role, p.Access.Pattern)
			}
			lines = append(lines, strings.TrimSpace(s)+" by "+p.Sender.User)
		}
		want := "visibility public by rgit-admin|access grant bob write by rgit-admin|access protect   refs/heads/main by alice|access revoke bob by alice"
		if got := strings.Join(lines, "|"); got != want {
			t.Errorf("settings events:\n%s\nwant\n%s", got, want)
		}
	})

	t.Run("receiver down, then back", func(t *testing.T) {
		_, wt, rcv := f.repoWithHook(t, "down", "push")
		rcv.SetMode(hookrecv.Drop)
		f.commit(t, wt, "one")
		f.push(t, f.http, wt, "HEAD:refs/heads/main")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		all, err := rcv.Wait(ctx, func(ds []hookrecv.Delivery) bool { return len(ds) >= 5 })
		if err != nil {
			t.Fatal(err)
		}
		// Exponential backoff: the first retry waits half to all of the
		// first wait, the fourth half to all of eight times it.
		if gap := all[1].At.Sub(all[0].At); gap < f.firstRetry/2 {
			t.Errorf("first retry after %v, want at least %v", gap, f.firstRetry/2)
		}
		if gap := all[4].At.Sub(all[3].At); gap < 4*f.firstRetry {
			t.Errorf("fourth retry after %v, want at least %v", gap, 4*f.firstRetry)
		}
		for _, d := range all {
			if d.ID != all[0].ID {
				t.Fatalf("attempts carry ids %s and %s", all[0].ID, d.ID)
			}
		}
		rcv.SetMode(hookrecv.OK)
		got := received(t, rcv, 1)
		if got[0].Delivery != all[0].ID {
			t.Errorf("delivered %s, want %s", got[0].Delivery, all[0].ID)
		}
		f.waitListed(t, f.repoOf(wt), func(ds []admin.DeliveryInfo) bool {
			return ds[0].State == "delivered" && ds[0].Attempts >= 6 && ds[0].Status == 204
		})
	})

	t.Run("receiver hangs", func(t *testing.T) {
		_, wt, rcv := f.repoWithHook(t, "hang", "push")
		rcv.SetMode(hookrecv.Hang)
		f.commit(t, wt, "one")
		f.push(t, f.http, wt, "HEAD:refs/heads/main")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// A second attempt comes only after the first was cut off and
		// recorded.
		if _, err := rcv.Wait(ctx, func(ds []hookrecv.Delivery) bool { return len(ds) >= 2 }); err != nil {
			t.Fatal(err)
		}
		l := f.do(t, admin.ListDeliveries{Repo: f.repoOf(wt)}).(*admin.DeliveryList)
		if d := l.Deliveries[0]; d.Attempts < 1 || !strings.HasPrefix(d.Error, "timeout") || d.Millis > 3000 {
			t.Errorf("after a hanging attempt: %+v", d)
		}
		rcv.SetMode(hookrecv.OK)
		received(t, rcv, 1)
	})

	t.Run("resumed after a restart without traffic", func(t *testing.T) {
		_, wt, rcv := f.repoWithHook(t, "restart", "push")
		rcv.SetMode(hookrecv.Fail)
		f.commit(t, wt, "one")
		f.push(t, f.http, wt, "HEAD:refs/heads/main")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := rcv.Wait(ctx, func(ds []hookrecv.Delivery) bool { return len(ds) >= 1 }); err != nil {
			t.Fatal(err)
		}
		// Nothing touches the repository after the restart: the sweep
		// finds its marker and opens it.
		f.srv.Restart(t)
		rcv.SetMode(hookrecv.OK)
		received(t, rcv, 1)
	})

	t.Run("admin", func(t *testing.T) {
		repo, _, rcv := f.repoWithHook(t, "admin", "push")
		// A generated secret is shown once, never listed, never logged.
		added := f.do(t, admin.AddHook{Repo: repo, URL: "http://[::1]:9/hook"}).(*admin.HookAdded)
		if len(added.Secret) != 64 || !strings.Contains(added.Text(), added.Secret) {
			t.Fatalf("add-hook without a secret: %+v", added)
		}
		list := f.do(t, admin.ListHooks{Repo: repo}).(*admin.HookList)
		if len(list.Hooks) != 2 || strings.Contains(list.Text(), added.Secret) || strings.Contains(list.Text(), hookSecret) {
			t.Fatalf("list-hooks: %s", list.Text())
		}
		// test-hook pings now: to the receiver it arrives signed; to an
		// address outside RGIT_HOOK_ALLOW it is refused before connecting.
		id := list.Hooks[0].ID
		if id == added.Hook.ID {
			id = list.Hooks[1].ID
		}
		ok := f.do(t, admin.TestHook{Repo: repo, ID: id}).(*admin.HookTested)
		if !ok.OK || ok.Status != 204 {
			t.Errorf("test-hook: %+v", ok)
		}
		if got := received(t, rcv, 1); got[0].Event != "ping" {
			t.Errorf("ping arrived as %q", got[0].Event)
		}
		blocked := f.do(t, admin.TestHook{Repo: repo, ID: added.Hook.ID}).(*admin.HookTested)
		if blocked.OK || !strings.Contains(blocked.Error, "not allowed") {
			t.Errorf("test-hook to ::1: %+v", blocked)
		}
		for _, c := range []struct {
			m    admin.Msg
			code string
		}{
			{admin.AddHook{Repo: repo, URL: "ftp://example.com/"}, admin.CodeUsage},
			{admin.AddHook{Repo: repo, URL: "http://example.com/", Events: "pushes"}, admin.CodeUsage},
			{admin.AddHook{Repo: repo, URL: "http://example.com/", As: "bob"}, admin.CodeNotFound}, // bob may not read it: missing
			{admin.ListHooks{Repo: "alice/nope"}, admin.CodeNotFound},
			{admin.RemoveHook{Repo: repo, ID: "x"}, admin.CodeUsage},
			{admin.RemoveHook{Repo: repo, ID: "0123456789abcdef"}, admin.CodeNotFound},
			{admin.ListDeliveries{Repo: repo, Hook: "0123456789abcdef"}, admin.CodeNotFound},
		} {
			if _, err := f.try(c.m); !isCode(err, c.code) {
				t.Errorf("%T %+v: %v, want code %s", c.m, c.m, err, c.code)
			}
		}
		f.do(t, admin.RemoveHook{Repo: repo, ID: added.Hook.ID})
		if list := f.do(t, admin.ListHooks{Repo: repo}).(*admin.HookList); len(list.Hooks) != 1 {
			t.Errorf("after remove-hook: %s", list.Text())
		}
		logs := f.srv.LogTail(1 << 20)
		if strings.Contains(logs, added.Secret) || strings.Contains(logs, hookSecret) {
			t.Error("a hook secret is in the node's log")
		}
	})
}

// waitListed polls deliveries until cond holds for its list (the worker
// records an attempt just after the receiver has answered it).
func (f *hookFixture) waitListed(t *testing.T, repo string, cond func([]admin.DeliveryInfo) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		l := f.do(t, admin.ListDeliveries{Repo: repo}).(*admin.DeliveryList)
		if cond(l.Deliveries) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries of %s never matched:\n%s", repo, l.Text())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func isCode(err error, code string) bool {
	var ce *admin.CommandError
	return errors.As(err, &ce) && ce.Code == code
}
