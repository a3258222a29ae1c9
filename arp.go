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
// events (oldest first), refuses ARP packets that would add an entry to a
// full table, and evicts the oldest entries on a goroutine of its own:
// netstack calls the dispatcher with its neighbor locks held, so neither the
// callbacks nor the link's receive path may call back into the table.
//
// Lock order:
//
//	arpTable.mu
type arpTable struct {
	max int

	mu sync.Mutex
	// +checklocks:mu
	order *list.List // of tcpip.Address, oldest first
	// +checklocks:mu
	index map[tcpip.Address]*list.Element
	// +checklocks:mu
	room bool // a packet was refused: evict one below the bound

	kick chan struct{} // capacity 1: wakes the evictor
	done chan struct{}
	wg   sync.WaitGroup

	misses, timeouts, evictions, full atomic.Uint64
}

var _ gstack.NUDDispatcher = (*arpTable)(nil)

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

// victims pops the oldest entries above the bound (one more when a packet
// was refused) and returns them.
func (t *arpTable) victims() []tcpip.Address {
	limit := t.max
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.room {
		limit--
		t.room = false
	}
	var out []tcpip.Address
	for t.order.Len() > limit {
		e := t.order.Front()
		addr := e.Value.(tcpip.Address)
		t.order.Remove(e)
		delete(t.index, addr)
		out = append(out, addr)
	}
	return out
}

func (t *arpTable) wake() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
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
	if _, ok := t.index[e.Addr]; !ok {
		t.index[e.Addr] = t.order.PushBack(e.Addr)
	}
	over := t.order.Len() > limit
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
	}
}

// OnNeighborRemoved implements stack.NUDDispatcher.OnNeighborRemoved.
func (t *arpTable) OnNeighborRemoved(_ tcpip.NICID, e gstack.NeighborEntry) {
	t.forget(e.Addr)
}

func (t *arpTable) forget(addr tcpip.Address) {
	t.mu.Lock()
	if el, ok := t.index[addr]; ok {
		t.order.Remove(el)
		delete(t.index, addr)
	}
	t.mu.Unlock()
}
