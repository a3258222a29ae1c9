package tickwire

import (
	"encoding/binary"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/faketime"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

var (
	fragSrc   = [4]byte{10, 0, 0, 1}
	fragSelf  = [4]byte{10, 0, 0, 2}
	fragBcast = [4]byte{10, 0, 0, 255}
)

// fragSpec is one fragment of a test sequence: payload bytes [off, off+n)
// of datagram id.
type fragSpec struct {
	id   uint16
	off  int
	n    int
	more bool
	dst  [4]byte // zero: fragSelf
	opts int     // bytes of IP options (NOPs), a multiple of 4
}

// fragByte is datagram id's payload byte at offset i: every copy of a range
// carries the same bytes.
func fragByte(id uint16, i int) byte { return byte(i*7 + int(id)) }

// fragFrame builds f as an Ethernet frame.
func fragFrame(f fragSpec) []byte {
	dst := f.dst
	if dst == ([4]byte{}) {
		dst = fragSelf
	}
	hlen := header.IPv4MinimumSize + f.opts
	b := make([]byte, header.EthernetMinimumSize+hlen+f.n)
	header.Ethernet(b).Encode(&header.EthernetFields{SrcAddr: "\x02\x00\x00\x00\x00\x01", DstAddr: "\x02\x00\x00\x00\x00\x02", Type: header.IPv4ProtocolNumber})
	ip := header.IPv4(b[header.EthernetMinimumSize:])
	var flags uint8
	if f.more {
		flags = header.IPv4FlagMoreFragments
	}
	ip.Encode(&header.IPv4Fields{
		TotalLength: uint16(hlen + f.n), ID: f.id, Flags: flags, FragmentOffset: uint16(f.off), TTL: 64,
		Protocol: uint8(header.UDPProtocolNumber), SrcAddr: tcpip.AddrFrom4(fragSrc), DstAddr: tcpip.AddrFrom4(dst),
	})
	ip[0] = 0x40 | byte(hlen/4)
	for i := header.IPv4MinimumSize; i < hlen; i++ {
		ip[i] = byte(header.IPv4OptionNOPType)
	}
	ip.SetChecksum(0)
	ip.SetChecksum(^ip.CalculateChecksum())
	for i := range f.n {
		ip[hlen+i] = fragByte(f.id, f.off+i)
	}
	return b
}

// fragPacket wraps frame as a link delivers it: Ethernet header consumed.
func fragPacket(frame []byte) *gstack.PacketBuffer {
	pkt := gstack.NewPacketBuffer(gstack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
	pkt.LinkHeader().Consume(header.EthernetMinimumSize)
	return pkt
}

// split cuts datagram id's total payload bytes into fragments of size (a
// multiple of 8), the first with opts bytes of options.
func split(id uint16, total, size, opts int) []fragSpec {
	var fs []fragSpec
	for off := 0; off < total; off += size {
		n := min(size, total-off)
		f := fragSpec{id: id, off: off, n: n, more: off+n < total}
		if off == 0 {
			f.opts = opts
		}
		fs = append(fs, f)
	}
	return fs
}

func reversed(fs []fragSpec) []fragSpec {
	r := make([]fragSpec, len(fs))
	for i, f := range fs {
		r[len(fs)-1-i] = f
	}
	return r
}

func newTestFragTable() (*fragTable, *faketime.ManualClock) {
	clock := faketime.NewManualClock()
	return newFragTable(clock, tcpip.AddrFrom4(fragSelf), tcpip.AddrFrom4(fragBcast)), clock
}

// addFrag feeds f to ft and checks what comes out: nil, or a whole IPv4
// datagram of f.id. It returns the datagram's payload length, -1 for nil.
func addFrag(t testing.TB, ft *fragTable, f fragSpec) int {
	t.Helper()
	frame := fragFrame(f)
	pkt := fragPacket(frame)
	r := ft.add(pkt)
	pkt.DecRef()
	if r == nil {
		return -1
	}
	defer r.DecRef()
	return checkReassembled(t, r, f.id)
}

// checkReassembled checks that r is a whole, valid IPv4 packet of datagram
// id, headed by a link header, and returns its payload length.
func checkReassembled(t testing.TB, r *gstack.PacketBuffer, id uint16) int {
	t.Helper()
	if n := len(r.LinkHeader().Slice()); n != header.EthernetMinimumSize {
		t.Fatalf("reassembled: link header of %d bytes", n)
	}
	b := r.Data().AsRange().ToSlice()
	ip := header.IPv4(b)
	if !ip.IsValid(len(b)) || int(ip.TotalLength()) != len(b) || !ip.IsChecksumValid() || ip.More() || ip.FragmentOffset() != 0 || ip.ID() != id {
		t.Fatalf("reassembled header %x", b[:min(len(b), 60)])
	}
	payload := b[ip.HeaderLength():]
	for i, c := range payload {
		if c != fragByte(id, i) {
			t.Fatalf("reassembled datagram %d: byte %d is %#x, want %#x", id, i, c, fragByte(id, i))
		}
	}
	return len(payload)
}

// TestFragTableSequences feeds sequences of fragments, as gopacket's
// reassembly tests do with segments, and checks the datagrams that come
// out and the counters.
func TestFragTableSequences(t *testing.T) {
	inOrder := split(1, 3000, 1480, 0)
	other := fragSpec{id: 9, dst: [4]byte{10, 0, 0, 3}, n: 8, more: true}
	many := split(1, 128*8, 8, 0)
	for _, tc := range []struct {
		name                string
		frags               []fragSpec
		want                []int // payload lengths of the datagrams out, in order
		malformed, notForUs uint64
		held                int // datagrams left in reassembly
	}{
		{name: "in order", frags: inOrder, want: []int{3000}},
		{name: "reversed", frags: reversed(inOrder), want: []int{3000}},
		{name: "final first", frags: []fragSpec{inOrder[2], inOrder[0], inOrder[1]}, want: []int{3000}},
		{name: "duplicate", frags: []fragSpec{inOrder[1], inOrder[0], inOrder[1], inOrder[2]}, want: []int{3000}},
		{name: "duplicate after completion starts anew", frags: append(split(1, 3000, 1480, 0), inOrder[0]), want: []int{3000}, held: 1},
		{name: "interleaved datagrams", frags: []fragSpec{inOrder[0], {id: 2, off: 8, n: 8}, inOrder[1], {id: 2, n: 8, more: true}, inOrder[2]}, want: []int{16, 3000}},
		{name: "options kept", frags: split(1, 3000, 1480, 8), want: []int{3000}},
		{name: "128 pieces", frags: many, want: []int{1024}},
		{name: "129 pieces", frags: append(split(1, 129*8, 8, 0)[:128], fragSpec{id: 1, off: 128 * 8, n: 8, more: true}), malformed: 1},
		{name: "overlaps the piece before", frags: []fragSpec{inOrder[0], {id: 1, off: 1472, n: 16, more: true}}, malformed: 1},
		{name: "overlaps the piece after", frags: []fragSpec{inOrder[1], {id: 1, off: 1000, n: 488, more: true}}, malformed: 1},
		{name: "inside a piece", frags: []fragSpec{inOrder[0], {id: 1, off: 0, n: 8, more: true}}, malformed: 1},
		{name: "same range, More Fragments differs", frags: []fragSpec{inOrder[2], {id: 1, off: 2960, n: 40, more: true}}, malformed: 1},
		{name: "second end", frags: []fragSpec{inOrder[2], {id: 1, off: 3200, n: 8}}, malformed: 1},
		{name: "past the end", frags: []fragSpec{inOrder[2], {id: 1, off: 3000, n: 8, more: true}}, malformed: 1},
		{name: "end before data held", frags: []fragSpec{inOrder[1], {id: 1, off: 8, n: 8}}, malformed: 1},
		{name: "then a new datagram", frags: []fragSpec{inOrder[1], {id: 1, off: 8, n: 8}, inOrder[0], inOrder[1], inOrder[2]}, want: []int{3000}, malformed: 1},
		{name: "empty", frags: []fragSpec{{id: 1, off: 8, n: 0}}, malformed: 1},
		{name: "non-final not a multiple of 8", frags: []fragSpec{{id: 1, n: 100, more: true}}, malformed: 1},
		{name: "past 65515 bytes", frags: []fragSpec{{id: 1, off: 65512, n: 8}}, malformed: 1},
		{name: "header and payload over 65535", frags: split(1, 65515, 1480, 40), malformed: 1},
		{name: "not for us", frags: []fragSpec{other}, notForUs: 1},
		{name: "broadcast", frags: []fragSpec{{id: 3, n: 8, more: true, dst: [4]byte{255, 255, 255, 255}}, {id: 3, off: 8, n: 8, dst: [4]byte{255, 255, 255, 255}}}, want: []int{16}},
		{name: "subnet broadcast", frags: []fragSpec{{id: 3, n: 8, more: true, dst: fragBcast}, {id: 3, off: 8, n: 8, dst: fragBcast}}, want: []int{16}},
		{name: "multicast", frags: []fragSpec{{id: 3, n: 8, more: true, dst: [4]byte{224, 0, 0, 1}}, {id: 3, off: 8, n: 8, dst: [4]byte{224, 0, 0, 1}}}, want: []int{16}},
		{name: "incomplete", frags: inOrder[:2], held: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ft, _ := newTestFragTable()
			defer ft.close()
			var got []int
			for _, f := range tc.frags {
				if n := addFrag(t, ft, f); n >= 0 {
					got = append(got, n)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("datagrams out: %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("datagrams out: %v, want %v", got, tc.want)
				}
			}
			if m, n := ft.malformed.Load(), ft.notForUs.Load(); m != tc.malformed || n != tc.notForUs {
				t.Errorf("malformed %d, not for us %d; want %d, %d", m, n, tc.malformed, tc.notForUs)
			}
			if r := ft.reassembled.Load(); r != uint64(len(tc.want)) {
				t.Errorf("reassembled %d, want %d", r, len(tc.want))
			}
			if held, mem := ft.held(); held != tc.held || held == 0 && mem != 0 {
				t.Errorf("held %d datagrams, %d bytes; want %d", held, mem, tc.held)
			}
			if e, o := ft.evicted.Load(), ft.timedOut.Load(); e != 0 || o != 0 {
				t.Errorf("evicted %d, timed out %d", e, o)
			}
		})
	}
}

// TestFragTableEvictsOldest fills the table with first fragments: each new
// datagram beyond 64 evicts the oldest, counted, and the newest still
// complete.
func TestFragTableEvictsOldest(t *testing.T) {
	ft, _ := newTestFragTable()
	defer ft.close()
	for id := range uint16(fragDatagrams + 10) {
		addFrag(t, ft, fragSpec{id: id, n: 8, more: true})
	}
	if held, _ := ft.held(); held != fragDatagrams || ft.evicted.Load() != 10 {
		t.Fatalf("held %d, evicted %d; want %d, 10", held, ft.evicted.Load(), fragDatagrams)
	}
	// Datagram 0 was evicted: its end starts a datagram that cannot
	// complete, and takes the slot of the oldest left (10).
	if n := addFrag(t, ft, fragSpec{id: 0, off: 8, n: 8}); n >= 0 || ft.evicted.Load() != 11 {
		t.Fatalf("evicted datagram completed (%d) or evicted %d, want 11", n, ft.evicted.Load())
	}
	if n := addFrag(t, ft, fragSpec{id: fragDatagrams + 9, off: 8, n: 8}); n != 16 {
		t.Fatalf("newest datagram: %d bytes out, want 16", n)
	}
}

// TestFragTableMemoryBound sends datagrams of 40 fragments of 1480 bytes,
// never the last: the memory held stays within the bound, and every
// datagram sent is either held or counted as evicted.
func TestFragTableMemoryBound(t *testing.T) {
	ft, _ := newTestFragTable()
	defer ft.close()
	const datagrams = 60 // 60 x 40 x 1.8 KiB = 4.3 MiB, over netstack's 4 MiB
	for id := range uint16(datagrams) {
		for _, f := range split(id, 41*1480, 1480, 0)[:40] {
			addFrag(t, ft, f)
			if _, mem := ft.held(); mem > fragMemory {
				t.Fatalf("holding %d bytes, over %d", mem, fragMemory)
			}
		}
	}
	held, mem := ft.held()
	if ev := ft.evicted.Load(); held+int(ev) != datagrams || ev < datagrams-fragMemory/(40*1514) {
		t.Fatalf("held %d and evicted %d of %d datagrams", held, ev, datagrams)
	}
	// Eviction frees a whole datagram: at most one is missing.
	if mem < fragMemory-41*(1514+gstack.PacketBufferStructSize) {
		t.Errorf("holding %d bytes: the bound of %d is not used", mem, fragMemory)
	}
	// The newest datagram completes.
	if n := addFrag(t, ft, split(datagrams-1, 41*1480, 1480, 0)[40]); n != 41*1480 {
		t.Fatalf("newest datagram: %d bytes out", n)
	}
	if ft.malformed.Load() != 0 || ft.timedOut.Load() != 0 {
		t.Errorf("malformed %d, timed out %d", ft.malformed.Load(), ft.timedOut.Load())
	}
}

// TestFragTableTimeout checks, on a manual clock, that a datagram is
// discarded and counted fragTimeout after its first fragment and not
// before, each on its own deadline, and that the timer is set again after
// the table emptied.
func TestFragTableTimeout(t *testing.T) {
	ft, clock := newTestFragTable()
	defer ft.close()
	addFrag(t, ft, fragSpec{id: 1, n: 8, more: true})
	clock.Advance(10 * time.Second)
	addFrag(t, ft, fragSpec{id: 2, n: 8, more: true})
	addFrag(t, ft, fragSpec{id: 1, off: 16, n: 8, more: true}) // a later fragment does not extend the deadline
	clock.Advance(fragTimeout - 10*time.Second - time.Nanosecond)
	if held, _ := ft.held(); held != 2 || ft.timedOut.Load() != 0 {
		t.Fatalf("before the deadline: held %d, timed out %d", held, ft.timedOut.Load())
	}
	clock.Advance(time.Nanosecond)
	if held, _ := ft.held(); held != 1 || ft.timedOut.Load() != 1 {
		t.Fatalf("at the first deadline: held %d, timed out %d; want 1, 1", held, ft.timedOut.Load())
	}
	// Datagram 1 starts anew: its fragment held before is gone.
	if n := addFrag(t, ft, fragSpec{id: 1, off: 8, n: 8}); n >= 0 {
		t.Fatalf("timed-out datagram completed")
	}
	clock.Advance(10 * time.Second)
	if held, _ := ft.held(); held != 1 || ft.timedOut.Load() != 2 {
		t.Fatalf("at the second deadline: held %d, timed out %d; want 1, 2", held, ft.timedOut.Load())
	}
	clock.Advance(fragTimeout)
	if held, mem := ft.held(); held != 0 || mem != 0 || ft.timedOut.Load() != 3 {
		t.Fatalf("after all deadlines: held %d (%d bytes), timed out %d; want 0, 3", held, mem, ft.timedOut.Load())
	}
	// The table emptied and the timer fired: the next datagram sets it
	// again.
	addFrag(t, ft, fragSpec{id: 4, n: 8, more: true})
	clock.Advance(fragTimeout)
	if held, _ := ft.held(); held != 0 || ft.timedOut.Load() != 4 {
		t.Fatalf("held %d, timed out %d; want 0, 4", held, ft.timedOut.Load())
	}
	for _, f := range split(5, 3000, 1480, 0) {
		addFrag(t, ft, f)
	}
	if ft.reassembled.Load() != 1 || ft.evicted.Load() != 0 || ft.malformed.Load() != 0 {
		t.Errorf("reassembled %d, evicted %d, malformed %d; want 1, 0, 0", ft.reassembled.Load(), ft.evicted.Load(), ft.malformed.Load())
	}
}

// TestFragTableClose checks that close drops every fragment held (TestMain
// checks the references) and that nothing is held after it.
func TestFragTableClose(t *testing.T) {
	ft, clock := newTestFragTable()
	addFrag(t, ft, fragSpec{id: 1, n: 8, more: true})
	ft.close()
	addFrag(t, ft, fragSpec{id: 2, n: 8, more: true})
	if held, mem := ft.held(); held != 0 || mem != 0 {
		t.Fatalf("held %d datagrams, %d bytes after close", held, mem)
	}
	clock.Advance(fragTimeout)
	if ft.timedOut.Load() != 0 {
		t.Errorf("timed out %d after close", ft.timedOut.Load())
	}
}

// TestFragTableDoesNotAllocate checks that a fragment costs no allocation
// in steady state: held, evicting the oldest, or a duplicate.
func TestFragTableDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items; run without -race")
	}
	ft, _ := newTestFragTable()
	defer ft.close()
	pkts := make([]*gstack.PacketBuffer, 3*fragDatagrams)
	for i := range pkts {
		pkts[i] = fragPacket(fragFrame(fragSpec{id: uint16(i), n: 1480, more: true}))
		defer pkts[i].DecRef()
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		if r := ft.add(pkts[i%len(pkts)]); r != nil {
			r.DecRef()
		}
		ft.add(pkts[i%len(pkts)]) // its duplicate
		i++
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per fragment, want 0", allocs)
	}
	if ft.evicted.Load() == 0 {
		t.Errorf("nothing evicted: steady state not reached")
	}
}

