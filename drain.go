package tickwire

import (
	"context"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
)

// openSet holds what Stack.Shutdown drains: the listeners and connections
// the program holds, and the connections it closed whose last bytes or FIN
// the peer had not acknowledged yet (netstack sends them after Close).
// It is touched when a listener or connection opens or closes, never on
// the data path.
type openSet struct {
	mu sync.Mutex
	// +checklocks:mu
	conns map[*TCPConn]struct{}
	// +checklocks:mu
	closing map[*TCPConn]struct{}
	// +checklocks:mu
	pruneAt int // prune closing when it reaches this size
	// +checklocks:mu
	listeners map[*TCPListener]struct{}
	// +checklocks:mu
	draining bool // Shutdown began
}

// addListener adds l, reporting false when Shutdown has begun.
func (o *openSet) addListener(l *TCPListener) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.draining {
		return false
	}
	if o.listeners == nil {
		o.listeners = make(map[*TCPListener]struct{})
	}
	o.listeners[l] = struct{}{}
	return true
}

func (o *openSet) removeListener(l *TCPListener) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.listeners, l)
}

// addConn adds c, reporting whether Shutdown has begun: then c is to be
// drained at once.
func (o *openSet) addConn(c *TCPConn) (draining bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.conns == nil {
		o.conns = make(map[*TCPConn]struct{})
	}
	o.conns[c] = struct{}{}
	return o.draining
}

// closeConn moves c, which the program closed, to the closing set while
// the peer has not acknowledged all it sent, forgetting the connections
// there that have drained since when the set has doubled.
func (o *openSet) closeConn(c *TCPConn) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.conns, c)
	if c.drained() {
		return
	}
	if o.closing == nil {
		o.closing = make(map[*TCPConn]struct{})
	}
	o.closing[c] = struct{}{}
	if len(o.closing) >= o.pruneAt {
		for c := range o.closing {
			if c.drained() {
				delete(o.closing, c)
			}
		}
		o.pruneAt = max(2*len(o.closing), 64)
	}
}

// beginDrain marks Shutdown as begun and returns the listeners and the
// open connections.
func (o *openSet) beginDrain() ([]*TCPListener, []*TCPConn) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.draining = true
	ls := make([]*TCPListener, 0, len(o.listeners))
	for l := range o.listeners {
		ls = append(ls, l)
	}
	cs := make([]*TCPConn, 0, len(o.conns))
	for c := range o.conns {
		cs = append(cs, c)
	}
	return ls, cs
}

// drained reports whether every connection, open or closing, has drained.
func (o *openSet) drained() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, set := range []map[*TCPConn]struct{}{o.conns, o.closing} {
		for c := range set {
			if !c.drained() {
				return false
			}
		}
	}
	return true
}

// drained reports whether the peer has acknowledged everything c sent, its
// FIN included, or the connection is gone (reset, closed).
func (c *TCPConn) drained() bool {
	tep, ok := c.ep.(*tcp.Endpoint)
	if !ok {
		return true
	}
	switch tep.EndpointState() {
	case tcp.StateFinWait2, tcp.StateTimeWait, tcp.StateClose, tcp.StateError:
		return true
	}
	return false
}

// waitDrained polls done until it reports true or ctx ends, as
// http.Server.Shutdown polls its connections: every millisecond at first,
// backing off to every 50 ms. It returns ctx's error when ctx ended first.
func waitDrained(ctx context.Context, done func() bool) error {
	wait := time.Millisecond
	t := time.NewTimer(wait)
	defer t.Stop()
	for !done() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 50*time.Millisecond)
		t.Reset(wait)
	}
	return nil
}
