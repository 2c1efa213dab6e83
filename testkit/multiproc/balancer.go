package multiproc

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// Balancer is a load balancer in front of the nodes, for tests and
// `rgit-bench soak`: each
// operation goes to a random node in rotation whose /ready answers 200,
// and the operations in flight at each node are counted. TakeOut removes
// a node (what Kubernetes does before a SIGTERM, or the test before a
// kill) and waits until its operations have finished; the node rejoins
// once a new process of it answers /ready.
type Balancer struct {
	nodes []*Node
	mu    sync.Mutex
	cond  *sync.Cond // an operation ended
	rng   *rand.Rand
	out   map[*Node]int // taken out, with the pid it had
	busy  map[*Node]int // operations in flight
}

// NewBalancer balances over nodes, all in rotation.
func NewBalancer(nodes []*Node) *Balancer {
	b := &Balancer{nodes: nodes, rng: rand.New(rand.NewPCG(1, 16)), out: map[*Node]int{}, busy: map[*Node]int{}}
	b.cond = sync.NewCond(&b.mu)
	return b
}

var readyClient = &http.Client{Timeout: time.Second}

// ready reports whether n answers /ready with 200.
func ready(n *Node) bool {
	resp, err := readyClient.Get("http://" + n.HTTPAddr + "/ready")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Pick chooses a node for one operation; call done when it has ended.
// It waits for a node to be ready as long as it takes.
func (b *Balancer) Pick() (n *Node, done func()) {
	n, done, _ = b.PickContext(context.Background())
	return n, done
}

// PickContext is Pick until ctx ends (a load that stops, or nodes that
// will not come back).
func (b *Balancer) PickContext(ctx context.Context) (n *Node, done func(), err error) {
	for {
		b.mu.Lock()
		var cand []*Node
		for _, n := range b.nodes {
			if pid, isOut := b.out[n]; isOut && n.Pid() != pid {
				delete(b.out, n) // restarted: back in once ready
			}
			if _, isOut := b.out[n]; !isOut {
				cand = append(cand, n)
			}
		}
		b.rng.Shuffle(len(cand), func(i, j int) { cand[i], cand[j] = cand[j], cand[i] })
		b.mu.Unlock()
		for _, n := range cand {
			if !ready(n) {
				continue
			}
			b.mu.Lock()
			if _, isOut := b.out[n]; !isOut {
				b.busy[n]++
				b.mu.Unlock()
				return n, func() {
					b.mu.Lock()
					b.busy[n]--
					b.cond.Broadcast()
					b.mu.Unlock()
				}, nil
			}
			b.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TakeOut removes n from rotation and waits for its operations in flight.
func (b *Balancer) TakeOut(n *Node) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.out[n] = n.Pid()
	for b.busy[n] > 0 {
		b.cond.Wait()
	}
}
