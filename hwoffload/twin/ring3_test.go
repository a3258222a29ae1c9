package twin_test

import (
	"bytes"
	"context"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/hwoffload"
	"github.com/tickwire/tickwire/hwoffload/twin"
	"github.com/tickwire/tickwire/link/pipe"
)

// rawHost drives the host path through the registers and the command ring
// directly (no dispatcher), so that a test decides when ring 3 is read.
type rawHost struct {
	t   *testing.T
	ctx context.Context
	dev *hwoffload.Device
	mem []byte
}

// until waits for cond, failing the test with what after ctx ends.
func (h *rawHost) until(what string, cond func() bool) {
	h.t.Helper()
	for !cond() {
		if h.ctx.Err() != nil {
			h.t.Fatalf("waiting for %s: %v", what, h.ctx.Err())
		}
		runtime.Gosched()
	}
}

// cmd writes c into the command ring, waiting for room.
func (h *rawHost) cmd(c hwoffload.Command) {
	h.t.Helper()
	h.until("room in the command ring", func() bool { return h.dev.WriteCommand(c) == nil })
}

// next returns ring 3's next record, waiting for it.
func (h *rawHost) next() hwoffload.Slot {
	h.t.Helper()
	var s hwoffload.Slot
	h.until("a ring 3 record", func() bool {
		var ok bool
		s, _, ok = h.dev.Ring(hwoffload.RingHost).Read()
		return ok
	})
	return s
}

