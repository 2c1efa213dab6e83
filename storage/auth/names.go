package auth

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidName: an owner or repository name breaks the naming rule.
var ErrInvalidName = errors.New("invalid name")

// MaxNameLen bounds owner and repository names; it keeps object-store keys
// and log lines short and matches what common forges allow.
const MaxNameLen = 100

// ReservedOwner is the owner name that would shadow the read API's /api/
// prefix, so no repository may live under it.
const ReservedOwner = "api"

// ValidateName checks a repository name: [A-Za-z0-9._-]+, not "." or "..",
// at most MaxNameLen bytes. It does not strip a ".git" suffix; callers that
// accept URLs do that first.
func ValidateName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrInvalidName)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrInvalidName, len(name), MaxNameLen)
	}
	if name == "." || name == ".." {
		return fmt.Errorf("%w: %q", ErrInvalidName, name)
	}
	for i := 0; i < len(name); i++ {
		if !nameByte(name[i]) {
			return fmt.Errorf("%w: %q contains %q", ErrInvalidName, name, name[i])
		}
	}
	return nil
}

// ValidateOwner is ValidateName plus the reserved owner. "api" is refused
// in any letter case so that case-folding proxies or file systems cannot
// turn "API" into the reserved prefix.
func ValidateOwner(owner string) error {
	if err := ValidateName(owner); err != nil {
		return err
	}
	if strings.EqualFold(owner, ReservedOwner) {
		return fmt.Errorf("%w: owner %q is reserved", ErrInvalidName, owner)
	}
	return nil
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == '-'
}
