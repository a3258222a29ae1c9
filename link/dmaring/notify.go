package dmaring

import "errors"

// Notifier is an in-process wake-up from one side to the other: an eventfd
// on Linux (as gVisor's link/sharedmem uses, and what a device in another
// process would be handed over a Unix socket), a channel elsewhere. Notify
// never blocks; Wait blocks until a Notify since the last Wait, or Close.
// Notifications do not queue: several Notify calls wake one Wait.
//
// A Notifier is what an interrupt is to mqnic's driver: the device notifies
// an event queue's Notifier when it writes an event to the queue while the
// queue is armed; the host notifies the device's Notifier after a doorbell
// when the device said it sleeps (HdrDevSleep).
type Notifier struct {
	impl notifier
	fx   *futexWord // not nil: a futex word of a shared region (RegionWakeups)
}

// NewNotifier returns a Notifier.
func NewNotifier() (*Notifier, error) {
	n, err := newNotifier()
	if err != nil {
		return nil, err
	}
	return &Notifier{impl: n}, nil
}

// Notify wakes the waiter, or the next Wait. It does not allocate.
func (n *Notifier) Notify() {
	if n.fx != nil {
		n.fx.notify()
		return
	}
	n.impl.notify()
}

// Wait blocks until a notification or Close; it returns ErrClosed once the
// Notifier is closed.
func (n *Notifier) Wait() error {
	if n.fx != nil {
		return n.fx.wait()
	}
	return n.impl.wait()
}

// Close wakes a Wait and makes every later one return ErrClosed.
func (n *Notifier) Close() error {
	if n.fx != nil {
		n.fx.close()
		return nil
	}
	return n.impl.close()
}

// Wakeups are the Notifiers of one region: one per event queue and one for
// the device. The host creates them with the region and hands them to an
// in-process device.
type Wakeups struct {
	EQ     []*Notifier
	Device *Notifier
}

// RegionWakeups returns Notifiers on the wake-up words of r's header, for a
// host and a device in two processes that map r (Config.Shared): a Notify
// bumps the word and wakes, with a futex, whoever waits on it in either
// process. Each side makes its own; a notification sent before the other
// side made its Notifiers is not seen by them, which the arm-then-look
// protocol of both sides allows. Close wakes this process's waiters only.
// Linux only.
func RegionWakeups(r *Region) (*Wakeups, error) {
	if r.File() == nil {
		return nil, errors.New("dmaring: RegionWakeups needs a file-backed region")
	}
	if !futexSupported {
		return nil, ErrNotSupported
	}
	w := &Wakeups{Device: &Notifier{fx: newFutexWord(r, HdrWakeDevice)}}
	for i := range r.layout.Queues {
		w.EQ = append(w.EQ, &Notifier{fx: newFutexWord(r, HdrWakeEQ+4*i)})
	}
	return w, nil
}

func newWakeups(queues int) (*Wakeups, error) {
	w := &Wakeups{}
	var err error
	if w.Device, err = NewNotifier(); err != nil {
		return nil, err
	}
	for range queues {
		n, err := NewNotifier()
		if err != nil {
			w.close()
			return nil, err
		}
		w.EQ = append(w.EQ, n)
	}
	return w, nil
}

func (w *Wakeups) close() {
	if w.Device != nil {
		w.Device.Close()
	}
	for _, n := range w.EQ {
		n.Close()
	}
}
