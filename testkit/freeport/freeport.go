// Package freeport finds free loopback TCP ports for tests and test
// commands that must name a port before a server binds it (an rgit node's
// peer stream port is its peer port + 1, so some callers need runs of
// consecutive ports). A port found free may still be taken by another
// process before it is bound; callers retry a failed start. It imports
// only the standard library.
package freeport

import (
	"errors"
	"net"
	"strconv"
)

// Runs returns the first ports of count distinct runs of length
// consecutive ports on 127.0.0.1, each port of which was free a moment
// ago. All of them are probed by binding at once, so no two runs overlap.
func Runs(count, length int) ([]int, error) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	var out []int
	for tries := 0; len(out) < count; tries++ {
		if tries == 50*count {
			return nil, errors.New("no free run of loopback ports")
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		held = append(held, l)
		p := l.Addr().(*net.TCPAddr).Port
		run := []net.Listener{}
		for i := 1; i < length; i++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+i))
			if err != nil {
				break
			}
			run = append(run, l)
		}
		held = append(held, run...)
		if len(run) == length-1 {
			out = append(out, p)
		}
	}
	return out, nil
}

// Run returns the first of length consecutive free ports.
func Run(length int) (int, error) {
	p, err := Runs(1, length)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}
