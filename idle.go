package tickwire

import (
	"sync"
	"sync/atomic"
	"time"
)

// idleSweeper resets the connections on which nothing was read or written
// for Config.IdleTimeout. Each connection counts its reads and writes that
// moved data (TCPConn.activity, one atomic add per call); every timeout/4
// the sweeper compares each count with the one it saw last and resets the
// connections whose count has not moved for timeout. The data path pays
// nothing else: no timer per connection, none re-armed per call, and the
// sweeper's work is a map walk per period, off every hot path.
type idleSweeper struct {
	timeout time.Duration
	period  time.Duration // between sweeps: timeout/4
	closed  atomic.Uint64 // connections reset (Stats.ConnsIdleClosed)

	mu sync.Mutex
	// +checklocks:mu
	conns map[*TCPConn]idleMark
}

// idleMark is what the sweeper last saw of a connection.
type idleMark struct {
	activity uint64    // TCPConn.activity when it last moved
	since    time.Time // when the sweeper saw it move (or the connection open)
}

func newIdleSweeper(timeout time.Duration) *idleSweeper {
	return &idleSweeper{timeout: timeout, period: timeout / 4, conns: make(map[*TCPConn]idleMark)}
}

// add starts watching c, counting its idle time from now.
func (w *idleSweeper) add(c *TCPConn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.conns[c] = idleMark{activity: c.activity.Load(), since: time.Now()}
}

// remove stops watching c (its Close).
func (w *idleSweeper) remove(c *TCPConn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.conns, c)
}

// run sweeps every period until stop is closed.
func (w *idleSweeper) run(stop <-chan struct{}) {
	t := time.NewTicker(w.period)
	defer t.Stop()
	var expired []*TCPConn // reused across sweeps
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			expired = w.sweep(now, expired[:0])
			for i, c := range expired {
				c.closeIdle(&w.closed)
				expired[i] = nil
			}
		}
	}
}

// sweep appends to expired, and stops watching, the connections idle for
// timeout at now. The caller resets them after the lock is released.
func (w *idleSweeper) sweep(now time.Time, expired []*TCPConn) []*TCPConn {
	w.mu.Lock()
	defer w.mu.Unlock()
	for c, m := range w.conns {
		switch a := c.activity.Load(); {
		case a != m.activity:
			w.conns[c] = idleMark{activity: a, since: now}
		case now.Sub(m.since) >= w.timeout:
			expired = append(expired, c)
			delete(w.conns, c)
		}
	}
	return expired
}
