package tickwire

import (
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/waiter"
)

// deadline is one direction's deadline: a channel that is closed when the
// deadline passes. When it passes it also signals wake, when set: the
// channel a blocked call of that direction waits on, so that the call
// waits on that one channel (a receive) instead of selecting over it and
// the deadline (a select parks on every channel it names: about 1,500
// instructions more per wait, measured with callgrind).
type deadline struct {
	mu sync.Mutex
	// +checklocks:mu
	timer *time.Timer
	// +checklocks:mu
	ch   chan struct{}
	wake chan struct{} // set before first use, never changed
}

// newDeadline returns a deadline whose channel is made when first needed,
// so that a socket that never reads or writes (a UDP listener with a
// handler) does not pay for one.
func newDeadline() deadline { return deadline{} }

// expired returns the channel to wait on; it is valid across set calls that
// only move the deadline.
func (d *deadline) expired() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ch == nil {
		d.ch = make(chan struct{})
	}
	return d.ch
}

// set arms the deadline at t; the zero t disarms it.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	select {
	case <-d.ch: // it passed: a new deadline needs a fresh channel
		d.ch = make(chan struct{})
	default:
	}
	if t.IsZero() {
		return
	}
	if d.ch == nil {
		d.ch = make(chan struct{})
	}
	ch := d.ch
	if dur := time.Until(t); dur <= 0 {
		close(ch)
		signal(d.wake)
		return
	}
	d.timer = time.AfterFunc(time.Until(t), func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		// A set that raced with this timer may have closed or replaced ch.
		if d.ch == ch {
			select {
			case <-ch:
			default:
				close(ch)
				signal(d.wake)
			}
		}
	})
}

// signal sends on ch, a channel of capacity 1, unless a signal already
// waits in it or ch is nil.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (d *deadline) stop() {
	d.mu.Lock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	d.mu.Unlock()
}

// sock is what the TCP and UDP wrappers share: the netstack endpoint, its
// waiter queue with one permanently registered entry per direction (so that
// blocking allocates nothing), the deadlines and the closed state.
type sock struct {
	ep tcpip.Endpoint
	wq *waiter.Queue

	readEntry waiter.Entry
	readCh    chan struct{}
	rd        deadline

	writeEntry waiter.Entry
	writeCh    chan struct{}
	wd         deadline

	closed atomic.Bool
	done   chan struct{}

	// busyPoll is how long a wait spins first (Config.BusyPoll; 0 outside
	// latency mode).
	busyPoll time.Duration
	// lockThread locks the handler's goroutine to its OS thread
	// (Config.LockOSThread).
	lockThread bool
}

func (k *sock) init(wq *waiter.Queue, ep tcpip.Endpoint, cfg *Config) {
	k.initReadOnly(wq, ep, cfg)
	k.writeEntry, k.writeCh = waiter.NewChannelEntry(waiter.WritableEvents | waiter.EventHUp | waiter.EventErr)
	k.wd.wake = k.writeCh
	wq.EventRegister(&k.writeEntry)
}

// initReadOnly is init for a socket that never waits to write (a UDPConn,
// whose writes never block): writeCh stays nil, sparing a channel.
func (k *sock) initReadOnly(wq *waiter.Queue, ep tcpip.Endpoint, cfg *Config) {
	k.ep, k.wq, k.busyPoll, k.lockThread = ep, wq, cfg.BusyPoll, cfg.LockOSThread
	k.rd, k.wd = newDeadline(), newDeadline()
	k.done = make(chan struct{})
	k.readEntry, k.readCh = waiter.NewChannelEntry(waiter.ReadableEvents | waiter.EventHUp | waiter.EventErr)
	k.rd.wake = k.readCh
	wq.EventRegister(&k.readEntry)
}

// handlerLoop is the body of a handler's own goroutine: it calls run
// whenever the socket may hold something for the handler, until run reports
// finished, Close, or stop (the Stack's Close). Before sleeping it spins for
// busyPoll; a run that found work starts the spin afresh. With
// Config.LockOSThread it runs locked to its OS thread.
func (k *sock) handlerLoop(stop <-chan struct{}, run func() (found, finished bool)) {
	if k.lockThread {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	spin := spinner{budget: k.busyPoll}
	for {
		found, finished := run()
		if finished {
			return
		}
		if found {
			spin = spinner{budget: k.busyPoll}
		}
		select {
		case <-k.readCh:
			continue
		case <-k.done:
			return
		case <-stop:
			return
		default:
		}
		if spin.again() {
			continue
		}
		select {
		case <-k.readCh:
		case <-k.done:
			return
		case <-stop:
			return
		}
	}
}

// shut closes the endpoint once, reporting false when already closed.
func (k *sock) shut() bool {
	if !k.closed.CompareAndSwap(false, true) {
		return false
	}
	close(k.done)
	signal(k.readCh) // for waits on the one channel (sock.wait)
	signal(k.writeCh)
	if k.ep != nil { // a UDPConn's is its own (UDPConn.endpoint)
		k.ep.Close()
	}
	k.wq.EventUnregister(&k.readEntry)
	if k.writeCh != nil {
		k.wq.EventUnregister(&k.writeEntry)
	}
	k.rd.stop()
	k.wd.stop()
	return true
}

// check returns the error a call must fail with before trying: closed or
// past its deadline.
func (k *sock) check(expired <-chan struct{}) error {
	if k.closed.Load() {
		return net.ErrClosed
	}
	select {
	case <-expired:
		return os.ErrDeadlineExceeded
	default:
		return nil
	}
}

// wait blocks until ch, the socket's readCh or writeCh, signals, or stop
// closes. The direction's deadline and Close signal ch too (deadline.wake,
// shut), so a nil stop waits on ch alone; ch may also signal for none of
// these (an event since consumed, an earlier deadline): the caller checks
// again.
func (k *sock) wait(ch, stop <-chan struct{}) {
	if stop == nil {
		<-ch
		return
	}
	select {
	case <-ch:
	case <-stop:
	case <-k.done:
	}
}

// cause converts a netstack error, reporting net.ErrClosed after Close.
func (k *sock) cause(err tcpip.Error) error {
	if k.closed.Load() {
		return net.ErrClosed
	}
	return convertError(err)
}

// SetDeadline sets both deadlines.
func (k *sock) SetDeadline(t time.Time) error {
	k.rd.set(t)
	k.wd.set(t)
	return nil
}

// SetReadDeadline sets the deadline for pending and future reads.
func (k *sock) SetReadDeadline(t time.Time) error {
	k.rd.set(t)
	return nil
}

// SetWriteDeadline sets the deadline for pending and future writes.
func (k *sock) SetWriteDeadline(t time.Time) error {
	k.wd.set(t)
	return nil
}

// spinner is one wait's busy-poll budget.
type spinner struct {
	budget time.Duration
	start  time.Time
}

// again reports whether the caller should retry at once rather than sleep:
// true while the budget lasts, after yielding the P (runtime.Gosched) so that
// the goroutine it waits for can run here. A false resets the budget for the
// next wait.
func (s *spinner) again() bool {
	if s.budget <= 0 {
		return false
	}
	now := time.Now()
	if s.start.IsZero() {
		s.start = now
	} else if now.Sub(s.start) > s.budget {
		s.start = time.Time{}
		return false
	}
	runtime.Gosched()
	return true
}
