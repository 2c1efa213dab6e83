package cluster

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestWriteQueue drives the queue with scripts: "+a" adds decision a that
// writes, "-a" one that writes nothing, "ok" and "fail" end the write in
// flight (each write takes 100 ms; "ok0" one that took no time), "flush" ends a hold, "drop" empties
// the queue. Each event's step is rendered as answer/fail/write lists and
// the hold; empty steps as "-".
func TestWriteQueue(t *testing.T) {
	cases := []struct {
		name   string
		script string
		want   string
	}{
		{"idle write starts at once", "+a ok",
			"write[a] | answer[a]"},
		{"idle no-write answers at once", "-a",
			"answer[a]"},
		{"writes during a write form the next batch", "+a +b +c ok ok",
			"write[a] | - | - | answer[a] write[b c] | answer[b c]"},
		{"no-write rides with the batch in flight", "+a -b ok",
			"write[a] | - | answer[a b]"},
		{"no-write after a pending write waits for it", "+a +b -c ok ok",
			"write[a] | - | - | answer[a] write[b c] | answer[b c]"},
		{"everything landed: no-write answers at once", "+a ok -b",
			"write[a] | answer[a] | answer[b]"},
		{"failure fails the batch and what was queued on it", "+a -b +c -d fail",
			"write[a] | - | - | - | fail[a b c d]"},
		{"after a failure the queue starts afresh", "+a +b fail +c ok",
			"write[a] | - | fail[a b] | write[c] | answer[c]"},
		{"failure of the second batch keeps the first answered", "+a +b ok +c fail",
			"write[a] | - | answer[a] write[b] | - | fail[b c]"},
		{"done without a write in flight does nothing", "ok fail",
			"- | -"},
		{"drop returns what waits", "+a +b -c drop -d",
			"write[a] | - | - | drop[a b c] | answer[d]"},
		{"after a batch of two the next write waits for two", "+a +b +c ok ok +d +e ok",
			"write[a] | - | - | answer[a] write[b c] | answer[b c] | hold5ms | write[d e] | answer[d e]"},
		{"the hold ends at the flush with what gathered", "+a +b +c ok ok +d flush flush ok",
			"write[a] | - | - | answer[a] write[b c] | answer[b c] | hold5ms | write[d] | - | answer[d]"},
		{"a no-write held counts towards the batch", "+a +b +c ok ok +d -e ok",
			"write[a] | - | - | answer[a] write[b c] | answer[b c] | hold5ms | write[d e] | answer[d e]"},
		{"a no-write while idle is not held", "+a +b +c ok ok -d",
			"write[a] | - | - | answer[a] write[b c] | answer[b c] | answer[d]"},
		{"a next batch smaller than the one landed is held", "+a +b +c ok +d ok +e",
			"write[a] | - | - | answer[a] write[b c] | - | answer[b c] hold5ms | write[d e]"},
		{"a next batch as large as the one landed is written at once", "+a +b +c ok +d +e ok",
			"write[a] | - | - | answer[a] write[b c] | - | - | answer[b c] write[d e]"},
		{"no hold after an instant write", "+a +b +c ok +d ok0 +e",
			"write[a] | - | - | answer[a] write[b c] | - | answer[b c] write[d] | -"},
		{"a held batch is dropped", "+a +b +c ok ok +d drop",
			"write[a] | - | - | answer[a] write[b c] | answer[b c] | hold5ms | drop[d]"},
		{"a failure forgets the last batch size", "+a +b +c ok fail +d",
			"write[a] | - | - | answer[a] write[b c] | fail[b c] | write[d]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var q WriteQueue[string]
			var got []string
			for _, ev := range strings.Fields(c.script) {
				var s QueueStep[string]
				switch {
				case ev == "ok":
					s = q.Done(true, 100*time.Millisecond)
				case ev == "ok0":
					s = q.Done(true, 0)
				case ev == "fail":
					s = q.Done(false, 100*time.Millisecond)
				case ev == "flush":
					s = q.Flush()
				case ev == "drop":
					got = append(got, fmt.Sprintf("drop%v", q.Drop()))
					continue
				default:
					s = q.Add(ev[1:], ev[0] == '+')
				}
				got = append(got, renderStep(s))
			}
			if g := strings.Join(got, " | "); g != c.want {
				t.Fatalf("script %q:\n got  %s\n want %s", c.script, g, c.want)
			}
		})
	}
}

func renderStep(s QueueStep[string]) string {
	var parts []string
	for _, l := range []struct {
		name string
		ws   []string
	}{{"answer", s.Answer}, {"fail", s.Fail}, {"write", s.Write}} {
		if len(l.ws) > 0 {
			parts = append(parts, fmt.Sprintf("%s%v", l.name, l.ws))
		}
	}
	if s.HoldFor > 0 {
		parts = append(parts, "hold"+s.HoldFor.String())
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}
