// Package product is the room of the surfaces around git: api (the
// cached JSON read API), web (the browse page), admin (the operator
// channel behind rgit-admin), lfs (Git LFS) and hooks (webhook delivery).
// Packages here may import the other rooms and each other, never
// transport/node.
package product
