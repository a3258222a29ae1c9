package tickwire

import (
	"log/slog"
	"net/netip"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
)

// eventPeriod is how often the event watcher looks at the counters: each
// kind of event yields at most one record per period.
const eventPeriod = time.Second

// maxFailedListed bounds the addresses whose ARP resolution failed that
// the ARP table keeps for the next record; the count covers them all.
const maxFailedListed = 8

// eventKind is a kind of event the watcher summarises: a Stats counter
// (or several) whose movement over a period yields one record.
type eventKind struct {
	level slog.Level
	msg   string
	count func(*eventSnapshot) uint64 // the counter; a record when it moved
	// more, when not nil, names further counters reported with it.
	more []eventCounter
}

type eventCounter struct {
	name  string
	value func(*eventSnapshot) uint64
}

// eventSnapshot is what the watcher compares between two periods: the
// Stats and the counters that are not in Stats.
type eventSnapshot struct {
	Stats
	linkErrors uint64 // IP packets the link failed to write (netstack's OutgoingPacketErrors)
}

// eventKinds are the events Config.Logger receives as summaries. The data
// path only counts (it counted these before the watcher existed); the
// watcher turns the counts into records on its own goroutine.
var eventKinds = []eventKind{
	{level: slog.LevelWarn, msg: "tickwire: ARP resolution failed",
		count: func(s *eventSnapshot) uint64 { return s.ARPTimeouts }},
	{level: slog.LevelWarn, msg: "tickwire: ARP table full: requests from new hosts dropped",
		count: func(s *eventSnapshot) uint64 { return s.ARPTableFull }},
	{level: slog.LevelWarn, msg: "tickwire: connections reset: the peer stopped answering (keepalive, user timeout or retransmission limit)",
		count: func(s *eventSnapshot) uint64 { return s.TCPPeerTimeouts }},
	{level: slog.LevelInfo, msg: "tickwire: connections reset: idle past Config.IdleTimeout",
		count: func(s *eventSnapshot) uint64 { return s.ConnsIdleClosed }},
	{level: slog.LevelWarn, msg: "tickwire: listener accept queue full: handshakes dropped",
		count: func(s *eventSnapshot) uint64 { return s.DropTCPListenFull }},
	{level: slog.LevelWarn, msg: "tickwire: SYN queue full: answering with SYN cookies",
		count: func(s *eventSnapshot) uint64 { return s.TCPSYNCookiesTx },
		more: []eventCounter{
			{"cookies_completed", func(s *eventSnapshot) uint64 { return s.TCPSYNCookiesRx }},
			{"cookies_invalid", func(s *eventSnapshot) uint64 { return s.TCPSYNCookiesBad }},
		}},
	{level: slog.LevelWarn, msg: "tickwire: TCP segments dropped: endpoint queue full",
		count: func(s *eventSnapshot) uint64 { return s.DropTCPQueueFull },
		more: []eventCounter{
			{"retries_admitted", func(s *eventSnapshot) uint64 { return s.TCPQueueRetries }},
		}},
	{level: slog.LevelWarn, msg: "tickwire: UDP datagrams dropped: receive queue full",
		count: func(s *eventSnapshot) uint64 { return s.DropUDPBufferFull }},
	{level: slog.LevelWarn, msg: "tickwire: IPv4 datagrams dropped: incomplete fragments discarded",
		count: func(s *eventSnapshot) uint64 { return s.DropIPv4FragTimeout + s.DropIPv4FragEvicted },
		more: []eventCounter{
			{"timed_out", func(s *eventSnapshot) uint64 { return s.DropIPv4FragTimeout }},
			{"evicted", func(s *eventSnapshot) uint64 { return s.DropIPv4FragEvicted }},
		}},
	{level: slog.LevelWarn, msg: "tickwire: link write errors",
		count: func(s *eventSnapshot) uint64 { return s.linkErrors }},
}

// eventWatch turns counter movements into Config.Logger records: every
// eventPeriod it takes a snapshot and, for each kind whose counter moved,
// logs one record with "count" (the events in the period) and the kind's
// further counters, and for ARP failures the addresses ("addrs", at most
// 8). So a flood costs one record per second per kind, never one per
// packet, and the data path pays nothing: it only counts, as it did.
// Records still go through the Logger's limit of 10 a second.
type eventWatch struct {
	s    *Stack
	prev eventSnapshot
}

// snapshot reads the counters the watcher compares.
func (w *eventWatch) snapshot() eventSnapshot {
	return eventSnapshot{
		Stats:      w.s.Stats(),
		linkErrors: w.s.st.Stats().IP.OutgoingPacketErrors.Value(),
	}
}

// run watches until stop is closed.
func (w *eventWatch) run(stop <-chan struct{}) {
	t := time.NewTicker(eventPeriod)
	defer t.Stop()
	w.prev = w.snapshot()
	var addrs []netip.Addr // reused
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			cur := w.snapshot()
			addrs = w.s.arp.takeFailed(addrs[:0])
			w.report(w.s.log, &cur, addrs)
			w.prev = cur
		}
	}
}

// report logs one record for each kind whose count moved from w.prev to
// cur; addrs are the addresses whose ARP resolution failed meanwhile.
func (w *eventWatch) report(log *eventLog, cur *eventSnapshot, addrs []netip.Addr) {
	for i := range eventKinds {
		k := &eventKinds[i]
		n := k.count(cur) - k.count(&w.prev)
		if n == 0 {
			continue
		}
		attrs := make([]slog.Attr, 0, 2+len(k.more))
		attrs = append(attrs, slog.Uint64("count", n))
		for _, m := range k.more {
			attrs = append(attrs, slog.Uint64(m.name, m.value(cur)-m.value(&w.prev)))
		}
		if i == 0 && len(addrs) > 0 { // ARP resolution failed
			attrs = append(attrs, slog.Any("addrs", append([]netip.Addr(nil), addrs...)))
		}
		log.log(k.level, k.msg, attrs...)
	}
}

// watchEvents starts the event watcher when the Stack has a Logger.
func (s *Stack) watchEvents() {
	if s.log == nil {
		return
	}
	w := &eventWatch{s: s}
	s.goroutines.Add(1)
	go func() {
		defer s.goroutines.Done()
		w.run(s.done)
	}()
}

// noteFailedLocked keeps addr, whose resolution just failed, for the event
// watcher's next record, unless maxFailedListed are waiting already.
//
// +checklocks:t.mu
func (t *arpTable) noteFailedLocked(addr tcpip.Address) {
	if len(t.failed) < maxFailedListed {
		t.failed = append(t.failed, addr)
	}
}

// takeFailed appends to dst the addresses noted since the last call and
// forgets them.
func (t *arpTable) takeFailed(dst []netip.Addr) []netip.Addr {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, a := range t.failed {
		dst = append(dst, netip.AddrFrom4(a.As4()))
	}
	t.failed = t.failed[:0]
	return dst
}
