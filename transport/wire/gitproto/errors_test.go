package gitproto

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/object"
)

var errDisk = errors.New("disk on fire")

// failingBackend wraps the git backend with injected storage failures.
type failingBackend struct {
	*gitRepo
	failCheck bool
}

type failingPlan struct{ FetchPlan }

func (failingPlan) WritePack(ctx context.Context, w io.Writer, progress io.Writer) error {
	if _, err := w.Write([]byte("PACK")); err != nil {
		return err
	}
	return errDisk
}

func (b *failingBackend) PlanFetch(ctx context.Context, req FetchRequest) (FetchPlan, error) {
	p, err := b.gitRepo.PlanFetch(ctx, req)
	return failingPlan{p}, err
}

func (b *failingBackend) CheckWants(ctx context.Context, snap RefSnapshot, wants []object.ID) error {
	if b.failCheck {
		return errDisk
	}
	return b.gitRepo.CheckWants(ctx, snap, wants)
}

func TestBackendFailures(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	main := rev(t, src, "main")
	run := func(b Backend, in string, opt Options) (string, error) {
		var out bytes.Buffer
		err := UploadPack(context.Background(), b, strings.NewReader(in), &out, opt)
		return out.String(), err
	}
	t.Run("pack failure goes to band 3", func(t *testing.T) {
		for _, opt := range []Options{{Protocol: 2, StatelessRPC: true}, {StatelessRPC: true}} {
			in := pkt("command=fetch\n", "0001", "want "+main+"\n", "done\n", "0000")
			if opt.Protocol == 0 {
				in = pkt("want "+main+" side-band-64k\n", "0000", "done\n")
			}
			out, err := run(&failingBackend{gitRepo: &gitRepo{dir: src}}, in, opt)
			if !errors.Is(err, errDisk) || errors.Is(err, ErrProtocol) {
				t.Errorf("v%d: error %v, want wrapped storage error", opt.Protocol, err)
			}
			if !strings.HasSuffix(out, pkt("\x03upload-pack: internal server error\n")) || strings.Contains(out, "disk on fire") {
				t.Errorf("v%d: response %q does not end in a band-3 error (or leaks details)", opt.Protocol, out)
			}
		}
	})
	t.Run("check failure is internal, not protocol", func(t *testing.T) {
		in := pkt("command=fetch\n", "0001", "want "+rev(t, src, "main~1")+"\n", "done\n", "0000")
		out, err := run(&failingBackend{gitRepo: &gitRepo{dir: src}, failCheck: true}, in, Options{Protocol: 2, StatelessRPC: true})
		if !errors.Is(err, errDisk) || errors.Is(err, ErrProtocol) {
			t.Errorf("error %v", err)
		}
		if out != pkt("ERR upload-pack: internal server error\n") {
			t.Errorf("response %q", out)
		}
	})
}
