package gitproto

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/rgit/rgit/transport/wire/pktline"
)

// pkt encodes data packets; "0000", "0001" and "0002" pass through as the
// special packets.
func pkt(lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		switch l {
		case "0000", "0001", "0002":
			b.WriteString(l)
		default:
			fmt.Fprintf(&b, "%04x%s", len(l)+4, l)
		}
	}
	return b.String()
}

type serveFunc func(context.Context, Backend, io.Reader, io.Writer, Options) error

func serve(t *testing.T, f serveFunc, dir, in string, opt Options) (string, error) {
	t.Helper()
	if opt.Agent == "" {
		opt.Agent = "rgit-test/1"
	}
	var out bytes.Buffer
	err := f(context.Background(), &gitRepo{dir: dir}, strings.NewReader(in), &out, opt)
	return out.String(), err
}

// splitAtPack returns the response text before the side-band pack and
// checks that what follows is a side-band stream carrying a pack and
// ending in a flush.
func splitAtPack(t *testing.T, out, marker string) string {
	t.Helper()
	i := strings.Index(out, marker)
	if i < 0 {
		t.Fatalf("no %q in response %q", marker, out)
	}
	head, rest := out[:i+len(marker)], out[i+len(marker):]
	r := pktline.NewReader(strings.NewReader(rest))
	var pack []byte
	for {
		k, p, err := r.ReadPacket()
		if err != nil {
			t.Fatalf("side-band stream: %v", err)
		}
		if k == pktline.Flush {
			break
		}
		if k != pktline.Data || len(p) == 0 || p[0] < 1 || p[0] > 2 {
			t.Fatalf("bad side-band packet %v %q", k, p)
		}
		if p[0] == 1 {
			pack = append(pack, p[1:]...)
		}
	}
	if !bytes.HasPrefix(pack, []byte("PACK")) {
		t.Fatalf("band 1 does not carry a pack: %q", pack[:min(len(pack), 16)])
	}
	return head
}

