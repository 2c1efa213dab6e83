package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
)

// ErrServer: the warm engine-child broke the request protocol.
var ErrServer = errors.New("engine server")

// warmServer is a running `engine-child ... -serve` process: the rgit side
// of a warm measurement. The parent sends one request at a time, so they
// interleave with C git's processes.
type warmServer struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr bytes.Buffer
}

func startServer(ctx context.Context, self string, args ...string) (*warmServer, error) {
	s := &warmServer{cmd: exec.CommandContext(ctx, self, append([]string{"engine-child"}, append(args, "-serve")...)...)}
	var err error
	if s.in, s.out, err = startPiped(s.cmd, &s.stderr); err != nil {
		return nil, err
	}
	return s, nil
}

// startPiped starts cmd, a child that speaks the bench's line protocol,
// with its stderr into stderr, and returns its stdin and a scanner over
// its stdout.
func startPiped(cmd *exec.Cmd, stderr io.Writer) (io.WriteCloser, *bufio.Scanner, error) {
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start %s: %w", strings.Join(cmd.Args, " "), err)
	}
	return in, bufio.NewScanner(stdout), nil
}

// request has the server answer one request, writing the pack to the file
// out (or counting it when out is ""), and returns the time the server
// took for it and whether the clone-pack cache answered it.
func (s *warmServer) request(out string) (sample, bool, error) {
	if _, err := fmt.Fprintln(s.in, out); err != nil {
		return sample{}, false, fmt.Errorf("%w: send request: %v: %s", ErrServer, err, lastLines(s.stderr.Bytes(), 8))
	}
	if !s.out.Scan() {
		return sample{}, false, fmt.Errorf("%w: no answer (%v): %s", ErrServer, s.out.Err(), lastLines(s.stderr.Bytes(), 8))
	}
	line := s.out.Text()
	secs, err := parseRequestLine(line)
	return sample{secs: secs}, strings.Contains(" "+line+" ", " cache_hit=true "), err
}

// stop ends the server and returns its peak RSS over all its requests.
func (s *warmServer) stop() (int64, error) {
	s.in.Close()
	if err := s.cmd.Wait(); err != nil {
		return 0, fmt.Errorf("%s: %w: %s", strings.Join(s.cmd.Args, " "), err, lastLines(s.stderr.Bytes(), 8))
	}
	return reportedHWM(s.stderr.Bytes()), nil
}

// parseRequestLine reads the seconds from a serveLoop answer,
// "request_s=<seconds> ...".
func parseRequestLine(line string) (float64, error) {
	field, _, _ := strings.Cut(line, " ")
	v, ok := strings.CutPrefix(field, "request_s=")
	if !ok {
		return 0, fmt.Errorf("%w: bad answer %q", ErrServer, line)
	}
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil || secs < 0 {
		return 0, fmt.Errorf("%w: bad answer %q", ErrServer, line)
	}
	return secs, nil
}
