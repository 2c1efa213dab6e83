package s3store

import (
	"errors"
	"testing"

	"github.com/aws/smithy-go"
)

func TestDecideConditional(t *testing.T) {
	var (
		precondition = &smithy.GenericAPIError{Code: "PreconditionFailed"}
		conflict     = &smithy.GenericAPIError{Code: "ConditionalRequestConflict"}
		notFound     = &smithy.GenericAPIError{Code: "NotFound"}
		denied       = &smithy.GenericAPIError{Code: "AccessDenied"}
	)
	for _, c := range []struct {
		name              string
		writeErr, headErr error
		headToken         string
		want              condAction
	}{
		{"412, someone else's object", precondition, nil, "other", condExists},
		{"412, object without token", precondition, nil, "", condExists},
		{"412, our own object (retried request)", precondition, nil, "mine", condWon},
		{"412, object deleted since", precondition, notFound, "", condRetry},
		{"409, object now exists", conflict, nil, "other", condExists},
		{"409, our own object", conflict, nil, "mine", condWon},
		{"409, still absent", conflict, notFound, "", condRetry},
		{"409, head failed", conflict, denied, "", condFail},
		{"other write error", denied, nil, "mine", condFail},
		{"plain error", errors.New("boom"), nil, "", condFail},
	} {
		if got := decideConditional(c.writeErr, c.headErr, c.headToken, "mine"); got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, got, c.want)
		}
	}
}

func TestCopySource(t *testing.T) {
	for key, want := range map[string]string{
		"a/b.c~d_e-f":  "bkt/a/b.c~d_e-f",
		"sp ace/a+b=c": "bkt/sp%20ace/a%2Bb%3Dc",
		"uni/é":        "bkt/uni/%C3%A9",
		"p/a%20b?#":    "bkt/p/a%2520b%3F%23",
	} {
		if got := copySource("bkt", key); got != want {
			t.Errorf("copySource(%q) = %q, want %q", key, got, want)
		}
	}
}