func TestStatelessV2(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	main, main2 := rev(t, src, "main"), rev(t, src, "main~2")
	v1, v1c := rev(t, src, "v1"), rev(t, src, "v1^{}")
	v2, v2c := rev(t, src, "v2"), rev(t, src, "v2^{}")
	vf, vfc := rev(t, src, "vf"), rev(t, src, "vf^{}")
	opt := Options{Protocol: 2, StatelessRPC: true}

	t.Run("advertise", func(t *testing.T) {
		out, err := serve(t, UploadPack, src, "", Options{Protocol: 2, StatelessRPC: true, AdvertiseOnly: true})
		want := pkt("version 2\n", "agent=rgit-test/1\n", "ls-refs=unborn\n",
			"fetch=shallow wait-for-done filter ref-in-want\n", "server-option\n", "object-format=sha1\n", "0000")
		if err != nil || out != want {
			t.Fatalf("got %q, %v\nwant %q", out, err, want)
		}
	})
	t.Run("ls-refs", func(t *testing.T) {
		in := pkt("command=ls-refs\n", "agent=git/2.39.5\n", "object-format=sha1\n", "0001",
			"symrefs\n", "peel\n", "ref-prefix HEAD\n", "ref-prefix refs/tags/v\n", "0000")
		out, err := serve(t, UploadPack, src, in, opt)
		want := pkt(main+" HEAD symref-target:refs/heads/main\n",
			v1+" refs/tags/v1 peeled:"+v1c+"\n", v2+" refs/tags/v2 peeled:"+v2c+"\n", vf+" refs/tags/vf peeled:"+vfc+"\n", "0000")
		if err != nil || out != want {
			t.Fatalf("got %q, %v\nwant %q", out, err, want)
		}
	})
	t.Run("ls-refs unborn", func(t *testing.T) {
		in := pkt("command=ls-refs\n", "0001", "symrefs\n", "unborn\n", "0000")
		out, err := serve(t, UploadPack, emptyRepo(t, "refs/heads/trunk"), in, opt)
		if want := pkt("unborn HEAD symref-target:refs/heads/trunk\n", "0000"); err != nil || out != want {
			t.Fatalf("got %q, %v, want %q", out, err, want)
		}
	})
	t.Run("ack ready", func(t *testing.T) {
		in := pkt("command=fetch\n", "0001", "thin-pack\n", "ofs-delta\n", "want "+main+"\n", "have "+main2+"\n", "0000")
		out, err := serve(t, UploadPack, src, in, opt)
		if err != nil {
			t.Fatal(err)
		}
		head := splitAtPack(t, out, pkt("packfile\n"))
		if want := pkt("acknowledgments\n", "ACK "+main2+"\n", "ready\n", "0001", "packfile\n"); head != want {
			t.Fatalf("got %q\nwant %q", head, want)
		}
	})
	t.Run("nak", func(t *testing.T) {
		in := pkt("command=fetch\n", "0001", "want "+main+"\n", "have "+strings.Repeat("ab", 20)+"\n", "0000")
		out, err := serve(t, UploadPack, src, in, opt)
		if want := pkt("acknowledgments\n", "NAK\n", "0000"); err != nil || out != want {
			t.Fatalf("got %q, %v, want %q", out, err, want)
		}
	})
	t.Run("wait-for-done", func(t *testing.T) {
		in := pkt("command=fetch\n", "0001", "wait-for-done\n", "want "+main+"\n", "have "+main2+"\n", "0000")
		out, err := serve(t, UploadPack, src, in, opt)
		if want := pkt("acknowledgments\n", "ACK "+main2+"\n", "0000"); err != nil || out != want {
			t.Fatalf("got %q, %v, want %q", out, err, want)
		}
	})
	t.Run("want-ref and shallow", func(t *testing.T) {
		in := pkt("command=fetch\n", "0001", "no-progress\n", "want-ref refs/heads/main\n", "deepen 1\n", "done\n", "0000")
		out, err := serve(t, UploadPack, src, in, opt)
		if err != nil {
			t.Fatal(err)
		}
		head := splitAtPack(t, out, pkt("packfile\n"))
		want := pkt("shallow-info\n", "shallow "+main+"\n", "0001", "wanted-refs\n", main+" refs/heads/main\n", "0001", "packfile\n")
		if head != want {
			t.Fatalf("got %q\nwant %q", head, want)
		}
	})
	t.Run("session ends on flush", func(t *testing.T) {
		out, err := serve(t, UploadPack, src, "0000", Options{Protocol: 2})
		if err != nil || !strings.HasSuffix(out, "object-format=sha1\n0000") {
			t.Fatalf("got %q, %v", out, err)
		}
	})
}

