package tickwire

import (
	"sync"

	"gvisor.dev/gvisor/pkg/waiter"
)

// chanEntry is a waiter entry that signals its channel (cap 1), as
// waiter.NewChannelEntry makes, pooled: a dial and an accept each wait on
// one, and making it cost two allocations a call (the entry, which
// EventRegister makes escape, and the channel).
type chanEntry struct {
	entry waiter.Entry
	ch    chan struct{}
}

var chanEntries = sync.Pool{New: func() any { return &chanEntry{ch: make(chan struct{}, 1)} }}

// registerChanEntry registers a pooled chanEntry for mask on q. Unregister
// it with unregister, after which nothing may use it.
func registerChanEntry(q *waiter.Queue, mask waiter.EventMask) *chanEntry {
	e := chanEntries.Get().(*chanEntry)
	select {
	case <-e.ch: // a signal its last user did not take
	default:
	}
	e.entry.Init(waiter.ChannelNotifier(e.ch), mask)
	q.EventRegister(&e.entry)
	return e
}

// unregister removes e from q and returns it to the pool: q notifies it no
// more once EventUnregister has returned.
func (e *chanEntry) unregister(q *waiter.Queue) {
	q.EventUnregister(&e.entry)
	chanEntries.Put(e)
}
