package objstore

import "io"

// FileBody is implemented by the bodies Get and GetRange return on a store
// that keeps its objects in local files (the file store).
type FileBody interface {
	// SendTo writes the rest of the body to w, as io.Copy would, except
	// that it hands the file itself, a bounded range at a time, to w's
	// ReadFrom when w has one: net/http then moves it with sendfile(2),
	// never through a buffer of rgit's. It honours the body's context
	// between ranges, as Read does between reads.
	SendTo(w io.Writer) (int64, error)
}

// BodyWrapper is implemented by the bodies of stores that wrap another
// (WithTimeout, the guard) when Send may go past them to the body they
// wrap: the wrapped store was handed their context, and their Close
// still runs.
type BodyWrapper interface {
	UnwrapBody() io.Reader
}

// Send copies body, a Get or GetRange body, to w: through its FileBody,
// looking through BodyWrappers, when it is or wraps one; else io.Copy.
func Send(w io.Writer, body io.Reader) (int64, error) {
	for r := body; r != nil; {
		if f, ok := r.(FileBody); ok {
			return f.SendTo(w)
		}
		u, ok := r.(BodyWrapper)
		if !ok {
			break
		}
		r = u.UnwrapBody()
	}
	return io.Copy(w, body)
}
