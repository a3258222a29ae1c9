package tickwire

import (
	"sync/atomic"
	"testing"

	"github.com/tickwire/tickwire/link/pipe"
)

// drainedLink reports a long backlog to the first look and an empty one
// to the request that follows, as a link that drained in between does.
type drainedLink struct {
	*pipe.Endpoint
	backlog atomic.Int64
}

func (l *drainedLink) TxBacklog() int { return int(l.backlog.Load()) }

func (l *drainedLink) NotifyTxBacklog(int, func()) bool {
	l.backlog.Store(0)
	return false
}

// TestBacklogHoldAllocs: a hold (the waiter's registration, the timer, the
// link's request, the release and the wake-up) allocates nothing.
func TestBacklogHoldAllocs(t *testing.T) {
	a, b := pipe.New(pipe.Options{})
	defer a.Close()
	defer b.Close()
	l := &drainedLink{Endpoint: a}
	g := newBacklogGate(l)
	defer g.close()
	ch := make(chan struct{}, 1)
	hold := func() {
		l.backlog.Store(1 << 20)
		if !g.wait(ch, nil, nil) {
			t.Fatal("hold ended without the gate opening")
		}
	}
	hold() // the held list's first growth
	if n := testing.AllocsPerRun(100, hold); n != 0 {
		t.Errorf("a hold allocates %.1f times, want 0", n)
	}
	if n := g.holds.Load(); n != 102 {
		t.Errorf("holds = %d after 102 holds, want 102", n)
	}
}
