package pack

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error about malformed pack, index or delta data
// wraps ErrCorrupt, so callers can tell bad input from I/O failures; the more
// specific sentinels below additionally let them branch on the reason.
var (
	// ErrCorrupt is wrapped by every error caused by malformed input.
	ErrCorrupt = errors.New("pack: corrupt")
	// ErrChecksum: a pack or index trailer does not match its contents.
	ErrChecksum = errors.New("pack: checksum mismatch")
	// ErrTooLarge: an object or the pack exceeds a configured limit.
	ErrTooLarge = errors.New("pack: size limit exceeded")
	// ErrPackTooLarge: the pack exceeds IndexOptions.MaxPackSize (and
	// wraps ErrTooLarge); any other ErrTooLarge is about one object.
	ErrPackTooLarge = fmt.Errorf("%w: pack", ErrTooLarge)
	// ErrDeltaDepth: a delta chain is longer than the allowed depth.
	ErrDeltaDepth = errors.New("pack: delta chain too deep")
	// ErrMissingBase: a REF_DELTA base is neither in the pack nor in the
	// repository (or the deltas form a cycle), so the delta cannot be resolved.
	ErrMissingBase = errors.New("pack: unresolvable delta (missing necessary object)")
	// ErrBadDelta: delta instructions are inconsistent with their base or
	// their declared result size.
	ErrBadDelta = errors.New("pack: bad delta")
)

// corruptf returns an error wrapping ErrCorrupt.
func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// kindf returns an error wrapping both ErrCorrupt and the given sentinel.
func kindf(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %w: %s", ErrCorrupt, kind, fmt.Sprintf(format, args...))
}
