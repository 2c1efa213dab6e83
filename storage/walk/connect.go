package walk

import (
	"context"
	"errors"
	"fmt"

	"github.com/rgit/rgit/storage/object"
)

// CheckConnected is a push's connectivity check: every object reachable
// from newTips through commits, trees and tags must either be known (in the
// repository before the push; not descended further) or be readable from
// r. The first object that is neither yields an error wrapping
// ErrMissingObject and naming it; type mismatches (a tree entry that is
// not a tree, a tag whose target has another type) are errors too.
func CheckConnected(ctx context.Context, r object.Reader, newTips []object.ID, known func(object.ID) bool) error {
	sizes, _ := r.(SizeReader)
	type item struct {
		id   object.ID
		want object.Type // object.Invalid: any type
	}
	seen := newIDSet(0)
	var stack []item
	for _, id := range newTips {
		stack = append(stack, item{id, object.Invalid})
	}
	missing := func(id object.ID, err error) error {
		if errors.Is(err, object.ErrNotFound) {
			return fmt.Errorf("%w: %s", ErrMissingObject, id)
		}
		return fmt.Errorf("connectivity: read %s: %w", id, err)
	}
	steps := 0
	for len(stack) > 0 {
		if steps++; steps%ctxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !seen.Add(it.id) {
			continue
		}
		if known(it.id) {
			// Not descended, but a new object must not point at a known
			// one of the wrong type (a tree named as a parent, say); the
			// header is cheap when the reader can give it.
			if sizes != nil && it.want != object.Invalid {
				typ, _, err := sizes.ReadHeader(it.id)
				if err != nil {
					return missing(it.id, err)
				}
				if typ != it.want {
					return fmt.Errorf("connectivity: %s: expected %s, got %s", it.id, it.want, typ)
				}
			}
			continue
		}
		if it.want == object.Blob && sizes != nil {
			// Existence and type suffice; do not inflate the blob.
			typ, _, err := sizes.ReadHeader(it.id)
			if err != nil {
				return missing(it.id, err)
			}
			if typ != object.Blob {
				return fmt.Errorf("connectivity: %s: expected blob, got %s", it.id, typ)
			}
			continue
		}
		typ, data, err := r.ReadObject(it.id)
		if err != nil {
			return missing(it.id, err)
		}
		if it.want != object.Invalid && typ != it.want {
			return fmt.Errorf("connectivity: %s: expected %s, got %s", it.id, it.want, typ)
		}
		switch typ {
		case object.Commit:
			c, err := object.ParseCommit(data)
			if err != nil {
				return fmt.Errorf("connectivity: commit %s: %w", it.id, err)
			}
			stack = append(stack, item{c.Tree, object.Tree})
			for _, p := range c.Parents {
				stack = append(stack, item{p, object.Commit})
			}
		case object.Tag:
			t, err := object.ParseTag(data)
			if err != nil {
				return fmt.Errorf("connectivity: tag %s: %w", it.id, err)
			}
			stack = append(stack, item{t.Object, t.ObjectType})
		case object.Tree:
			ti := object.NewTreeIter(data)
			for e, ok := ti.Next(); ok; e, ok = ti.Next() {
				switch {
				case e.IsGitlink():
				case e.IsTree():
					stack = append(stack, item{e.ID, object.Tree})
				default:
					stack = append(stack, item{e.ID, object.Blob})
				}
			}
			if err := ti.Err(); err != nil {
				return fmt.Errorf("connectivity: tree %s: %w", it.id, err)
			}
		}
	}
	return nil
}
