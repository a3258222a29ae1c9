package dmaring

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/internal/linkbase"
)

// fakeDevice is the least device that lets the host be tested alone: it
// trusts the registers (nicsim checks them) and serves queue by queue.
type fakeDevice struct {
	t  testing.TB
	r  *Region
	rx []fakeQueue
	tx []fakeQueue
	w  *Wakeups
}

type fakeQueue struct {
	regs, cq Regs
	eq       Regs
	eqn      int
	cons     uint32 // ring
	cqProd   uint32
	eqProd   uint32
}

func newFakeDevice(t testing.TB, e *Endpoint) *fakeDevice {
	r, err := e.Region().Map()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	d := &fakeDevice{t: t, r: r, w: e.Wakeups()}
	for i := range r.Layout().Queues {
		d.rx = append(d.rx, fakeQueue{regs: r.Regs(KindRX, i), cq: r.Regs(KindCQ, 2*i+1), eq: r.Regs(KindEQ, i), eqn: i})
		d.tx = append(d.tx, fakeQueue{regs: r.Regs(KindTX, i), cq: r.Regs(KindCQ, 2*i), eq: r.Regs(KindEQ, i), eqn: i})
	}
	r.SetDeviceClock(uint64(time.Now().Unix()), 0)
	return d
}

// complete writes a completion for the descriptor at q's pointer and
// raises the event and interrupt when armed. fill edits it before the
// phase is published.
func (d *fakeDevice) complete(q *fakeQueue, n int, fill func(c []byte)) {
	size := uint32(1) << q.cq.LogSize()
	off := int(q.cq.Base()) + int(q.cqProd&(size-1))*CplSize
	c := d.r.Bytes()[off : off+CplSize]
	clear(c[:CplPhase])
	le.PutUint16(c[CplIndex:], uint16(q.cons&(size-1)))
	le.PutUint16(c[CplLen:], uint16(n))
	if fill != nil {
		fill(c)
	}
	d.r.Store32(off+CplPhase, PhaseFor(q.cqProd, size))
	q.cqProd++
	q.cons++
	q.regs.Store(RegDevPtr, q.cons&PtrMask)
	q.cq.Store(RegDevPtr, q.cqProd&PtrMask)
	if q.cq.CompareAndSwap(RegArm, 1, 0) {
		esize := uint32(1) << q.eq.LogSize()
		eoff := int(q.eq.Base()) + int(q.eqProd&(esize-1))*EventSize
		d.r.Store32(eoff+EventPhase, PhaseFor(q.eqProd, esize))
		q.eqProd++
		if q.eq.CompareAndSwap(RegArm, 1, 0) {
			d.w.EQ[q.eqn].Notify()
		}
	}
}

// put receives f on RX queue i; false when the ring has no descriptor.
func (d *fakeDevice) put(i int, f []byte, fill func(c []byte)) bool {
	q := &d.rx[i]
	if (q.regs.Load(RegHostPtr)-q.cons)&PtrMask == 0 {
		return false
	}
	size := uint32(1) << q.regs.LogSize()
	doff := int(q.regs.Base()) + int(q.cons&(size-1))*DescSize
	addr := int(le.Uint64(d.r.Bytes()[doff+DescAddr:]))
	copy(d.r.Bytes()[addr:], f)
	d.complete(q, len(f), func(c []byte) {
		if len(f) > 14 {
			le.PutUint16(c[CplRxCsum:], checksum.Checksum(f[14:], 0))
			c[CplFlags] = CplFlagCsum
		}
		sec, ns, _ := d.r.DeviceClock()
		le.PutUint32(c[CplTsNs:], ns+7)
		le.PutUint16(c[CplTsS:], uint16(sec))
		if fill != nil {
			fill(c)
		}
	})
	return true
}

// take transmits the next frame of TX queue i, nil when none.
func (d *fakeDevice) take(i int) []byte {
	q := &d.tx[i]
	if (q.regs.Load(RegHostPtr)-q.cons)&PtrMask == 0 {
		return nil
	}
	size := uint32(1) << q.regs.LogSize()
	doff := int(q.regs.Base()) + int(q.cons&(size-1))*DescSize
	desc := d.r.Bytes()[doff : doff+DescSize]
	addr, n := int(le.Uint64(desc[DescAddr:])), int(le.Uint32(desc[DescLen:]))
	f := append([]byte(nil), d.r.Bytes()[addr:addr+n]...)
	if cmd := le.Uint16(desc[DescCsumCmd:]); cmd&TxCsumEnable != 0 {
		start, at := int(cmd&0xff), int(cmd&0xff)+int(cmd>>8&0x7f)
		s := ^checksum.Checksum(f[start:], 0)
		f[at], f[at+1] = byte(s>>8), byte(s)
	}
	d.complete(q, n, nil)
	return f
}

