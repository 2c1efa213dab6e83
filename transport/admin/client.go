package admin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
)

// ErrCommand reports that the node ran the command and it failed; the
// message is the node's.
var ErrCommand = errors.New("admin command failed")

// Call sends req to the node at addr and streams its answer: progress lines
// to progress, the command's output to out.
func Call(ctx context.Context, addr, secret string, req Request, progress, out io.Writer) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+Path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("admin address %q: %w", addr, err)
	}
	hr.Header.Set("Authorization", "Bearer "+secret)
	hr.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return fmt.Errorf("reach rgit node at %s (is `rgit serve` running? set RGIT_ADMIN_ADDR or --addr): %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("rgit node at %s: %s: %s", addr, resp.Status, bytes.TrimSpace(msg))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("bad answer from node: %w", err)
		}
		if ev.Progress != "" {
			fmt.Fprintln(progress, ev.Progress)
		}
		if ev.Done {
			if ev.Error != "" {
				return fmt.Errorf("%w: %s", ErrCommand, ev.Error)
			}
			if ev.Output != "" {
				fmt.Fprintln(out, ev.Output)
			}
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read answer from node: %w", err)
	}
	return errors.New("node closed the connection before answering")
}

// Usage returns one synopsis line per command, sorted.
func Usage() []string {
	var lines []string
	for name, c := range commands {
		lines = append(lines, name+" "+c.synopsis)
	}
	sort.Strings(lines)
	return lines
}
