package clientlimit

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"testing/synctest"
	"time"
)

func TestBudget(t *testing.T) {
	rate := Rate{Grace: 10 * time.Second, BytesPerSec: 1000}
	t0 := time.Unix(1000, 0)
	type step struct {
		took  time.Duration
		bytes int
		left  time.Duration // after the step
	}
	cases := []struct {
		name  string
		rate  Rate
		steps []step
	}{
		{"fresh stream has the grace", rate, nil},
		{"at the rate keeps the budget", rate, []step{{time.Second, 1000, 10 * time.Second}, {2 * time.Second, 2000, 10 * time.Second}}},
		{"never above the grace", rate, []step{{time.Millisecond, 1 << 20, 10 * time.Second}}},
		{"a trickle loses its waits", rate, []step{{4 * time.Second, 1, 6*time.Second + time.Millisecond}, {4 * time.Second, 1, 2*time.Second + 2*time.Millisecond}}},
		{"half the rate loses half", rate, []step{{2 * time.Second, 1000, 9 * time.Second}}},
		{"stall timer without a rate", Rate{Grace: 10 * time.Second}, []step{{3 * time.Second, 5000, 7 * time.Second}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBudget(tc.rate)
			now := t0
			for i, s := range tc.steps {
				b.Spend(now, now.Add(s.took), s.bytes)
				now = now.Add(s.took)
				if b.left != s.left {
					t.Errorf("step %d: budget %s, want %s", i, b.left, s.left)
				}
			}
			want := tc.rate.Grace
			if n := len(tc.steps); n > 0 {
				want = tc.steps[n-1].left
			}
			if got := b.Due(now, 0); got != now.Add(want) {
				t.Errorf("read due %s after now, want %s", got.Sub(now), want)
			}
			if got := b.Due(now, 500); got != now.Add(want+tc.rate.credit(500)) {
				t.Errorf("500-byte write due %s after now", got.Sub(now))
			}
		})
	}
	var none Budget
	if !none.Due(t0, 10).IsZero() {
		t.Error("a zero rate bounds a transfer")
	}
}

func TestPerAddr(t *testing.T) {
	p := NewPerAddr(2, "RGIT_MAX_ANON_PER_ADDR")
	r1, ok1 := p.Acquire("192.0.2.1:1000")
	_, ok2 := p.Acquire("192.0.2.1:2000")
	_, ok3 := p.Acquire("192.0.2.1:3000")
	_, other := p.Acquire("192.0.2.2:1000")
	if !ok1 || !ok2 || ok3 || !other {
		t.Fatalf("acquire: %v %v %v %v, want the third from one address refused", ok1, ok2, ok3, other)
	}
	if got := p.Refusal(); got != "too many unauthenticated connections from your address (limit 2, set RGIT_MAX_ANON_PER_ADDR)" {
		t.Errorf("refusal %q", got)
	}
	r1()
	r1() // a second release does nothing
	if _, ok := p.Acquire("192.0.2.1"); !ok {
		t.Fatal("a released unit is not free again")
	}
	if _, ok := p.Acquire("192.0.2.1:1"); ok {
		t.Fatal("a double release freed two units")
	}
	// An IPv6 host is one /64, whatever its interface id; a mapped IPv4
	// address is that address.
	v6 := NewPerAddr(1, "RGIT_MAX_ANON_PER_ADDR")
	if _, ok := v6.Acquire("[2001:db8:1:2::1]:22"); !ok {
		t.Fatal("first IPv6 unit refused")
	}
	if _, ok := v6.Acquire("[2001:db8:1:2:ffff::9]:22"); ok {
		t.Error("another address of the same /64 counted apart")
	}
	if _, ok := v6.Acquire("[2001:db8:1:3::1]:22"); !ok {
		t.Error("another /64 refused")
	}
	if Key("[::ffff:192.0.2.1]:22") != Key("192.0.2.1:5") {
		t.Error("a mapped IPv4 address counted apart from itself")
	}
	var unlimited *PerAddr
	for range 100 {
		if _, ok := unlimited.Acquire("192.0.2.1:1"); !ok {
			t.Fatal("a nil PerAddr refused")
		}
	}
}

// TestReader: reads are cut off once the client has fallen the grace
// behind the rate (a trickle, although bytes keep coming), with
// ErrTooSlow; the caller's own deadline cuts off with
// os.ErrDeadlineExceeded; a steady sender is never cut off.
func TestReader(t *testing.T) {
	rate := Rate{Grace: 10 * time.Second, BytesPerSec: 100}
	run := func(t *testing.T, gap time.Duration, n int, request time.Duration) (read int, took time.Duration, err error) {
		server, client := net.Pipe()
		done := make(chan struct{})
		defer func() { server.Close(); <-done }()
		go func() {
			defer close(done)
			defer client.Close()
			for range n {
				time.Sleep(gap)
				if _, err := client.Write([]byte("0123456789")); err != nil {
					return
				}
			}
		}()
		r := NewReader(server, rate)
		start := time.Now()
		if request > 0 {
			r.SetReadDeadline(start.Add(request))
		}
		buf := make([]byte, 64)
		for {
			k, err := r.Read(buf)
			read += k
			if err != nil {
				return read, time.Since(start), err
			}
		}
	}
	synctest.Test(t, func(t *testing.T) {
		// 10 bytes a second, a tenth of the rate: 9 s lost a second.
		read, took, err := run(t, time.Second, 100, 0)
		if !errors.Is(err, ErrTooSlow) || took > 20*time.Second {
			t.Errorf("trickle: %v after %s and %d bytes, want ErrTooSlow within 20s", err, took, read)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		// 10 bytes every 0.1 s: the rate, for 100 s.
		read, _, err := run(t, 100*time.Millisecond, 1000, 0)
		if err != io.EOF || read != 10000 {
			t.Errorf("steady sender: %v after %d bytes", err, read)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		read, took, err := run(t, 100*time.Millisecond, 1000, 30*time.Second)
		if !errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, ErrTooSlow) || took != 30*time.Second {
			t.Errorf("caller's deadline: %v after %s and %d bytes", err, took, read)
		}
	})
}

// TestWriter: a client that reads the answer below the rate is cut off
// with ErrTooSlow; time the server spends between writes does not count.
func TestWriter(t *testing.T) {
	rate := Rate{Grace: 10 * time.Second, BytesPerSec: 1000}
	synctest.Test(t, func(t *testing.T) {
		server, client := net.Pipe()
		done := make(chan struct{})
		defer func() { server.Close(); <-done }()
		go func() {
			defer close(done)
			defer client.Close()
			buf := make([]byte, 10)
			for {
				time.Sleep(time.Second) // 10 bytes a second
				if _, err := client.Read(buf); err != nil {
					return
				}
			}
		}()
		w := NewWriter(server, rate)
		start := time.Now()
		_, err := w.Write(make([]byte, 100_000))
		if !errors.Is(err, ErrTooSlow) || time.Since(start) != 10*time.Second+100*time.Second {
			t.Errorf("slow reader: %v after %s, want ErrTooSlow after grace + 100 s", err, time.Since(start))
		}
	})
	synctest.Test(t, func(t *testing.T) {
		server, client := net.Pipe()
		done := make(chan struct{})
		defer func() { server.Close(); <-done }()
		go func() { io.Copy(io.Discard, client); close(done) }()
		w := NewWriter(server, rate)
		for range 3 {
			time.Sleep(time.Minute) // the server computing
			if _, err := w.Write(make([]byte, 1000)); err != nil {
				t.Fatalf("write after the server's own pause: %v", err)
			}
		}
	})
}