// TestIsFragment checks the wire's test against the header accessors.
func TestIsFragment(t *testing.T) {
	for _, fo := range []uint16{0, 0x4000, 0x8000, 0xc000, 0x2000, 0x0001, 0x1fff, 0x6000, 0x4001} {
		b := make([]byte, header.IPv4MinimumSize)
		binary.BigEndian.PutUint16(b[6:], fo)
		ip := header.IPv4(b)
		if got, want := isFragment(b), ip.More() || ip.FragmentOffset() != 0; got != want {
			t.Errorf("flags and offset %#04x: isFragment %v, want %v", fo, got, want)
		}
	}
}

// fragOp decodes one operation of FuzzFragTable from 6 bytes: the
// datagram's ID, flags (More Fragments, another destination, options,
// advance the clock 10 s), the offset in 8-byte units (small unless the
// top bit is set, so that fragments meet) and the payload length.
func fragOp(b []byte) (f fragSpec, advance bool) {
	f.id = uint16(b[0] % 80) // more IDs than the table has slots
	flags := b[1]
	f.more = flags&1 != 0
	if flags&2 != 0 {
		f.dst = [4]byte{10, 0, 0, 3}
	}
	if flags&4 != 0 {
		f.dst = fragBcast
	}
	if flags&8 != 0 {
		f.opts = 4
	}
	advance = flags&16 != 0
	off := int(binary.BigEndian.Uint16(b[2:]))
	if off&0x8000 == 0 {
		off %= 400
	}
	f.off = off & 0x1fff * 8
	f.n = int(binary.BigEndian.Uint16(b[4:])) % 1500
	return f, advance
}

