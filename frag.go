package tickwire

import (
	"sync"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// IPv4 reassembly's bounds (fragTable).
const (
	// fragDatagrams is the number of datagrams in reassembly at once.
	fragDatagrams = 64
	// fragMemory bounds the fragments held, counted as netstack counts
	// them (stack.PacketBuffer.MemSize): each one's bytes as the link
	// delivered them, Ethernet header and padding included, plus the
	// PacketBuffer.
	fragMemory = 1 << 20
	// fragPieces is the number of fragments a datagram may arrive in: a
	// 65515-byte datagram cut for the minimum MTU of 576 makes 120.
	fragPieces = 128
	// fragTimeout is the time a datagram has to complete from its first
	// fragment, netstack's and Linux's.
	fragTimeout = ipv4.ReassembleTimeout
	// fragMaxEnd bounds a datagram's payload, as Linux does: 65535 bytes
	// minus the minimum header.
	fragMaxEnd = 0xffff - header.IPv4MinimumSize
)

// isFragment reports whether b, the first bytes of an IPv4 header, belong
// to a fragment: More Fragments set or a non-zero offset.
func isFragment(b []byte) bool { return b[6]&0x3f|b[7] != 0 }

// fragTable reassembles inbound IPv4 datagrams in place of netstack, which
// never sees a fragment. netstack's reassembly drops the oldest datagrams at
// a 4 MiB memory limit without counting them, and neither that limit nor its
// table can be set; here every bound is tickwire's own and every datagram
// discarded is counted:
//   - at most fragDatagrams (64) datagrams and fragMemory (1 MiB) of
//     fragments are held. A fragment that needs room beyond either makes
//     the oldest datagrams (by first fragment) be discarded until it fits
//     [evicted]: on a LAN a datagram's fragments arrive microseconds apart,
//     so the oldest incomplete datagram is the least likely to complete and
//     the newest the most useful, and incomplete datagrams (a lost
//     fragment, a flood) cannot lock out the next ones;
//   - a datagram still incomplete fragTimeout (30 s) after its first
//     fragment is discarded [timedOut]. Unlike netstack, no ICMP time
//     exceeded is sent;
//   - a fragment with bad lengths (empty, beyond 65515 bytes of payload, a
//     non-final one not a multiple of 8 bytes) is dropped, and one that
//     overlaps a fragment held, conflicts with the datagram's end, or is
//     its 129th piece is dropped with the datagram [malformed]; an exact
//     duplicate is dropped alone, as netstack and Linux do, uncounted since
//     its bytes arrive with the first copy;
//   - a fragment addressed to another unicast address is dropped [notForUs],
//     as netstack drops it before reassembly.
//
// A complete datagram is rebuilt as one packet: the first fragment's link
// header and IPv4 header (options included; More Fragments and offset
// cleared, length and checksum set), then the payload, copied once. The
// wire passes it on as if it had arrived whole.
//
// Memory: the table and its piece arrays (about 130 KiB) are allocated at
// the first fragment; after that nothing is allocated per fragment but the
// reassembled packet (one buffer chunk), and a timer reset once per 30 s at
// most.
//
// Safe for concurrent use. Lock order: mu is a leaf; nothing but packet
// reference counting and the clock is called with it held.
type fragTable struct {
	clock  tcpip.Clock
	self   tcpip.Address // the stack's address
	bcast  tcpip.Address // its subnet's broadcast address
	maxMem int           // fragMemory; tests lower it

	// The counters Stats reports, one name a line (checklocks misplaces the
	// annotations of a struct with a multi-name field).
	reassembled atomic.Uint64 // IPv4Reassembled
	timedOut    atomic.Uint64 // DropIPv4FragTimeout
	evicted     atomic.Uint64 // DropIPv4FragEvicted
	malformed   atomic.Uint64 // in DropIPv4Malformed
	notForUs    atomic.Uint64 // in DropIPv4NotForUs

	mu sync.Mutex
	// ds is the table, nil until the first fragment.
	// +checklocks:mu
	ds *[fragDatagrams]fragDatagram
	// +checklocks:mu
	n int // datagrams in ds
	// +checklocks:mu
	mem int // memory charged for the fragments held
	// +checklocks:mu
	seq uint64 // the last datagram's arrival number
	// timer runs expire; nil until first armed.
	// +checklocks:mu
	timer tcpip.Timer
	// armed is set while timer is due to fire.
	// +checklocks:mu
	armed bool
	// +checklocks:mu
	closed bool
}

// fragKey identifies a datagram (RFC 791 section 2.3).
type fragKey struct {
	src, dst [4]byte
	id       uint16
	proto    uint8
}

// fragDatagram is a datagram in reassembly. pieces[:n] are its fragments,
// sorted by offset, disjoint.
type fragDatagram struct {
	used     bool
	key      fragKey
	seq      uint64              // arrival order, for eviction
	deadline tcpip.MonotonicTime // first fragment + fragTimeout
	end      int                 // payload length, known from the final fragment; -1 until then
	covered  int                 // payload bytes held
	mem      int                 // memory charged
	n        int
	pieces   [fragPieces]fragPiece
}

// fragPiece is a fragment held, with a reference of the table's own.
type fragPiece struct {
	pkt         *gstack.PacketBuffer
	first, last uint16 // payload bytes, offsets in the datagram
	hlen        uint8  // the fragment's IPv4 header length
	final       bool   // More Fragments clear
}

// fragment is what parseFragment found in an inbound fragment.
type fragment struct {
	key         fragKey
	first, last uint16
	hlen        uint8
	final       bool
}

// fragVerdict is parseFragment's and place's judgement of a fragment.
type fragVerdict uint8

const (
	fragOK        fragVerdict = iota
	fragMalformed             // dropped and counted in malformed
	fragNotForUs              // dropped and counted in notForUs
	fragDuplicate             // an exact copy of a piece held: dropped
)

func newFragTable(clock tcpip.Clock, self, bcast tcpip.Address) *fragTable {
	return &fragTable{clock: clock, self: self, bcast: bcast, maxMem: fragMemory}
}

// parseFragment checks pkt, an IPv4 fragment (isFragment) whose header
// checksum was verified, network header not yet parsed. The header checks
// are netstack's (header.IPv4.IsValid), in netstack's order.
func (t *fragTable) parseFragment(pkt *gstack.PacketBuffer) (fragment, fragVerdict) {
	var f fragment
	size := pkt.Data().Size()
	b, ok := pkt.Data().PullUp(header.IPv4MinimumSize)
	if !ok {
		return f, fragMalformed
	}
	ip := header.IPv4(b)
	hlen, total := int(ip.HeaderLength()), int(ip.TotalLength())
	if header.IPVersion(b) != header.IPv4Version || hlen < header.IPv4MinimumSize || total < hlen || total > size {
		return f, fragMalformed
	}
	dst := ip.DestinationAddress()
	if dst != t.self && dst != header.IPv4Broadcast && dst != t.bcast && !header.IsV4MulticastAddress(dst) {
		return f, fragNotForUs
	}
	n, first := total-hlen, int(ip.FragmentOffset())
	f.final = !ip.More()
	if n == 0 || !f.final && n%8 != 0 || first+n > fragMaxEnd {
		return f, fragMalformed
	}
	f.key = fragKey{src: ip.SourceAddress().As4(), dst: dst.As4(), id: ip.ID(), proto: ip.Protocol()}
	f.first, f.last, f.hlen = uint16(first), uint16(first+n-1), uint8(hlen)
	return f, fragOK
}

// add takes pkt, an inbound IPv4 fragment (isFragment) whose header
// checksum was verified, network header not yet parsed. It does NOT take
// ownership of pkt: a fragment it holds gets a reference of its own. It
// returns the datagram pkt completes, a new packet the caller must DecRef,
// or nil: pkt was held, or dropped and counted.
func (t *fragTable) add(pkt *gstack.PacketBuffer) *gstack.PacketBuffer {
	f, v := t.parseFragment(pkt)
	switch v {
	case fragMalformed:
		t.malformed.Add(1)
		return nil
	case fragNotForUs:
		t.notForUs.Add(1)
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	if t.ds == nil {
		t.ds = new([fragDatagrams]fragDatagram)
	}
	now := t.clock.NowMonotonic()
	t.expireLocked(now)
	d := t.findLocked(f.key)
	if d == nil {
		if t.n == fragDatagrams {
			t.evicted.Add(1)
			t.dropLocked(t.oldestLocked(nil))
		}
		d = t.newLocked(f.key, now)
	}
	i, v := d.place(&f)
	switch {
	case v == fragDuplicate:
		return nil
	case v == fragMalformed, d.n == fragPieces:
		t.malformed.Add(1)
		t.dropLocked(d)
		return nil
	}
	mem := pkt.MemSize()
	for t.mem+mem > t.maxMem {
		o := t.oldestLocked(d)
		if o == nil {
			o = d // d alone is over the bound
		}
		t.evicted.Add(1)
		t.dropLocked(o)
		if o == d {
			return nil
		}
	}
	d.insert(i, &f, pkt.IncRef(), mem)
	t.mem += mem
	if d.end < 0 || d.covered != d.end {
		return nil
	}
	r := d.assemble()
	t.dropLocked(d)
	if r == nil {
		t.malformed.Add(1)
		return nil
	}
	t.reassembled.Add(1)
	return r
}

// +checklocks:t.mu
func (t *fragTable) findLocked(k fragKey) *fragDatagram {
	for i := range t.ds {
		if d := &t.ds[i]; d.used && d.key == k {
			return d
		}
	}
	return nil
}

// oldestLocked returns the datagram that arrived first, other than skip;
// nil when there is none.
//
// +checklocks:t.mu
func (t *fragTable) oldestLocked(skip *fragDatagram) *fragDatagram {
	var o *fragDatagram
	for i := range t.ds {
		if d := &t.ds[i]; d.used && d != skip && (o == nil || d.seq < o.seq) {
			o = d
		}
	}
	return o
}

// newLocked takes a free slot for k; there must be one.
//
// +checklocks:t.mu
func (t *fragTable) newLocked(k fragKey, now tcpip.MonotonicTime) *fragDatagram {
	for i := range t.ds {
		if d := &t.ds[i]; !d.used {
			t.seq++
			t.n++
			d.used, d.key, d.seq, d.end = true, k, t.seq, -1
			d.deadline = now.Add(fragTimeout)
			t.armLocked(now)
			return d
		}
	}
	panic("tickwire: fragment table full")
}

// dropLocked discards d and the fragments it holds.
//
// +checklocks:t.mu
func (t *fragTable) dropLocked(d *fragDatagram) {
	for i := range d.pieces[:d.n] {
		d.pieces[i].pkt.DecRef()
		d.pieces[i] = fragPiece{}
	}
	t.mem -= d.mem
	t.n--
	d.used, d.key, d.seq, d.end, d.covered, d.mem, d.n = false, fragKey{}, 0, -1, 0, 0, 0
}

// expireLocked discards the datagrams whose deadline has passed.
//
// +checklocks:t.mu
func (t *fragTable) expireLocked(now tcpip.MonotonicTime) {
	if t.n == 0 {
		return
	}
	for i := range t.ds {
		if d := &t.ds[i]; d.used && !now.Before(d.deadline) {
			t.timedOut.Add(1)
			t.dropLocked(d)
		}
	}
}

// armLocked sets the timer for the earliest deadline unless it is set
// already: removals only make it fire early, and expire sets it again.
//
// +checklocks:t.mu
func (t *fragTable) armLocked(now tcpip.MonotonicTime) {
	if t.armed || t.n == 0 {
		return
	}
	var next tcpip.MonotonicTime
	first := true
	for i := range t.ds {
		if d := &t.ds[i]; d.used && (first || d.deadline.Before(next)) {
			next, first = d.deadline, false
		}
	}
	wait := next.Sub(now)
	if t.timer == nil {
		t.timer = t.clock.AfterFunc(wait, t.expire)
	} else {
		t.timer.Reset(wait) // expired: armed is clear
	}
	t.armed = true
}

// expire is the timer's function.
func (t *fragTable) expire() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.armed = false
	if t.closed {
		return
	}
	now := t.clock.NowMonotonic()
	t.expireLocked(now)
	t.armLocked(now)
}

// close discards every datagram, uncounted, stops the timer and makes add
// drop whatever comes after. The Stack calls it once netstack has stopped.
func (t *fragTable) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	if t.timer != nil {
		t.timer.Stop()
	}
	if t.ds == nil {
		return
	}
	for i := range t.ds {
		if d := &t.ds[i]; d.used {
			t.dropLocked(d)
		}
	}
}

