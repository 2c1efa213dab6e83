package pktline_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/rgit/rgit/transport/wire/pktline"
)

// Writing a protocol v2 command request and reading it back: each data
// packet is a four-hex-digit length (its own four bytes included) and the
// payload; "0001" separates sections and "0000" ends the request.
func Example() {
	var buf bytes.Buffer
	w := pktline.NewWriter(&buf)
	for _, err := range []error{
		w.WriteString("command=ls-refs\n"),
		w.Delim(),
		w.WriteString("peel\n"),
		w.WriteString("ref-prefix refs/heads/\n"),
		w.Flush(),
	} {
		if err != nil {
			panic(err)
		}
	}
	fmt.Printf("%q\n", buf.String())

	r := pktline.NewReader(&buf)
	for {
		kind, payload, err := r.ReadPacket()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			panic(err)
		}
		if kind == pktline.Data {
			fmt.Printf("data %q\n", payload)
		} else {
			fmt.Println(kind)
		}
	}
	// Output:
	// "0014command=ls-refs\n00010009peel\n001bref-prefix refs/heads/\n0000"
	// data "command=ls-refs\n"
	// delim
	// data "peel\n"
	// data "ref-prefix refs/heads/\n"
	// flush
}

// A length header over the protocol's 65520 bytes is refused with an
// error a server can name.
func ExampleReader_ReadPacket_tooLong() {
	r := pktline.NewReader(bytes.NewReader([]byte("fff1")))
	_, _, err := r.ReadPacket()
	fmt.Println(errors.Is(err, pktline.ErrTooLong))
	// Output:
	// true
}