func TestStatelessV0(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	main, main2 := rev(t, src, "main"), rev(t, src, "main~2")
	feature := rev(t, src, "feature")
	opt := Options{StatelessRPC: true}

	t.Run("advertise", func(t *testing.T) {
		out, err := serve(t, UploadPack, src, "", Options{StatelessRPC: true, AdvertiseOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		caps := "multi_ack thin-pack side-band side-band-64k ofs-delta shallow deepen-since deepen-not deepen-relative no-progress include-tag multi_ack_detailed allow-tip-sha1-in-want allow-reachable-sha1-in-want no-done filter object-format=sha1 symref=HEAD:refs/heads/main agent=rgit-test/1"
		want := pkt(main+" HEAD\x00"+caps+"\n", feature+" refs/heads/feature\n", main+" refs/heads/main\n")
		if !strings.HasPrefix(out, want) || !strings.Contains(out, pkt(rev(t, src, "v1^{}")+" refs/tags/v1^{}\n")) || !strings.HasSuffix(out, "0000") {
			t.Fatalf("got %q\nwant prefix %q", out, want)
		}
	})
	t.Run("version 1 empty", func(t *testing.T) {
		out, err := serve(t, UploadPack, emptyRepo(t, "refs/heads/main"), "", Options{Protocol: 1, StatelessRPC: true, AdvertiseOnly: true})
		want := pkt("version 1\n", strings.Repeat("0", 40)+" capabilities^{}\x00"+strings.Join(v0UploadCapabilities, " ")+" agent=rgit-test/1\n", "0000")
		if err != nil || out != want {
			t.Fatalf("got %q, %v\nwant %q", out, err, want)
		}
	})
	wantLine := "want " + main + " multi_ack_detailed side-band-64k ofs-delta no-progress\n"
	t.Run("round without done", func(t *testing.T) {
		in := pkt(wantLine, "0000", "have "+main2+"\n", "0000")
		out, err := serve(t, UploadPack, src, in, opt)
		want := pkt("ACK "+main2+" common\n", "ACK "+main2+" ready\n", "NAK\n")
		if err != nil || out != want {
			t.Fatalf("got %q, %v\nwant %q", out, err, want)
		}
	})
	t.Run("no-done sends pack after ready", func(t *testing.T) {
		in := pkt("want "+main+" multi_ack_detailed side-band-64k no-done\n", "0000", "have "+main2+"\n", "0000")
		out, err := serve(t, UploadPack, src, in, opt)
		if err != nil {
			t.Fatal(err)
		}
		head := splitAtPack(t, out, pkt("ACK "+main2+"\n"))
		if want := pkt("ACK "+main2+" common\n", "ACK "+main2+" ready\n", "NAK\n", "ACK "+main2+"\n"); head != want {
			t.Fatalf("got %q\nwant %q", head, want)
		}
	})
	t.Run("done", func(t *testing.T) {
		in := pkt(wantLine, "0000", "have "+main2+"\n", "done\n")
		out, err := serve(t, UploadPack, src, in, opt)
		if err != nil {
			t.Fatal(err)
		}
		head := splitAtPack(t, out, pkt("ACK "+main2+"\n"))
		if want := pkt("ACK "+main2+" common\n", "ACK "+main2+"\n"); head != want {
			t.Fatalf("got %q\nwant %q", head, want)
		}
	})
	t.Run("shallow list precedes acks", func(t *testing.T) {
		in := pkt(wantLine, "deepen 2\n", "0000", "done\n")
		out, err := serve(t, UploadPack, src, in, opt)
		if err != nil {
			t.Fatal(err)
		}
		head := splitAtPack(t, out, pkt("NAK\n"))
		if want := pkt("shallow "+rev(t, src, "main~1")+"\n", "0000", "NAK\n"); head != want {
			t.Fatalf("got %q\nwant %q", head, want)
		}
	})
	t.Run("plain pack without side-band", func(t *testing.T) {
		in := pkt("want "+main+"\n", "0000", "done\n")
		out, err := serve(t, UploadPack, src, in, opt)
		if err != nil || !strings.HasPrefix(out, pkt("NAK\n")+"PACK") {
			t.Fatalf("got %q..., %v", out[:min(len(out), 20)], err)
		}
	})
}

func TestStatelessReceivePack(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	feature := rev(t, src, "feature")
	zero := strings.Repeat("0", 40)
	t.Run("advertise empty", func(t *testing.T) {
		out, err := serve(t, ReceivePack, emptyRepo(t, "refs/heads/main"), "", Options{Protocol: 2, StatelessRPC: true, AdvertiseOnly: true})
		want := pkt(zero+" capabilities^{}\x00report-status report-status-v2 delete-refs side-band-64k quiet atomic ofs-delta push-options object-format=sha1 agent=rgit-test/1\n", "0000")
		if err != nil || out != want {
			t.Fatalf("got %q, %v\nwant %q", out, err, want)
		}
	})
	t.Run("advertise has no HEAD or peeled lines", func(t *testing.T) {
		out, err := serve(t, ReceivePack, src, "", Options{StatelessRPC: true, AdvertiseOnly: true})
		if err != nil || strings.Contains(out, " HEAD") || strings.Contains(out, "^{}") || !strings.HasPrefix(out[4:], feature+" refs/heads/feature\x00report-status ") {
			t.Fatalf("got %q, %v", out, err)
		}
	})
	t.Run("delete with report-status", func(t *testing.T) {
		in := pkt(feature+" "+zero+" refs/heads/feature\x00report-status delete-refs\n", "0000")
		out, err := serve(t, ReceivePack, src, in, Options{StatelessRPC: true})
		if want := pkt("unpack ok\n", "ok refs/heads/feature\n", "0000"); err != nil || out != want {
			t.Fatalf("got %q, %v\nwant %q", out, err, want)
		}
	})
	t.Run("funny refname in side-band report", func(t *testing.T) {
		before := refsOf(t, src)
		main := rev(t, src, "main")
		in := pkt(main+" "+zero+" refs/heads/main\x00report-status-v2 side-band-64k quiet\n",
			// Deletes only, so no pack follows.
			main+" "+zero+" refs/heads/a..b\n", main+" "+zero+" refs/heads/x.lock\n", main+" "+zero+" HEAD\n", "0000")
		out, err := serve(t, ReceivePack, src, in, Options{StatelessRPC: true})
		report := pkt("unpack ok\n", "ng refs/heads/main deny deleting current branch\n", "ng refs/heads/a..b funny refname\n",
			"ng refs/heads/x.lock funny refname\n", "ng HEAD funny refname\n", "0000")
		if want := pkt("\x01"+report, "0000"); err != nil || out != want {
			t.Fatalf("got %q, %v\nwant %q", out, err, want)
		}
		if after := refsOf(t, src); after != before {
			t.Fatalf("refs changed")
		}
	})
	t.Run("duplicate ref update rejected as such", func(t *testing.T) {
		before := refsOf(t, src)
		long := "refs/heads/" + strings.Repeat("n", MaxRefNameLen)
		main := rev(t, src, "main")
		in := pkt(feature+" "+zero+" refs/heads/feature\x00report-status delete-refs\n",
			main+" "+zero+" refs/heads/feature\n", main+" "+zero+" refs/heads/nope..x\n", main+" "+zero+" "+long+"\n", "0000")
		out, err := serve(t, ReceivePack, src, in, Options{StatelessRPC: true})
		want := pkt("unpack ok\n", "ng refs/heads/feature ref updated more than once in this push\n",
			"ng refs/heads/feature ref updated more than once in this push\n", "ng refs/heads/nope..x funny refname\n",
			"ng "+long+" refname too long (limit 4096 bytes, fixed)\n", "0000")
		if err != nil || out != want {
			t.Fatalf("got %q, %v\nwant %q", out, err, want)
		}
		if after := refsOf(t, src); after != before {
			t.Fatalf("refs changed")
		}
	})
}

func TestHostileInput(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	main := rev(t, src, "main")
	// A commit no ref reaches.
	dangling := strings.TrimSpace(runGit(t, "", "--git-dir", src, "commit-tree", "-m", "dangling", rev(t, src, "main^{tree}")))
	unknown := strings.Repeat("ab", 20)
	zero := strings.Repeat("0", 40)
	v2 := Options{Protocol: 2, StatelessRPC: true}
	v0 := Options{StatelessRPC: true}
	fetch := func(args ...string) string {
		return pkt("command=fetch\n", "0001") + pkt(args...) + "0000"
	}
	cases := []struct {
		name string
		f    serveFunc
		opt  Options
		in   string
		want string // substring of the response
	}{
		{"giant length", UploadPack, v2, "ffff" + strings.Repeat("x", 100), "ERR pkt-line longer than the git protocol allows (limit 65520 bytes, fixed)"},
		{"giant length in push", ReceivePack, v0, "fff1" + strings.Repeat("x", 100), "ERR pkt-line longer than the git protocol allows (limit 65520 bytes, fixed)"},
		{"giant length in v0 fetch", UploadPack, v0, "fff1" + strings.Repeat("x", 100), "ERR pkt-line longer than the git protocol allows (limit 65520 bytes, fixed)"},
		{"non-hex length", UploadPack, v2, "zz12command=ls-refs\n", "ERR protocol error"},
		{"reserved 0004", UploadPack, v2, "0004", "ERR protocol error"},
		{"reserved 0003", UploadPack, v0, "0003", "ERR protocol error"},
		{"truncated packet", UploadPack, v2, "0040command=ls", "ERR protocol error"},
		{"delim instead of command", UploadPack, v2, "0001", "ERR protocol error: expected command, got delim"},
		{"unknown command", UploadPack, v2, pkt("command=frobnicate\n", "0000"), "ERR invalid command 'frobnicate'"},
		{"unknown capability", UploadPack, v2, pkt("command=fetch\n", "bogus-cap\n", "0000"), "ERR unknown capability"},
		{"sha256 requested", UploadPack, v2, pkt("command=ls-refs\n", "object-format=sha256\n", "0000"), "ERR mismatched object format"},
		{"unexpected ls-refs arg", UploadPack, v2, pkt("command=ls-refs\n", "0001", "frob\n", "0000"), "ERR unexpected line"},
		{"eof in arguments", UploadPack, v2, pkt("command=fetch\n", "0001", "want "+main+"\n"), "ERR protocol error"},
		{"want unknown object", UploadPack, v2, fetch("want "+unknown+"\n", "done\n"), "ERR upload-pack: not our ref " + unknown},
		{"want unreachable object", UploadPack, v2, fetch("want "+dangling+"\n", "done\n"), "ERR upload-pack: not our ref " + dangling},
		{"want bad hex", UploadPack, v2, fetch("want xyz\n"), "ERR protocol error: expected want object ID"},
		{"want unknown ref", UploadPack, v2, fetch("want-ref refs/heads/nope\n", "done\n"), "ERR unknown ref refs/heads/nope"},
		{"no wants", UploadPack, v2, fetch("done\n"), "ERR fetch: no wants"},
		{"deepen 0", UploadPack, v2, fetch("want "+main+"\n", "deepen 0\n"), "ERR invalid deepen"},
		{"deepen and since", UploadPack, v2, fetch("want "+main+"\n", "deepen 1\n", "deepen-since 5\n"), "cannot be used together"},
		{"bad filter", UploadPack, v2, fetch("want "+main+"\n", "filter sparse:path=x\n"), "ERR invalid filter-spec"},
		{"v0 unreachable want", UploadPack, v0, pkt("want "+dangling+" side-band-64k\n", "0000", "done\n"), "ERR upload-pack: not our ref " + dangling},
		{"v0 garbage in want list", UploadPack, v0, pkt("wint "+main+"\n", "0000"), "ERR upload-pack: protocol error, expected to get object ID"},
		{"v0 garbage in have list", UploadPack, v0, pkt("want "+main+"\n", "0000", "hove x\n"), "ERR upload-pack: git upload-pack: expected SHA1 list"},
		// A round of haves is answered once it has all arrived: one cut
		// short gets nothing after the advertisement.
		{"v0 eof in haves", UploadPack, Options{}, pkt("want "+main+"\n", "0000", "have "+main+"\n"), "refs/tags/vf^{}\n0000"},
		{"push without capabilities", ReceivePack, v0, pkt(main+" "+zero+" refs/heads/feature\n", "0000"), "ERR protocol error: expected capabilities"},
		{"push malformed command", ReceivePack, v0, pkt("garbage\x00report-status\n", "0000"), "ERR protocol error: expected old/new/ref"},
		{"push bad id", ReceivePack, v0, pkt(strings.Repeat("g", 40)+" "+zero+" refs/heads/feature\x00report-status\n", "0000"), "ERR protocol error: expected old/new/ref"},
		{"push NUL in second command", ReceivePack, v0, pkt(main+" "+zero+" refs/heads/feature\x00report-status\n", main+" "+zero+" refs/heads/x\x00y\n", "0000"), "ERR protocol error: unexpected NUL"},
		{"push eof in commands", ReceivePack, v0, pkt(main + " " + zero + " refs/heads/feature\x00report-status\n"), "ERR protocol error"},
		{"too many push options", ReceivePack, Options{StatelessRPC: true, Limits: Limits{MaxPushOptions: 2}},
			pkt(rev(t, src, "feature")+" "+zero+" refs/heads/feature\x00report-status push-options\n", "0000", "a\n", "b\n", "c\n", "0000"), "ERR receive-pack: too many push options (limit 2, set RGIT_MAX_PUSH_OPTIONS)"},
		{"push option too long", ReceivePack, v0,
			pkt(rev(t, src, "feature")+" "+zero+" refs/heads/feature\x00report-status push-options\n", "0000", strings.Repeat("o", 5000)+"\n", "0000"), "ERR receive-pack: push option too long (limit 4096 bytes, fixed)"},
		{"too many ref updates", ReceivePack, Options{StatelessRPC: true, Limits: Limits{MaxPushRefs: 2}},
			pkt(main+" "+zero+" refs/heads/a\x00report-status\n", main+" "+zero+" refs/heads/b\n", main+" "+zero+" refs/heads/c\n", "0000"),
			"ERR receive-pack: too many ref updates in one push (limit 2, set RGIT_MAX_PUSH_REFS)"},
		// git reads a side-band response through its demultiplexer, which
		// prints band 3 as the remote's error but an ERR line as "bad band".
		{"too many ref updates, side-band", ReceivePack, Options{StatelessRPC: true, Limits: Limits{MaxPushRefs: 1}},
			pkt(main+" "+zero+" refs/heads/a\x00report-status side-band-64k\n", main+" "+zero+" refs/heads/b\n", "0000"),
			"\x03receive-pack: too many ref updates in one push (limit 1, set RGIT_MAX_PUSH_REFS)"},
	}
	before := refsOf(t, src)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := serve(t, tc.f, src, tc.in, tc.opt)
			if !errors.Is(err, ErrProtocol) {
				t.Errorf("error %v does not wrap ErrProtocol", err)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("response %q lacks %q", out, tc.want)
			}
			if after := refsOf(t, src); after != before {
				t.Fatalf("refs changed:\n%s", after)
			}
		})
	}
}