// held returns the datagrams and memory held, for tests.
func (t *fragTable) held() (datagrams, mem int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n, t.mem
}

// place finds where f goes among d's pieces: fragOK and the index,
// fragDuplicate for an exact copy of a piece, fragMalformed when f overlaps
// a piece or conflicts with the datagram's end (netstack's and Linux's
// rules: the datagram is then discarded).
func (d *fragDatagram) place(f *fragment) (int, fragVerdict) {
	first, last := int(f.first), int(f.last)
	i := 0
	for i < d.n && int(d.pieces[i].first) < first {
		i++
	}
	if i < d.n && int(d.pieces[i].first) == first {
		if p := &d.pieces[i]; int(p.last) == last && p.final == f.final {
			return i, fragDuplicate
		}
		return i, fragMalformed
	}
	// Overlapping the piece before or after, a second end, a piece at or
	// past the end, an end before data held.
	if i > 0 && int(d.pieces[i-1].last) >= first || i < d.n && int(d.pieces[i].first) <= last ||
		d.end >= 0 && (f.final && last+1 != d.end || !f.final && last+1 >= d.end) ||
		d.end < 0 && f.final && d.n > 0 && int(d.pieces[d.n-1].last) > last {
		return i, fragMalformed
	}
	return i, fragOK
}

