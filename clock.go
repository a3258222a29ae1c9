package tickwire

import (
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/tcpip"

	"github.com/tickwire/tickwire/internal/netstackunsafe"
)

// monoClock is netstack's standard clock with a cheaper NowMonotonic.
// netstack reads NowMonotonic several times per segment (receive time, RTT
// sample, send time, timers); tcpip.NewStdClock derives it from time.Since,
// which reads the wall clock too and converts through time.Time. monoClock
// reads the runtime's monotonic clock alone.
type monoClock struct {
	tcpip.Clock // Now and AfterFunc
	stamp       *clockStamp
}

// NowMonotonic implements tcpip.Clock.NowMonotonic.
func (c monoClock) NowMonotonic() tcpip.MonotonicTime {
	return netstackunsafe.Monotonic(c.stamp.read())
}

// clockStamp lets latency mode's frame delivery read the clock once. netstack
// reads it about seven times for a request and its answer (arrival of the
// segment, RTT sample, retransmit timer, neighbour confirmation, send time).
// While a delivery is frozen, every reading returns the time the frame
// arrived, as Linux stamps a segment once (tcp_mstamp) for all of its
// processing.
//
// The stamp is one value for the whole stack: a reading on another goroutine
// during a frozen delivery also gets it, that is, a time up to the length of
// netstack's processing of one frame in the past (microseconds). netstack
// only compares its own readings and sets timers from them, so that can make
// a timer fire that much early or an RTT sample that much long. A user's
// handler never runs frozen (its duration is unbounded), and one delivery
// at a time freezes: a nested or concurrent one reads the stamp already set.
type clockStamp struct {
	ns      atomic.Int64  // 0: not frozen
	freezes atomic.Uint64 // times set, for tests
}

// read returns the stamp if one is set, else the time now. A nil stamp is
// never frozen.
func (s *clockStamp) read() int64 {
	if s != nil {
		if ns := s.ns.Load(); ns != 0 {
			return ns
		}
	}
	return netstackunsafe.Nanotime()
}

// freeze stamps the time now unless a stamp is set, and reports whether it
// did: the caller then owns the stamp and must thaw it.
func (s *clockStamp) freeze() bool {
	if s == nil || s.ns.Load() != 0 || !s.ns.CompareAndSwap(0, netstackunsafe.Nanotime()) {
		return false
	}
	s.freezes.Add(1)
	return true
}

// thaw clears the stamp if owned says the caller set it.
func (s *clockStamp) thaw(owned bool) {
	if owned {
		s.ns.Store(0)
	}
}

// newClock returns the clock a Stack gives netstack; stamp is nil outside
// latency mode.
func newClock(stamp *clockStamp) tcpip.Clock {
	std := tcpip.NewStdClock()
	if !netstackunsafe.MonotonicAvailable() {
		return std
	}
	return monoClock{std, stamp}
}
