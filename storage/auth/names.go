package auth

import "github.com/rgit/rgit/storage/names"

// ErrInvalidName: an owner name breaks the naming rule (storage/names).
var ErrInvalidName = names.ErrInvalid
