package pack

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rgit/rgit/storage/object"
)

// arrivingCopy writes the first n bytes of the fixture's pack to a new
// file and opens it as arriving, within budget.
func arrivingCopy(t *testing.T, fx *fixture, n int, budget *FileBudget) (p *Pack, f *os.File, data []byte, a *Arrival) {
	t.Helper()
	data, err := os.ReadFile(fx.packPath)
	if err != nil {
		t.Fatal(err)
	}
	f, err = os.Create(filepath.Join(t.TempDir(), "partial"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.Write(data[:n]); err != nil {
		t.Fatal(err)
	}
	a = NewArrival(int64(len(data)))
	a.Advance(int64(n))
	p, err = OpenWith(f.Name(), fx.idxPath, OpenOptions{Arrival: a, Files: budget})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, f, data, a
}

// lastObject is the object stored last in p.
func lastObject(p *Pack) object.ID {
	var id object.ID
	var off int64 = -1
	for i := range p.Index().Count() {
		if o := p.Index().Offset(i); o > off {
			off, id = o, p.Index().ID(i)
		}
	}
	return id
}

func TestArrivingPackReadsAsBytesArrive(t *testing.T) {
	fx := sharedFixture(t)
	whole := openFixture(t, fx)
	budget := NewFileBudget(4)
	p, f, data, a := arrivingCopy(t, fx, packHeaderLen, budget)
	if p.Name() != whole.Name() || p.Size() != whole.Size() {
		t.Fatalf("arriving pack %s (%d bytes), want %s (%d)", p.Name(), p.Size(), whole.Name(), whole.Size())
	}
	if budget.Open() != 0 {
		t.Fatalf("an arriving pack's file counts in the budget (%d open)", budget.Open())
	}
	// The rest arrives: every object reads as from the whole file.
	if _, err := f.Write(data[packHeaderLen:]); err != nil {
		t.Fatal(err)
	}
	a.Advance(int64(len(data)))
	a.Done()
	for i := range whole.Index().Count() {
		id := whole.Index().ID(i)
		_, want, err := whole.ReadObject(id)
		if err != nil {
			t.Fatal(err)
		}
		if _, got, err := p.ReadObject(id); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("object %s: %v", id, err)
		}
	}
	// Published under its final name, it joins the budget and is reopened
	// by that name once closed.
	final := filepath.Join(filepath.Dir(f.Name()), "final.pack")
	if err := os.Rename(f.Name(), final); err != nil {
		t.Fatal(err)
	}
	p.Settle(final)
	if budget.Open() != 1 {
		t.Fatalf("settled pack: %d files open in the budget, want 1", budget.Open())
	}
	p.CloseFile()
	if _, _, err := p.ReadObject(lastObject(whole)); err != nil {
		t.Fatalf("read after the budget closed the settled file: %v", err)
	}
}

func TestArrivingPackFailsReadsPastWhatArrived(t *testing.T) {
	fx := sharedFixture(t)
	p, _, _, a := arrivingCopy(t, fx, packHeaderLen, nil)
	broke := errors.New("download broke")
	done := make(chan error, 1)
	go func() {
		_, _, err := p.ReadObject(lastObject(p))
		done <- err
	}()
	// Whether the read is already waiting or not, it must report this
	// failure, not a short file.
	a.Fail(broke)
	if err := <-done; !errors.Is(err, broke) {
		t.Fatalf("read past the arrived bytes: %v, want the download's error", err)
	}
	if !errors.Is(a.Err(), broke) {
		t.Fatalf("Err = %v", a.Err())
	}
	a.Done() // too late: the failure stands
	if _, _, err := p.ReadObject(lastObject(p)); !errors.Is(err, broke) {
		t.Fatalf("read after a late Done: %v, want the download's error", err)
	}
}
