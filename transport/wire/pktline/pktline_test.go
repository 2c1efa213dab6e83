package pktline

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestReaderPackets(t *testing.T) {
	in := "000ahello\n" + "0000" + "0001" + "0002" + "0005x" + "0009UPPER"
	r := NewReader(strings.NewReader(in))
	want := []struct {
		kind Kind
		data string
	}{{Data, "hello\n"}, {Flush, ""}, {Delim, ""}, {ResponseEnd, ""}, {Data, "x"}, {Data, "UPPER"}}
	for i, w := range want {
		k, p, err := r.ReadPacket()
		if err != nil || k != w.kind || string(p) != w.data {
			t.Fatalf("packet %d: %v %q %v, want %v %q", i, k, p, err, w.kind, w.data)
		}
	}
	if _, _, err := r.ReadPacket(); err != io.EOF {
		t.Fatalf("at end: %v, want io.EOF", err)
	}
}

func TestReaderReusesBuffer(t *testing.T) {
	r := NewReader(strings.NewReader("0008abcd0008efgh"))
	_, p1, _ := r.ReadPacket()
	first := &p1[0]
	_, p2, _ := r.ReadPacket()
	if &p2[0] != first || string(p2) != "efgh" {
		t.Fatalf("payload buffer not reused or wrong: %q", p2)
	}
}

func TestReaderStopsAtPacketEnd(t *testing.T) {
	src := strings.NewReader("0008abcdPACKrest")
	r := NewReader(src)
	if _, p, err := r.ReadPacket(); err != nil || string(p) != "abcd" {
		t.Fatal(p, err)
	}
	rest, _ := io.ReadAll(src)
	if string(rest) != "PACKrest" {
		t.Fatalf("reader consumed past the packet: rest %q", rest)
	}
}

func TestReaderErrors(t *testing.T) {
	cases := map[string]error{
		"0003":               ErrInvalidLength,
		"0004":               ErrInvalidLength,
		"fff1":               ErrInvalidLength,
		"ffff":               ErrInvalidLength,
		"zz00":               ErrInvalidLength,
		"00 5":               ErrInvalidLength,
		"-001":               ErrInvalidLength,
		"000":                io.ErrUnexpectedEOF,
		"000aabc":            io.ErrUnexpectedEOF,
		"fff0" + "too short": io.ErrUnexpectedEOF,
	}
	for in, want := range cases {
		_, _, err := NewReader(strings.NewReader(in)).ReadPacket()
		if !errors.Is(err, want) {
			t.Errorf("%q: error %v, want %v", in, err, want)
		}
	}
}

func TestMaxLengthAccepted(t *testing.T) {
	payload := strings.Repeat("x", MaxPayload)
	var buf bytes.Buffer
	if err := NewWriter(&buf).WriteString(payload); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), "fff0") {
		t.Fatalf("header %q", buf.String()[:4])
	}
	_, p, err := NewReader(&buf).ReadPacket()
	if err != nil || len(p) != MaxPayload {
		t.Fatalf("len %d err %v", len(p), err)
	}
}

func TestWriter(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	if err := w.WriteString("a\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("bc")); err != nil {
		t.Fatal(err)
	}
	_ = w.Writef("n=%d\n", 5)
	_ = w.Flush()
	_ = w.Delim()
	_ = w.ResponseEnd()
	if want := "0006a\n0006bc0008n=5\n000000010002"; buf.String() != want {
		t.Fatalf("got %q want %q", buf.String(), want)
	}
	if err := w.WriteString(strings.Repeat("x", MaxPayload+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized: %v", err)
	}
	if err := w.WriteString(""); !errors.Is(err, ErrEmpty) {
		t.Fatalf("empty: %v", err)
	}
}

func TestMuxerChunking(t *testing.T) {
	for _, tc := range []struct {
		mode  SidebandMode
		chunk int
	}{{SideBand, 995}, {SideBand64k, 65515}} {
		var buf bytes.Buffer
		m := NewMuxer(NewWriter(&buf), tc.mode)
		data := bytes.Repeat([]byte("0123456789"), tc.chunk/5+3) // > 2 chunks
		if n, err := m.Data().Write(data); err != nil || n != len(data) {
			t.Fatal(n, err)
		}
		_, _ = m.Progress().Write([]byte("Counting\r"))
		r := NewReader(&buf)
		var got []byte
		var sizes []int
		for {
			k, p, err := r.ReadPacket()
			if err == io.EOF {
				break
			}
			if err != nil || k != Data {
				t.Fatal(k, err)
			}
			if p[0] == BandProgress {
				if string(p[1:]) != "Counting\r" {
					t.Fatalf("progress %q", p[1:])
				}
				continue
			}
			if p[0] != BandData {
				t.Fatalf("band %d", p[0])
			}
			sizes = append(sizes, len(p)-1)
			got = append(got, p[1:]...)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("mode %d: data mismatch", tc.mode)
		}
		for i, s := range sizes[:len(sizes)-1] {
			if s != tc.chunk {
				t.Fatalf("mode %d: chunk %d has %d bytes, want %d", tc.mode, i, s, tc.chunk)
			}
		}
	}
}

func TestMuxerFatalCloses(t *testing.T) {
	var buf bytes.Buffer
	m := NewMuxer(NewWriter(&buf), SideBand64k)
	if err := m.Fatal("boom\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Data().Write([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after fatal: %v", err)
	}
	if buf.String() != "000a\x03boom\n" {
		t.Fatalf("got %q", buf.String())
	}
}

func TestMuxerConcurrent(t *testing.T) {
	var buf bytes.Buffer
	m := NewMuxer(NewWriter(&buf), SideBand)
	var wg sync.WaitGroup
	for band := byte(1); band <= 2; band++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				_, _ = m.WriteBand(band, bytes.Repeat([]byte{'a' + band}, 1500))
			}
		}()
	}
	wg.Wait()
	r := NewReader(&buf)
	total := map[byte]int{}
	for {
		_, p, err := r.ReadPacket()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Count(p[1:], []byte{'a' + p[0]}) != len(p)-1 {
			t.Fatalf("interleaved packet on band %d", p[0])
		}
		total[p[0]] += len(p) - 1
	}
	if total[1] != 300000 || total[2] != 300000 {
		t.Fatalf("totals %v", total)
	}
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestProgressThrottle(t *testing.T) {
	var buf bytes.Buffer
	clk := &fakeClock{t: time.Unix(1000, 0)}
	p := NewProgressClock(&buf, "Counting objects", 20, 200*time.Millisecond, clk.now)
	p.Set(1) // first update is shown at once
	for i := uint64(2); i <= 9; i++ {
		clk.t = clk.t.Add(10 * time.Millisecond) // too soon: throttled
		p.Set(i)
	}
	clk.t = clk.t.Add(200 * time.Millisecond)
	p.Set(9)
	p.Add(11)
	p.Done()
	p.Done()
	p.Set(3) // after Done: ignored
	want := "Counting objects:   5% (1/20)\r" +
		"Counting objects:  45% (9/20)\r" +
		"Counting objects: 100% (20/20), done.\n"
	if buf.String() != want {
		t.Fatalf("got %q\nwant %q", buf.String(), want)
	}
}

func TestProgressUnknownTotalAndNil(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgress(&buf, "Receiving objects", 0)
	p.Set(7)
	p.Done()
	if want := "Receiving objects: 7\rReceiving objects: 7, done.\n"; buf.String() != want {
		t.Fatalf("got %q want %q", buf.String(), want)
	}
	var none *Progress = NewProgress(nil, "x", 1)
	none.Set(1)
	none.Add(1)
	none.Done() // must not panic
}
