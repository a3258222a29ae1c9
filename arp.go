package tickwire

import (
	"container/list"
	"sync"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// arpTable bounds netstack's dynamic neighbor table, which holds 512 entries
// with no knob. It follows the table through netstack's NUD dispatcher
// events, refuses ARP packets that would add an entry to a full table, and
// evicts on a goroutine of its own: netstack calls the dispatcher with its
// neighbor locks held, so neither the callbacks nor the link's receive path
// may call back into the table. Eviction takes the oldest entry that is not
// in use (Stale, Incomplete, Unreachable) before any in use (Reachable,
// Delay, Probe), so a flood of ARP requests from new hosts does not push
// out the peers a program is talking to. An entry chosen for eviction stays
// counted until netstack reports it removed, so admit never lets the table
// grow past the bound while the evictor is still at work.
//
// Lock order:
//
//	arpTable.mu
type arpTable struct {
	max int

	mu sync.Mutex
	// +checklocks:mu
	order *list.List // of *arpEntry, oldest first
	// +checklocks:mu
	index map[tcpip.Address]*list.Element
	// +checklocks:mu
	room bool // a packet was refused: evict one below the bound
	// +checklocks:mu
	evicting int // entries in order handed to the evictor, not yet removed
	// +checklocks:mu
	failed []tcpip.Address // resolutions given up, for the event watcher (events.go)

	kick chan struct{} // capacity 1: wakes the evictor
	done chan struct{}
	wg   sync.WaitGroup

	misses, timeouts, evictions, full atomic.Uint64
}

var _ gstack.NUDDispatcher = (*arpTable)(nil)

// arpEntry is one tracked dynamic entry.
type arpEntry struct {
	addr     tcpip.Address
	state    gstack.NeighborState
	evicting bool // handed to the evictor; still in netstack's table
}

// inUse reports whether the entry serves current traffic.
func (e *arpEntry) inUse() bool {
	switch e.state {
	case gstack.Reachable, gstack.Delay, gstack.Probe:
		return true
	}
	return false
}

func newARPTable(max int) *arpTable {
	return &arpTable{
		max:   max,
		order: list.New(),
		index: make(map[tcpip.Address]*list.Element),
		kick:  make(chan struct{}, 1),
		done:  make(chan struct{}),
	}
}

// start runs the evictor until stop; remove deletes one entry from netstack.
func (t *arpTable) start(remove func(tcpip.Address)) {
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		for {
			select {
			case <-t.done:
				return
			case <-t.kick:
				for _, addr := range t.victims() {
					remove(addr)
					// netstack reports the removal through
					// OnNeighborRemoved; an entry it no longer
					// had reports nothing, so stop counting it here.
					t.forgetEvicted(addr)
					t.evictions.Add(1)
				}
			}
		}
	}()
}

// stop ends the evictor and waits for it.
func (t *arpTable) stop() {
	close(t.done)
	t.wg.Wait()
}

// victims marks for eviction the entries above the bound (one more when a
// packet was refused), idle ones first, oldest first, and returns them. They
// stay tracked, and counted against the bound, until netstack removes them.
func (t *arpTable) victims() []tcpip.Address {
	limit := t.max
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.room {
		limit--
		t.room = false
	}
	var out []tcpip.Address
	for _, idleOnly := range []bool{true, false} {
		for el := t.order.Front(); el != nil && t.order.Len()-t.evicting > limit; el = el.Next() {
			if e := el.Value.(*arpEntry); !e.evicting && (!idleOnly || !e.inUse()) {
				e.evicting = true
				t.evicting++
				out = append(out, e.addr)
			}
		}
	}
	return out
}

func (t *arpTable) wake() {
	signal(t.kick)
}

func (t *arpTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.order.Len()
}

// admit reports whether an inbound ARP packet may reach netstack. netstack
// adds an entry only for a request aimed at our address from a sender it
// does not know; such a request is refused while the table is full, and the
// evictor makes room for the sender's next try.
func (t *arpTable) admit(arp header.ARP, ours tcpip.Address) bool {
	if !arp.IsValid() || arp.Op() != header.ARPRequest || tcpip.AddrFrom4Slice(arp.ProtocolAddressTarget()) != ours {
		return true
	}
	sender := tcpip.AddrFrom4Slice(arp.ProtocolAddressSender())
	limit := t.max
	t.mu.Lock()
	_, known := t.index[sender]
	full := !known && t.order.Len() >= limit
	if full {
		t.room = true
	}
	t.mu.Unlock()
	if full {
		t.full.Add(1)
		t.wake()
	}
	return !full
}

// OnNeighborAdded implements stack.NUDDispatcher.OnNeighborAdded.
func (t *arpTable) OnNeighborAdded(_ tcpip.NICID, e gstack.NeighborEntry) {
	if e.State == gstack.Static {
		return
	}
	if e.State == gstack.Incomplete {
		t.misses.Add(1)
	}
	limit := t.max
	t.mu.Lock()
	if el, ok := t.index[e.Addr]; ok {
		el.Value.(*arpEntry).state = e.State
	} else {
		t.index[e.Addr] = t.order.PushBack(&arpEntry{addr: e.Addr, state: e.State})
	}
	over := t.order.Len()-t.evicting > limit
	t.mu.Unlock()
	if over {
		t.wake()
	}
}

// OnNeighborChanged implements stack.NUDDispatcher.OnNeighborChanged.
func (t *arpTable) OnNeighborChanged(_ tcpip.NICID, e gstack.NeighborEntry) {
	switch e.State {
	case gstack.Incomplete:
		t.misses.Add(1) // an unreachable entry being retried
	case gstack.Unreachable:
		t.timeouts.Add(1)
	case gstack.Static:
		t.forget(e.Addr)
		return
	}
	t.mu.Lock()
	if el, ok := t.index[e.Addr]; ok {
		el.Value.(*arpEntry).state = e.State
	}
	if e.State == gstack.Unreachable {
		t.noteFailedLocked(e.Addr)
	}
	t.mu.Unlock()
}

// OnNeighborRemoved implements stack.NUDDispatcher.OnNeighborRemoved.
func (t *arpTable) OnNeighborRemoved(_ tcpip.NICID, e gstack.NeighborEntry) {
	t.forget(e.Addr)
}

func (t *arpTable) forget(addr tcpip.Address) {
	t.mu.Lock()
	if el, ok := t.index[addr]; ok {
		t.removeLocked(el)
	}
	t.mu.Unlock()
}

// forgetEvicted stops tracking addr if it is still the entry the evictor
// chose; a newer entry for the same address is kept.
func (t *arpTable) forgetEvicted(addr tcpip.Address) {
	t.mu.Lock()
	if el, ok := t.index[addr]; ok && el.Value.(*arpEntry).evicting {
		t.removeLocked(el)
	}
	t.mu.Unlock()
}

// +checklocks:t.mu
func (t *arpTable) removeLocked(el *list.Element) {
	e := el.Value.(*arpEntry)
	if e.evicting {
		t.evicting--
	}
	t.order.Remove(el)
	delete(t.index, e.addr)
}