// FuzzFragTable feeds sequences of fragments (fragOp) to a table whose
// memory bound is 64 KiB: nothing may panic, the table's invariants hold
// after every fragment (the bounds, pieces sorted and disjoint, memory
// accounted), and every datagram out is a valid IPv4 packet carrying the
// bytes its fragments carried.
func FuzzFragTable(f *testing.F) {
	op := func(id, flags byte, off, n uint16) []byte {
		return []byte{id, flags, byte(off >> 8), byte(off), byte(n >> 8), byte(n)}
	}
	seq := func(ops ...[]byte) []byte {
		var b []byte
		for _, o := range ops {
			b = append(b, o...)
		}
		return b
	}
	f.Add(seq(op(1, 1, 0, 1480), op(1, 1, 185, 1480), op(1, 0, 370, 40)))               // in order
	f.Add(seq(op(1, 0, 370, 40), op(1, 1, 185, 1480), op(1, 9, 0, 1480)))               // reversed, options
	f.Add(seq(op(1, 1, 0, 1480), op(1, 1, 184, 16), op(1, 0, 370, 40)))                 // overlap
	f.Add(seq(op(2, 1, 0, 800), op(3, 1, 0, 800), op(2, 16, 100, 8), op(3, 0, 100, 8))) // a timeout between
	f.Add(seq(op(4, 5, 0, 8), op(4, 4, 1, 8), op(5, 3, 0, 8)))                          // broadcast, another address
	f.Fuzz(func(t *testing.T, ops []byte) {
		ft, clock := newTestFragTable()
		ft.maxMem = 64 << 10
		defer ft.close()
		for ; len(ops) >= 6; ops = ops[6:] {
			fs, advance := fragOp(ops)
			if advance {
				clock.Advance(10 * time.Second)
			}
			addFrag(t, ft, fs)
			checkFragTable(t, ft)
		}
	})
}

