package actors

import (
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
)

// supervisor is the node's parent of every repo actor: it spawns them on
// demand, forgets them when they close, restarts them on panic (the default
// one-for-one strategy of their props) and enforces RGIT_MAX_WARM by asking
// the least recently requested idle repo to close.
type supervisor struct {
	node     *Node
	children map[repoKey]*child
}

type child struct {
	pid      *actor.PID
	lastUsed time.Time
}

func (s *supervisor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *getRepo:
		c, ok := s.children[m.key]
		if !ok {
			owner, name, _ := strings.Cut(string(m.key), "/")
			props := actor.PropsFromProducer(func() actor.Actor {
				return &repoActor{node: s.node, key: m.key, owner: owner, name: name}
			}, actor.WithSupervisor(repoStrategy))
			c = &child{pid: ctx.Spawn(props)}
			s.children[m.key] = c
			s.enforceMaxWarm(ctx, m.key)
		}
		c.lastUsed = time.Now()
		ctx.Respond(&repoPID{pid: c.pid})
	case *idle:
		if c, ok := s.children[m.key]; ok && c.pid.Equal(m.pid) {
			delete(s.children, m.key)
		}
	case *listOpen:
		keys := make([]repoKey, 0, len(s.children))
		for k := range s.children {
			keys = append(keys, k)
		}
		ctx.Respond(&openKeys{keys: keys})
	}
}

// enforceMaxWarm asks the least recently used other repos to close while
// more than MaxWarm are open. A repo with sessions ignores the request and
// is asked again on the next spawn.
func (s *supervisor) enforceMaxWarm(ctx actor.Context, fresh repoKey) {
	over := len(s.children) - s.node.cfg.MaxWarm
	if over <= 0 {
		return
	}
	for ; over > 0; over-- {
		var oldest repoKey
		var oldestAt time.Time
		for k, c := range s.children {
			if k != fresh && (oldest == "" || c.lastUsed.Before(oldestAt)) {
				oldest, oldestAt = k, c.lastUsed
			}
		}
		if oldest == "" {
			return
		}
		s.node.log.Debug("max warm reached; asking repo to close", zap.String("repo", string(oldest)))
		ctx.Send(s.children[oldest].pid, &evictIfIdle{})
		// Stop considering it this round; it leaves the map when it closes.
		s.children[oldest].lastUsed = time.Now()
	}
}

// repoStrategy restarts a panicking repo actor, up to 5 times a minute.
var repoStrategy = actor.NewOneForOneStrategy(5, time.Minute, func(reason any) actor.Directive {
	return actor.RestartDirective
})
