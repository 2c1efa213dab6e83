package admin

import (
	"context"

	"github.com/rgit/rgit/storage/auth"
)

// acting is a message that may act as a user (--as).
type acting interface{ as() string }

func (m SetVisibility) as() string  { return m.As }
func (m Grant) as() string          { return m.As }
func (m Revoke) as() string         { return m.As }
func (m Protect) as() string        { return m.As }
func (m Unprotect) as() string      { return m.As }
func (m AddHook) as() string        { return m.As }
func (m RemoveHook) as() string     { return m.As }
func (m Redeliver) as() string      { return m.As }
func (m ListAccess) as() string     { return m.As }
func (m ListHooks) as() string      { return m.As }
func (m TestHook) as() string       { return m.As }
func (m ListDeliveries) as() string { return m.As }

// withActor puts who m acts as into ctx: the --as user, or the operator.
// The repository's writer names them in the webhook events of the change
// (access and visibility events). Whether --as may act is still decided
// by the command (actingAs); a refused one changes nothing.
func withActor(ctx context.Context, m Msg) context.Context {
	who := operator
	if a, ok := m.(acting); ok && a.as() != "" {
		who = a.as()
	}
	return auth.WithIdentity(ctx, auth.Identity{Owner: who, Authenticated: true})
}