// tinyRingPair runs a twin with 16-slot rings whose host path (10.9.0.2)
// is one end of a link/pipe, b, and a peer stack (10.9.0.1) on the other
// end that counts the datagrams it gets on UDP port 9001.
func tinyRingPair(t *testing.T) (*twin.Twin, *hwoffload.Device, *tickwire.Stack, *pipe.Endpoint, *atomic.Int64) {
	a, b := pipe.New(pipe.Options{})
	peer, err := tickwire.New(tickwire.Config{Link: b, MAC: b.MAC(), Addr: netip.MustParsePrefix("10.9.0.1/24")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	got := new(atomic.Int64)
	if _, err := peer.ServeUDP(9001, func(*tickwire.UDPConn, []byte, netip.AddrPort) { got.Add(1) }); err != nil {
		t.Fatal(err)
	}
	tw, dev := startConfig(t, twin.Config{Link: a, RingLog2: 4})
	if err := dev.Configure(hwoffload.Config{Addr: netip.MustParsePrefix("10.9.0.2/24"), MAC: a.MAC()}); err != nil {
		t.Fatal(err)
	}
	if err := dev.Run(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	return tw, dev, peer, b, got
}

// TestRing3FullHoldsBack: with ring 3 of 16 slots that the host does not
// read, a UDP flood fills it and the datagrams beyond are dropped and
// counted (UDP_RX_DROPPED), never written without their UDP_RECV; the
// completions of 40 UDP_SENDs issued meanwhile are held back (HOST_HELD)
// and all arrive, in order, once the host reads; no record is lost (ring 3
// DROPPED 0, seq contiguous), the peer gets the 40 datagrams, and the
// receive path works afterwards.
func TestRing3FullHoldsBack(t *testing.T) {
	tw, dev, peer, b, got := tinyRingPair(t)
	ctx := ctxT(t)
	h := &rawHost{t: t, ctx: ctx, dev: dev, mem: tw.Region().Bytes()}
	ring := dev.Ring(hwoffload.RingHost)

	h.cmd(hwoffload.Command{Op: hwoffload.OpUDPBind, Tag: 1, Port: 5000})
	if s := h.next(); s.Kind() != hwoffload.KindCompletion {
		t.Fatalf("record kind %d, want the UDP_BIND's completion", s.Kind())
	} else if tag, _, st, port, _ := s.Completion(); tag != 1 || st != hwoffload.StatusOK || port != 5000 {
		t.Fatalf("UDP_BIND: tag %d status %d port %d", tag, st, port)
	}
	ring.Read() // releases the completion's slot: 16 free

	u, err := peer.DialUDP(netip.MustParseAddrPort("10.9.0.2:5000"))
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	const size = 100
	send := func(from, n int) {
		for i := from; i < from+n; i++ {
			if _, err := u.Write(bytes.Repeat([]byte{byte(i)}, size)); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(0, 100)
	prod3 := hwoffload.RingReg(hwoffload.RingHost, hwoffload.RingProd)
	h.until("100 datagrams taken or dropped", func() bool {
		return uint64(dev.Read32(hwoffload.RegUDPRxProd)/size)+dev.Read64(hwoffload.RegUDPRxDropped) == 100-b.Stats().Dropped
	})
	if n, d := dev.Read32(hwoffload.RegUDPRxProd)/size, dev.Read64(hwoffload.RegUDPRxDropped); n != 16 || d != 84-b.Stats().Dropped {
		t.Fatalf("%d datagrams taken, %d dropped; want the 16 ring 3 has room for, 84 dropped", n, d)
	}

	for i := range 40 {
		h.cmd(hwoffload.Command{Op: hwoffload.OpUDPSend, Tag: uint32(100 + i), Port: 5000, IP: 0x0a090001,
			DstPort: 9001, Offset: uint32(i * size), Length: size})
	}
	h.until("40 completions held back", func() bool { return dev.Read64(hwoffload.RegHostHeld) == 40 })
	send(100, 10) // dropped: records are held
	h.until("10 more datagrams dropped", func() bool { return dev.Read64(hwoffload.RegUDPRxDropped) == 94-b.Stats().Dropped })
	if p := dev.Read32(prod3); p != 17 {
		t.Errorf("ring 3 PROD %d while full, want 17", p)
	}

	rxBase := int(dev.Read64(hwoffload.RegUDPRxBase))
	seen := map[byte]bool{} // the peer's stack may reorder datagrams sent before ARP resolved
	for i := range 16 {
		s := h.next()
		if s.Kind() != hwoffload.KindUDPRecv || s.Seq() != uint64(1+i) {
			t.Fatalf("record %d: kind %d seq %d, want UDP_RECV seq %d", i, s.Kind(), s.Seq(), 1+i)
		}
		lp, _, rip, pos, n := s.UDPRecv()
		at := rxBase + int(pos%hwoffload.UDPAreaBytes)
		if lp != 5000 || rip != 0x0a090001 || n != size || pos != uint32(i*size) || seen[h.mem[at]] ||
			!bytes.Equal(h.mem[at:at+size], bytes.Repeat(h.mem[at:at+1], size)) {
			t.Fatalf("datagram %d: port %d from %#x, %d bytes at %d, or not one of the peer's", i, lp, rip, n, pos)
		}
		seen[h.mem[at]] = true
		dev.Write32(hwoffload.RegUDPRxCons, pos+n)
	}
	for i := range 40 {
		s := h.next()
		if s.Kind() != hwoffload.KindCompletion || s.Seq() != uint64(17+i) {
			t.Fatalf("record %d: kind %d seq %d, want a completion of seq %d", 16+i, s.Kind(), s.Seq(), 17+i)
		}
		if tag, op, st, _, n := s.Completion(); tag != uint32(100+i) || op != hwoffload.OpUDPSend || st != hwoffload.StatusOK || n != size {
			t.Fatalf("completion %d: tag %d op %d status %d length %d", i, tag, op, st, n)
		}
	}
	ring.Read()
	if d := ring.Dropped(); d != 0 || ring.Lost() != 0 {
		t.Errorf("ring 3 DROPPED %d, lost %d: want no record lost", d, ring.Lost())
	}
	h.until("the peer's 40 datagrams", func() bool { return got.Load() == 40 })

	send(200, 1)
	if s := h.next(); s.Kind() != hwoffload.KindUDPRecv {
		t.Fatalf("after the flood: record kind %d, want UDP_RECV", s.Kind())
	}
	if err := dev.Err(); err != nil {
		t.Errorf("ERROR %v", err)
	}
}

// TestHostUDPFloodTinyRing: through package hwoffload's PacketConn, with
// ring 3 of 16 slots, a peer floods the bound port while four goroutines
// send 100 datagrams each: every WriteTo completes (no completion is lost,
// so no waiter hangs and no UDP send slot leaks: 400 sends pass through the
// area's 32 slots), the peer gets all 400, the flood is read or counted
// as dropped, and the port still answers afterwards.
func TestHostUDPFloodTinyRing(t *testing.T) {
	_, dev, peer, b, got := tinyRingPair(t)
	ctx := ctxT(t)
	pc, err := dev.ListenUDP(ctx, 5000)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var read atomic.Int64
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := pc.ReadFromUDPAddrPort(buf); err != nil {
				return
			}
			read.Add(1)
		}
	}()
	u, err := peer.DialUDP(netip.MustParseAddrPort("10.9.0.2:5000"))
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	const flood = 3000
	floodDone := make(chan error, 1)
	go func() {
		msg := make([]byte, 200)
		for range flood {
			if _, err := u.Write(msg); err != nil {
				floodDone <- err
				return
			}
		}
		floodDone <- nil
	}()
	errs := make(chan error, 4)
	for g := range 4 {
		go func() {
			msg := make([]byte, 300)
			for i := range 100 {
				msg[0] = byte(g*100 + i)
				if _, err := pc.WriteToUDPAddrPort(msg, netip.MustParseAddrPort("10.9.0.1:9001")); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatalf("WriteTo under the flood: %v", err)
		}
	}
	if err := <-floodDone; err != nil {
		t.Fatal(err)
	}
	h := &rawHost{t: t, ctx: ctx, dev: dev}
	h.until("the peer's 400 datagrams", func() bool { return got.Load() == 400 })
	accounted := func() int64 {
		return read.Load() + int64(dev.Read64(hwoffload.RegUDPRxDropped)) + int64(pc.Dropped()) + int64(b.Stats().Dropped)
	}
	// Read or counted: netstack may drop a few more before the twin sees
	// them (the peer's queue while ARP resolves), so at most flood.
	if n := accounted(); n > flood || read.Load() == 0 {
		t.Errorf("%d datagrams read (%d) or counted as dropped, %d sent", n, read.Load(), flood)
	}
	t.Logf("flood of %d: %d read, %d dropped by the twin (UDP_RX_DROPPED), %d by the PacketConn; HOST_HELD %d, ring 3 DROPPED %d",
		flood, read.Load(), dev.Read64(hwoffload.RegUDPRxDropped), pc.Dropped(), dev.Read64(hwoffload.RegHostHeld), dev.Ring(hwoffload.RingHost).Dropped())
	before := read.Load()
	if _, err := u.Write([]byte("after")); err != nil {
		t.Fatal(err)
	}
	h.until("a datagram after the flood", func() bool { return read.Load() > before })
}