// insert holds pkt, with the reference it carries, as f at index i (from
// place).
func (d *fragDatagram) insert(i int, f *fragment, pkt *gstack.PacketBuffer, mem int) {
	copy(d.pieces[i+1:d.n+1], d.pieces[i:d.n])
	d.pieces[i] = fragPiece{pkt: pkt, first: f.first, last: f.last, hlen: f.hlen, final: f.final}
	d.n++
	d.covered += int(f.last) - int(f.first) + 1
	d.mem += mem
	if f.final {
		d.end = int(f.last) + 1
	}
}

// assemble builds the complete datagram: the first fragment's link and IPv4
// headers, then the payload. It returns nil when the first fragment's
// header and the payload exceed an IPv4 packet's 65535 bytes.
func (d *fragDatagram) assemble() *gstack.PacketBuffer {
	p0 := &d.pieces[0]
	hlen := int(p0.hlen)
	total := hlen + d.end
	if total > 0xffff {
		return nil
	}
	link := p0.pkt.LinkHeader().Slice()
	v := buffer.NewViewSize(len(link) + total)
	out := v.AsSlice()
	copy(out, link)
	ip := out[len(link):]
	for i := range d.pieces[:d.n] {
		p := &d.pieces[i]
		n := int(p.last) - int(p.first) + 1
		b, ok := p.pkt.Data().PullUp(int(p.hlen) + n)
		if !ok { // unreachable: parseFragment checked the length
			v.Release()
			return nil
		}
		if i == 0 {
			copy(ip, b[:hlen])
		}
		copy(ip[hlen+int(p.first):], b[p.hlen:])
	}
	h := header.IPv4(ip)
	h.SetTotalLength(uint16(total))
	h.SetFlagsFragmentOffset(h.Flags()&^header.IPv4FlagMoreFragments, 0)
	h.SetChecksum(0)
	h.SetChecksum(^h.CalculateChecksum())
	r := gstack.NewPacketBuffer(gstack.PacketBufferOptions{Payload: buffer.MakeWithView(v)})
	r.LinkHeader().Consume(len(link))
	r.PktType = p0.pkt.PktType
	return r
}