func newTestEndpoint(t *testing.T, cfg Config) (*Endpoint, *fakeDevice) {
	if cfg.RingLog == 0 {
		cfg.RingLog = 4
	}
	cfg.InMemory = true
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e, newFakeDevice(t, e)
}

func testFrame(n int, b byte) []byte {
	f := make([]byte, n)
	for i := range f {
		f[i] = b + byte(i)
	}
	return f
}

func TestReadFramesCopiesInOrderAcrossLaps(t *testing.T) {
	e, d := newTestEndpoint(t, Config{})
	q := e.RxQueue(0)
	batch := frame.NewBatch(5, 2048)
	sec, _, _ := d.r.DeviceClock()
	for lap := range 8 { // 16-entry ring: several laps of phase
		var want [][]byte
		for k := range 5 {
			f := testFrame(60+k, byte(lap*5+k))
			if !d.put(0, f, nil) {
				t.Fatalf("lap %d: ring empty", lap)
			}
			want = append(want, f)
		}
		n, err := q.ReadFrames(batch)
		if err != nil || n != 5 {
			t.Fatalf("lap %d: %d frames, %v", lap, n, err)
		}
		for k := range n {
			if !bytes.Equal(batch[k].Data(), want[k]) || batch[k].WireLen != len(want[k]) {
				t.Fatalf("lap %d frame %d differs", lap, k)
			}
			if batch[k].Time != int64(sec)*1e9+7 || batch[k].LinkType != frame.LinkTypeEthernet {
				t.Fatalf("time %d, want %d", batch[k].Time, int64(sec)*1e9+7)
			}
		}
	}
	if s := e.Stats(); s.RxFrames != 40 || s.RxBadCompletions != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestBorrowFramesHoldsBuffersUntilRelease(t *testing.T) {
	e, d := newTestEndpoint(t, Config{})
	q := e.RxQueue(0)
	least := int(q.refillMin) // 4 on a ring of 16
	for k := range least + 1 {
		d.put(0, testFrame(100, byte(k)), nil)
	}
	prod := d.rx[0].regs.Load(RegHostPtr)
	batch := make([]frame.Frame, 8)
	n, err := q.BorrowFrames(batch)
	if err != nil || n != least+1 {
		t.Fatalf("%d frames, %v", n, err)
	}
	// In place: the frame's bytes are the ring buffer's (index 0).
	if !bytes.Equal(batch[0].Data(), testFrame(100, 0)) {
		t.Fatal("borrowed frame differs")
	}
	e.Region().Bytes()[q.bufs] = 0xEE
	if batch[0].Buf[0] != 0xEE {
		t.Fatal("borrowed frame is not the ring buffer")
	}
	if got := d.rx[0].regs.Load(RegHostPtr); got != prod {
		t.Fatalf("ring refilled while borrowed: %d -> %d", prod, got)
	}
	q.ReleaseBorrowed()
	prod = (prod + uint32(least) + 1) & PtrMask
	if got := d.rx[0].regs.Load(RegHostPtr); got != prod {
		t.Fatalf("after release prod %d, want %d", got, prod)
	}
	if got := d.rx[0].cq.Load(RegHostPtr); got != prod-16 {
		t.Fatalf("after release CQ consumer pointer %d, want %d", got, prod-16)
	}

	// Fewer than refillMin released buffers wait for more, or for the
	// reader to sleep.
	d.put(0, testFrame(100, 9), nil)
	if n, err := q.BorrowFrames(batch); err != nil || n != 1 {
		t.Fatalf("%d frames, %v", n, err)
	}
	q.ReleaseBorrowed()
	if got := d.rx[0].regs.Load(RegHostPtr); got != prod {
		t.Fatalf("one buffer posted at once: prod %d, want %d", got, prod)
	}
	done := make(chan error, 1)
	go func() {
		_, err := q.ReadFrames(batch)
		done <- err
	}()
	waitArmed(t, d.rx[0].cq)
	if got := d.rx[0].regs.Load(RegHostPtr); got != prod+1 {
		t.Fatalf("buffer not posted before the reader slept: prod %d, want %d", got, prod+1)
	}
	if got := d.rx[0].cq.Load(RegHostPtr); got != prod+1-16 {
		t.Fatalf("CQ consumer pointer %d before the reader slept, want %d", got, prod+1-16)
	}
	e.Close()
	if err := <-done; !errors.Is(err, io.EOF) {
		t.Fatalf("read across Close: %v", err)
	}
}

// waitArmed waits until the reader armed CQ cq: it is about to sleep.
func waitArmed(t *testing.T, cq Regs) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for cq.Load(RegArm) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("reader never armed its CQ")
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func TestBadCompletionsCountedNotFatal(t *testing.T) {
	e, d := newTestEndpoint(t, Config{})
	q := e.RxQueue(0)
	d.put(0, testFrame(80, 1), func(c []byte) { le.PutUint16(c[CplIndex:], 9) })        // wrong descriptor
	d.put(0, testFrame(80, 2), func(c []byte) { le.PutUint16(c[CplLen:], 60000) })      // past the buffer
	d.put(0, testFrame(80, 3), func(c []byte) { c[CplStatus] = byte(ErrFrameTooLong) }) // device error
	d.put(0, testFrame(8, 4), nil)                                                      // runt
	d.put(0, testFrame(80, 5), nil)
	batch := frame.NewBatch(8, 2048)
	n, err := q.ReadFrames(batch)
	if err != nil || n != 1 || !bytes.Equal(batch[0].Data(), testFrame(80, 5)) {
		t.Fatalf("%d frames, %v", n, err)
	}
	s := e.Stats()
	if s.RxBadCompletions != 2 || s.RxDeviceErrors != 1 || s.RxDropped != 1 {
		t.Fatalf("stats %+v", s)
	}
	// Every buffer went back to the device.
	if got := (d.rx[0].regs.Load(RegHostPtr) - d.rx[0].cons) & PtrMask; got != 16 {
		t.Fatalf("%d descriptors posted, want 16", got)
	}
}

func TestReadFramesSleepsAndWakes(t *testing.T) {
	e, d := newTestEndpoint(t, Config{})
	q := e.RxQueue(0)
	type res struct {
		n   int
		err error
	}
	got := make(chan res, 1)
	batch := frame.NewBatch(4, 2048)
	go func() {
		n, err := q.ReadFrames(batch)
		got <- res{n, err}
	}()
	waitArmed(t, d.rx[0].cq)
	d.put(0, testFrame(64, 9), nil)
	if r := <-got; r.err != nil || r.n != 1 {
		t.Fatalf("woken read: %d, %v", r.n, r.err)
	}
	go func() {
		n, err := q.ReadFrames(batch)
		got <- res{n, err}
	}()
	waitArmed(t, d.rx[0].cq)
	e.Close()
	if r := <-got; !errors.Is(r.err, io.EOF) {
		t.Fatalf("read across Close: %d, %v", r.n, r.err)
	}
	if _, err := q.ReadFrames(batch); !errors.Is(err, io.EOF) {
		t.Fatalf("read after Close: %v", err)
	}
}

func TestSendReclaimsOnCompletion(t *testing.T) {
	e, d := newTestEndpoint(t, Config{RingLog: 2})
	f := testFrame(200, 3)
	for range 4 {
		if err := e.Send(0, f); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Send(0, f); err == nil {
		t.Fatal("fifth frame fit a 4-entry ring")
	}
	for range 4 {
		if got := d.take(0); !bytes.Equal(got, f) {
			t.Fatal("transmitted frame differs")
		}
	}
	for range 8 {
		if err := e.Send(0, f); err != nil {
			t.Fatal(err)
		}
		d.take(0)
	}
	if err := e.Send(0, make([]byte, 5000)); err == nil {
		t.Fatal("frame longer than a buffer accepted")
	}
	s := e.Stats()
	if s.TxFrames != 12 || s.TxRingFull != 1 || s.TxTooLong != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestHotPathsDoNotAllocate: reading (copy and borrow) and sending a frame
// allocate nothing.
func TestHotPathsDoNotAllocate(t *testing.T) {
	e, d := newTestEndpoint(t, Config{})
	q := e.RxQueue(0)
	f := testFrame(64, 1)
	batch := frame.NewBatch(4, 2048)
	borrow := make([]frame.Frame, 4)
	if a := testing.AllocsPerRun(200, func() {
		d.put(0, f, nil)
		if n, _ := q.ReadFrames(batch); n != 1 {
			t.Fatal("no frame")
		}
	}); a != 0 {
		t.Errorf("ReadFrames: %v allocations per frame", a)
	}
	if a := testing.AllocsPerRun(200, func() {
		d.put(0, f, nil)
		if n, _ := q.BorrowFrames(borrow); n != 1 {
			t.Fatal("no frame")
		}
		q.ReleaseBorrowed()
	}); a != 0 {
		t.Errorf("BorrowFrames: %v allocations per frame", a)
	}
	if a := testing.AllocsPerRun(200, func() {
		e.Send(0, f)
		d.complete(&d.tx[0], 0, nil)
	}); a != 0 {
		t.Errorf("Send: %v allocations per frame", a)
	}
}

func ipv4Frame(proto uint8, payload []byte) []byte {
	const hl = header.EthernetMinimumSize + header.IPv4MinimumSize
	f := make([]byte, hl+len(payload))
	header.Ethernet(f).Encode(&header.EthernetFields{Type: header.IPv4ProtocolNumber})
	ip := header.IPv4(f[header.EthernetMinimumSize:])
	ip.Encode(&header.IPv4Fields{
		TotalLength: uint16(header.IPv4MinimumSize + len(payload)), TTL: 64, Protocol: proto,
		SrcAddr: ipAddr(10, 0, 0, 1), DstAddr: ipAddr(10, 0, 0, 2),
	})
	ip.SetChecksum(^ip.CalculateChecksum())
	copy(f[hl:], payload)
	return f
}

// TestChecksumOffload: a TCP and a UDP segment prepared by the host and
// completed as the device does verify with the device's RX sum, and a
// flipped byte is caught.
func TestChecksumOffload(t *testing.T) {
	for _, proto := range []uint8{uint8(header.TCPProtocolNumber), uint8(header.UDPProtocolNumber)} {
		seg := testFrame(20+333, 5)
		if proto == uint8(header.UDPProtocolNumber) {
			le := header.UDP(seg)
			le.SetLength(uint16(len(seg)))
			le.SetChecksum(0)
		} else {
			header.TCP(seg).SetChecksum(0)
			seg[12] = 5 << 4
		}
		f := ipv4Frame(proto, seg)
		cmd := txChecksumCommand(f)
		if cmd&TxCsumEnable == 0 {
			t.Fatalf("proto %d: no command", proto)
		}
		start, at := int(cmd&0xff), int(cmd&0xff)+int(cmd>>8&0x7f)
		s := ^checksum.Checksum(f[start:], 0)
		f[at], f[at+1] = byte(s>>8), byte(s)
		if v := linkbase.VerifyIPv4(f[14:]); v != linkbase.ChecksumOK {
			t.Fatalf("proto %d: device-completed checksum wrong (%d)", proto, v)
		}
		if v := rxChecksum(f, checksum.Checksum(f[14:], 0), true); v != linkbase.ChecksumOK {
			t.Fatalf("proto %d: rx verdict %d", proto, v)
		}
		f[len(f)-1] ^= 0x40
		want := linkbase.BadTCPChecksum
		if proto == uint8(header.UDPProtocolNumber) {
			want = linkbase.BadUDPChecksum
		}
		if v := rxChecksum(f, checksum.Checksum(f[14:], 0), true); v != want {
			t.Fatalf("proto %d: corrupted frame verdict %d", proto, v)
		}
		f[len(f)-1] ^= 0x40
		f[14+10] ^= 1 // IPv4 header checksum
		if v := rxChecksum(f, checksum.Checksum(f[14:], 0), true); v != linkbase.BadIPv4Checksum {
			t.Fatalf("proto %d: bad header verdict %d", proto, v)
		}
	}
}

// TestReadFramesChecksumVerified: a frame source marks a TCP frame whose
// checksums the device's sum confirms, and no other: not one with a
// flipped payload byte, not one without the device's sum, not ARP. The
// borrowing path marks the same.
func TestReadFramesChecksumVerified(t *testing.T) {
	seg := testFrame(20+200, 9)
	seg[12] = 5 << 4
	header.TCP(seg).SetChecksum(0)
	good := ipv4Frame(uint8(header.TCPProtocolNumber), seg)
	ip := header.IPv4(good[14:])
	s := header.PseudoHeaderChecksum(header.TCPProtocolNumber, ip.SourceAddress(), ip.DestinationAddress(), uint16(len(seg)))
	header.TCP(good[34:]).SetChecksum(^checksum.Checksum(good[34:], s))
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 0x40
	arp := testFrame(60, 1)
	header.Ethernet(arp).Encode(&header.EthernetFields{Type: header.ARPProtocolNumber})
	noSum := func(c []byte) { c[CplFlags] = 0 }
	for _, borrow := range []bool{false, true} {
		e, d := newTestEndpoint(t, Config{})
		q := e.RxQueue(0)
		d.put(0, good, nil)
		d.put(0, bad, nil)
		d.put(0, good, noSum)
		d.put(0, arp, nil)
		batch := frame.NewBatch(8, 2048)
		for i := range batch {
			batch[i].ChecksumVerified = true // what a previous read left
		}
		read := q.ReadFrames
		if borrow {
			read = q.BorrowFrames
		}
		n, err := read(batch)
		if err != nil || n != 4 {
			t.Fatalf("borrow %v: %d frames, %v", borrow, n, err)
		}
		for i, want := range []bool{true, false, false, false} {
			if batch[i].ChecksumVerified != want {
				t.Errorf("borrow %v: frame %d ChecksumVerified %v, want %v", borrow, i, batch[i].ChecksumVerified, want)
			}
		}
		if borrow {
			q.ReleaseBorrowed()
		}
	}
}

func TestStampExtendsSeconds(t *testing.T) {
	e, d := newTestEndpoint(t, Config{})
	q := e.RxQueue(0)
	base := uint64(1_790_000_000) // not a constant: its low 16 bits are taken
	for _, c := range []struct {
		reg  uint64 // device clock register
		s16  uint16
		want uint64
	}{
		{base, uint16(base), base},
		{base, uint16(base - 3), base - 3},                 // a stamp a little older
		{base + 0x100, uint16(base + 0x100), base + 0x100}, // bits 15:8 moved: reread
		{0x1_0000_0005, 0xfffe, 0x1_0000_0005 - 7},         // from just before a 2^16 wrap
	} {
		d.r.SetDeviceClock(c.reg, 0)
		q.ts.valid = false
		if got := q.ts.unix(q.r, 0, uint16(c.reg)); got != int64(c.reg)*1e9 {
			t.Fatalf("reg %d: %d", c.reg, got)
		}
		if got := q.ts.unix(q.r, 5, c.s16); got != int64(c.want)*1e9+5 {
			t.Errorf("reg %#x s16 %#x: %d, want %d", c.reg, c.s16, got/1e9, c.want)
		}
	}
}

func ipAddr(a, b, c, d byte) tcpip.Address { return tcpip.AddrFrom4([4]byte{a, b, c, d}) }

// nopDispatcher takes frames and does nothing.
type nopDispatcher struct{ n int }

func (d *nopDispatcher) DeliverNetworkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) { d.n++ }
func (d *nopDispatcher) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer)    {}

// TestStackPathsDoNotAllocate: delivering a received frame to the stack
// (pooled packet) and WritePackets allocate nothing per frame.
func TestStackPathsDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items: packets allocate")
	}
	e, d := newTestEndpoint(t, Config{})
	disp := &nopDispatcher{}
	e.Endpoint.Attach(disp) // the base's only: no RX goroutine, the test drives the queue
	q := e.RxQueue(0)
	f := ipv4Frame(uint8(header.UDPProtocolNumber), make([]byte, 100))
	copy(f, e.LinkAddress())
	header.UDP(f[34:]).SetLength(100)
	var m rxMeta
	if a := testing.AllocsPerRun(500, func() {
		d.put(0, f, nil)
		if ok, good := q.next(&m); !ok || !good {
			t.Fatal("no frame")
		}
		q.deliverStack(m.buf[:m.n], m.rx, m.csum, m.haveCsum)
		q.finish(false)
	}); a != 0 {
		t.Errorf("RX to the stack: %v allocations per frame", a)
	}
	if disp.n == 0 {
		t.Fatal("nothing delivered")
	}
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(f)})
	defer pkt.DecRef()
	var list stack.PacketBufferList
	list.PushBack(pkt)
	if a := testing.AllocsPerRun(500, func() {
		e.WritePackets(list)
		d.complete(&d.tx[0], 0, nil)
	}); a != 0 {
		t.Errorf("WritePackets: %v allocations per frame", a)
	}
	if s := e.Stats(); s.TxFrames < 500 || s.TxRingFull != 0 {
		t.Fatalf("stats %+v", s)
	}
}
