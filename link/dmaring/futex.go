package dmaring

import "sync/atomic"

// futexWord is a Notifier on a word of a shared region: a counter that
// Notify bumps and Wait waits to see move (futexWait, futexWake: Linux
// futexes on the shared mapping, so they work across processes).
type futexWord struct {
	r      *Region
	off    int
	seen   uint32 // the counter's value when this side last returned from wait
	closed atomic.Bool
}

func newFutexWord(r *Region, off int) *futexWord {
	return &futexWord{r: r, off: off, seen: r.Load32(off)}
}

func (f *futexWord) notify() {
	f.r.Add32(f.off, 1)
	futexWake(f.r, f.off)
}

// wait returns once the counter moved since the last return, or
// ErrClosed. One goroutine waits on a Notifier at a time.
func (f *futexWord) wait() error {
	for {
		if f.closed.Load() {
			return ErrClosed
		}
		v := f.r.Load32(f.off)
		if v != f.seen {
			f.seen = v
			return nil
		}
		futexWait(f.r, f.off, v)
	}
}

func (f *futexWord) close() {
	f.closed.Store(true)
	f.r.Add32(f.off, 1)
	futexWake(f.r, f.off)
}