func TestParseProtocol(t *testing.T) {
	for in, want := range map[string]int{
		"": 0, "version=2": 2, "version=1": 1, "version=2:object-format=sha1": 2,
		"foo:version=1": 1, "version=3": 0, "version=x": 0, "version=1:version=2": 2, "version=-1": 0,
	} {
		if got := ParseProtocol(in); got != want {
			t.Errorf("ParseProtocol(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestValidRefName(t *testing.T) {
	good := []string{"refs/heads/main", "refs/tags/v1.0", "refs/heads/feature/x-y_z", "refs/heads/a.b", "refs/heads/ü"}
	bad := []string{"", "HEAD", "main", "refs/heads/", "refs//x", "refs/heads/a..b", "refs/heads/.hidden", "refs/heads/x.lock",
		"refs/heads/a.", "refs/heads/a@{1}", "refs/heads/a b", "refs/heads/a~1", "refs/heads/a^", "refs/heads/a:b",
		"refs/heads/a?", "refs/heads/a*", "refs/heads/a[", "refs/heads/a\\b", "refs/heads/a\x01", "refs/heads/a\x7f"}
	for _, n := range good {
		if !validRefName(n) {
			t.Errorf("%q rejected", n)
		}
	}
	for _, n := range bad {
		if validRefName(n) {
			t.Errorf("%q accepted", n)
		}
	}
}
