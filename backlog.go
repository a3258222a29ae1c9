package tickwire

import (
	"sync"
	"sync/atomic"
	"time"

	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/tickwire/tickwire/link"
)

// Bounds of the hold of a Write on a link's transmit backlog (backlogGate).
const (
	// txBacklogMax is the most frames the backlog may hold before Writes
	// wait: about 20 ms of frames where a stack pair over link/pipe moves
	// 50,000 frames a second on a loaded 2-core machine, a tenth of TCP's
	// minimum retransmission timeout (200 ms). A link with a shorter queue
	// lowers it to half the queue (see newBacklogGate).
	txBacklogMax = 1024
)

// txBacklogWait bounds one hold: the goroutine delivering the backlog may
// be the held one, further up its stack (a Write on another connection
// from a handler run inside a delivery), so a hold that only the link
// could end might deadlock it. A variable for tests, read when a Stack is
// made.
var txBacklogWait = 20 * time.Millisecond

// backlogGate holds TCP Writes while the link's transmit backlog is long.
// It is TCP small queues for a link whose queue has no feedback to
// netstack: netstack counts a segment as sent when the link takes it, so
// 10,000 connections each writing a window queued 50,000 frames (1 s) in
// link/pipe, past their 200 ms retransmission timeout, and every one of
// them timed out and retransmitted.
//
// A Write that finds the backlog above high waits until the link reports
// it down to low (link.TxBacklogger.NotifyTxBacklog), the hysteresis
// letting the released Writes queue a batch each, or until maxWait
// after the first of the held Writes was held, whichever comes first. The
// held Writes sleep on their connections' write channels; a hold allocates
// nothing.
type backlogGate struct {
	link link.TxBacklogger
	high int // a Write waits while more frames than this wait in the link
	low  int // and goes on once the link reports this many or fewer
	// openFn is open, made once: a method value passed on each request
	// would allocate.
	openFn func()
	// timer ends a hold after maxWait (txBacklogWait); Reset per hold,
	// never remade.
	timer   *time.Timer
	maxWait time.Duration
	holds   atomic.Uint64 // Stats.TCPWritesHeld

	mu sync.Mutex
	// gen counts the releases: a Write held in one generation goes on
	// when it changes.
	// +checklocks:mu
	gen uint64
	// held are the write channels of the Writes held in this generation.
	// +checklocks:mu
	held []chan struct{}
}

// newBacklogGate returns the gate for l, nil when l reports no backlog.
// Writes wait above half the link's queue, at most txBacklogMax frames,
// and go on at a quarter of it.
func newBacklogGate(l gstack.LinkEndpoint) *backlogGate {
	bl, ok := l.(link.TxBacklogger)
	if !ok {
		return nil
	}
	g := &backlogGate{link: bl, high: txBacklogMax, maxWait: txBacklogWait}
	if q := bl.TxQueueLen(); q > 0 {
		g.high = min(g.high, max(q/2, 1))
	}
	g.low = g.high / 2
	g.openFn = g.open
	g.timer = time.AfterFunc(time.Hour, g.openFn)
	g.timer.Stop()
	return g
}

// wait holds a Write on the gate, when the backlog is above the bound,
// until the gate opens or expired or done is closed (the Write's
// deadline, the connection's Close), and returns false in the last two
// cases. ch is the connection's write channel, which a token left in by
// another wake-up only makes look again.
func (g *backlogGate) wait(ch chan struct{}, expired, done <-chan struct{}) bool {
	if g.link.TxBacklog() <= g.high {
		return true
	}
	g.holds.Add(1)
	g.mu.Lock()
	gen := g.gen
	g.held = append(g.held, ch)
	first := len(g.held) == 1
	g.mu.Unlock()
	if first { // the hold starts: ask the link, and bound it
		g.timer.Reset(g.maxWait)
		if !g.link.NotifyTxBacklog(g.low, g.openFn) {
			g.open() // drained meanwhile
		}
	}
	for {
		select {
		case <-ch:
		case <-expired:
			return false
		case <-done:
			return false
		}
		g.mu.Lock()
		released := g.gen != gen
		g.mu.Unlock()
		if released {
			return true
		}
	}
}

// open releases the held Writes. It runs on the link's transmitting
// goroutine (NotifyTxBacklog), the timer's, or a Write's, and does not
// block.
func (g *backlogGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.held) == 0 {
		return
	}
	g.gen++
	for i, ch := range g.held {
		signal(ch)
		g.held[i] = nil
	}
	g.held = g.held[:0]
	g.timer.Stop()
}

// close stops the gate's timer (Stack.Close).
func (g *backlogGate) close() {
	if g != nil {
		g.timer.Stop()
	}
}