// checkFragTable checks ft's invariants.
func checkFragTable(t *testing.T, ft *fragTable) {
	t.Helper()
	ft.mu.Lock()
	defer ft.mu.Unlock()
	if ft.ds == nil {
		return
	}
	n, mem := 0, 0
	for i := range ft.ds {
		d := &ft.ds[i]
		if !d.used {
			if d.n != 0 || d.mem != 0 {
				t.Fatalf("free slot %d holds %d pieces, %d bytes", i, d.n, d.mem)
			}
			continue
		}
		n++
		mem += d.mem
		if d.n < 1 || d.n > fragPieces {
			t.Fatalf("datagram %+v holds %d pieces", d.key, d.n)
		}
		covered, dmem := 0, 0
		for j, p := range d.pieces[:d.n] {
			if p.last < p.first || j > 0 && d.pieces[j-1].last >= p.first {
				t.Fatalf("pieces not sorted and disjoint at %d: %+v after %+v", j, p, d.pieces[j-1])
			}
			if d.end >= 0 && int(p.last) >= d.end || p.final && int(p.last)+1 != d.end {
				t.Fatalf("piece %+v against end %d", p, d.end)
			}
			covered += int(p.last) - int(p.first) + 1
			dmem += p.pkt.MemSize()
		}
		if covered != d.covered || dmem != d.mem {
			t.Fatalf("datagram %+v: covered %d (counted %d), memory %d (counted %d)", d.key, covered, d.covered, dmem, d.mem)
		}
		if d.end >= 0 && covered == d.end {
			t.Fatalf("datagram %+v complete but held", d.key)
		}
	}
	if n != ft.n || mem != ft.mem || ft.mem > ft.maxMem {
		t.Fatalf("%d datagrams (counted %d), %d bytes (counted %d, bound %d)", n, ft.n, mem, ft.mem, ft.maxMem)
	}
}
