package tickwire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/tickwire/tickwire"
)

// udpEchoServer makes B echo UDP on port with a reading goroutine, until the
// end of the test.
func udpEchoServer(t testing.TB, p *pair, port uint16) *tickwire.UDPConn {
	t.Helper()
	srv, err := p.b.ListenUDP(port)
	if err != nil {
		t.Fatal(err)
	}
	echoUDP(t, srv)
	return srv
}

// echoUDP answers every datagram srv receives from a goroutine looping on
// the allocation-free ReadFromUDPAddrPort/WriteToUDPAddrPort pair (which
// *tickwire.UDPConn and *net.UDPConn share), until the end of the test.
func echoUDP(t testing.TB, srv interface {
	ReadFromUDPAddrPort([]byte) (int, netip.AddrPort, error)
	WriteToUDPAddrPort([]byte, netip.AddrPort) (int, error)
	Close() error
}) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 2048)
		for {
			n, from, err := srv.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			srv.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	t.Cleanup(func() {
		srv.Close()
		wg.Wait()
	})
}

// udpEchoHandler makes B echo UDP on port from an OnReceive handler.
func udpEchoHandler(t testing.TB, p *pair, port uint16) *tickwire.UDPConn {
	t.Helper()
	srv, err := p.b.ServeUDP(port, func(c *tickwire.UDPConn, payload []byte, from netip.AddrPort) {
		c.WriteToUDPAddrPort(payload, from)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// staticARP gives a Config of newPair a static ARP entry for the other
// stack (link/pipe's default MACs), so that no datagram waits for ARP:
// netstack sends the packets that waited from a timer goroutine, which may
// still hold them when a short test ends and TestMain checks references.
func staticARP(c *tickwire.Config) {
	other, mac := addrB.Addr(), net.HardwareAddr{2, 0, 0, 0, 0, 0x0b}
	if c.Addr == addrB {
		other, mac = addrA.Addr(), net.HardwareAddr{2, 0, 0, 0, 0, 0x0a}
	}
	c.StaticARP = map[netip.Addr]net.HardwareAddr{other: mac}
}

func dialUDP(t testing.TB, p *pair, port uint16) net.Conn {
	t.Helper()
	c, err := p.a.DialUDP(addrPort(addrB, port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestUDPPingPongDoesNotAllocate asserts that a 64-byte datagram and its
// echo allocate nothing in steady state, with the echo served by a reading
// goroutine and by an OnReceive handler, and with the client reading or
// receiving through a handler of its own.
func TestUDPPingPongDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items; run without -race")
	}
	for _, tc := range []struct {
		name    string
		handler bool // the server echoes from a handler
	}{{"ReadFromUDPAddrPort", false}, {"ServeUDP", true}} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, staticARP)
			if tc.handler {
				udpEchoHandler(t, p, echoPort)
			} else {
				udpEchoServer(t, p, echoPort)
			}
			c := dialUDP(t, p, echoPort)
			c.SetReadDeadline(time.Now().Add(time.Minute))
			msg := make([]byte, 64)
			buf := make([]byte, 2048)
			roundTrip := func() {
				if _, err := c.Write(msg); err != nil {
					t.Fatal(err)
				}
				if n, err := c.Read(buf); err != nil || n != len(msg) {
					t.Fatalf("read %d, %v", n, err)
				}
				_ = c.(*tickwire.UDPConn).RxTime()
			}
			for range 200 {
				roundTrip() // warm the pools and the ring
			}
			if allocs := testing.AllocsPerRun(2000, roundTrip); allocs != 0 {
				t.Errorf("%.2f allocations per round trip, want 0", allocs)
			}
		})
	}
	t.Run("HandlerBothSides", func(t *testing.T) {
		p := newPair(t, staticARP)
		udpEchoHandler(t, p, echoPort)
		var got atomic.Int64
		pc, err := p.a.ServeUDP(0, func(c *tickwire.UDPConn, _ []byte, _ netip.AddrPort) { _ = c.RxTime(); got.Add(1) })
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		msg := make([]byte, 64)
		to := addrPort(addrB, echoPort)
		var sent int64
		roundTrip := func() {
			sent++
			if _, err := pc.WriteToUDPAddrPort(msg, to); err != nil {
				t.Fatal(err)
			}
			for got.Load() < sent { // over link/pipe the echo is in before the write returns
				time.Sleep(time.Microsecond)
			}
		}
		for range 200 {
			roundTrip()
		}
		if allocs := testing.AllocsPerRun(2000, roundTrip); allocs != 0 {
			t.Errorf("%.2f allocations per round trip, want 0", allocs)
		}
	})
}

// TestUDPReadFromAllocatesOnce checks that net.PacketConn's ReadFrom and
// WriteTo cost one allocation per round trip: the address ReadFrom returns.
func TestUDPReadFromAllocatesOnce(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items; run without -race")
	}
	p := newPair(t, staticARP)
	srv, err := p.b.ListenUDP(echoPort)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := dialUDP(t, p, echoPort)
	msg, buf := make([]byte, 64), make([]byte, 2048)
	roundTrip := func() {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		n, from, err := srv.ReadFrom(buf) // over link/pipe the datagram is in already
		if err != nil {
			t.Fatal(err)
		}
		if _, err := srv.WriteTo(buf[:n], from); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 {
		roundTrip()
	}
	if allocs := testing.AllocsPerRun(1000, roundTrip); allocs != 1 {
		t.Errorf("%.2f allocations per round trip, want 1", allocs)
	}
}

// TestUDPRouteCacheDoesNotAllocate has B's echo handler answer peers at
// four addresses in turn: each keeps its cached route, so no round
// allocates (the answers are dropped by A, which does not hold the
// addresses).
func TestUDPRouteCacheDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items; run without -race")
	}
	var peers []netip.Addr
	for i := range 4 {
		peers = append(peers, netip.AddrFrom4([4]byte{10, 0, 0, byte(20 + i)}))
	}
	p := newPair(t, func(c *tickwire.Config) {
		staticARP(c)
		for _, a := range peers {
			c.StaticARP[a] = net.HardwareAddr{2, 0, 0, 0, 0, 0x0a}
		}
	})
	udpEchoHandler(t, p, echoPort)
	var frames [][]byte
	for _, a := range peers {
		src := netip.AddrPortFrom(a, 4000)
		ip := ipv4Packet(a, addrB.Addr(), uint8(header.UDPProtocolNumber), udpDatagram(src, addrPort(addrB, echoPort), make([]byte, 64)))
		frames = append(frames, ethernet(p.pb.MAC(), p.pa.MAC(), uint16(header.IPv4ProtocolNumber), ip))
	}
	// A round waits for its answers: sent back to back, datagrams that find
	// the socket's receive goroutine running the handler queue in its ring,
	// and a producer that never waits outruns it until the ring overflows
	// (counted in DropUDPBufferFull), which is not what this test measures.
	round := func() {
		want := p.b.Stats().UDPTxPackets + uint64(len(frames))
		for _, f := range frames {
			if err := p.pa.Send(f); err != nil {
				t.Fatal(err)
			}
		}
		for deadline := time.Now().Add(5 * time.Second); p.b.Stats().UDPTxPackets < want; {
			if time.Now().After(deadline) {
				t.Fatalf("B answered %d of the round's %d datagrams; stats %+v", p.b.Stats().UDPTxPackets+uint64(len(frames))-want, len(frames), p.b.Stats())
			}
			runtime.Gosched()
		}
	}
	for range 100 {
		round()
	}
	before := p.b.Stats().UDPTxPackets
	if allocs := testing.AllocsPerRun(1000, round); allocs != 0 {
		t.Errorf("%.2f allocations per round of 4 peers, want 0", allocs)
	}
	if sent := p.b.Stats().UDPTxPackets - before; sent != 4*1001 {
		t.Errorf("B answered %d datagrams, want %d; stats %+v", sent, 4*1001, p.b.Stats())
	}
}

// TestServeUDP echoes through a handler and checks what the handler sees.
func TestServeUDP(t *testing.T) {
	p := newPair(t, staticARP)
	var mu sync.Mutex
	var froms []netip.AddrPort
	srv, err := p.b.ServeUDP(9000, func(c *tickwire.UDPConn, payload []byte, from netip.AddrPort) {
		mu.Lock()
		froms = append(froms, from)
		mu.Unlock()
		if _, err := c.WriteToUDPAddrPort(payload, from); err != nil {
			t.Errorf("write from the handler: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if _, _, err := srv.ReadFrom(make([]byte, 10)); !errors.Is(err, tickwire.ErrHandlerSet) {
		t.Errorf("ReadFrom on a handler socket: %v, want ErrHandlerSet", err)
	}
	if err := srv.OnReceive(func(*tickwire.UDPConn, []byte, netip.AddrPort) {}); !errors.Is(err, tickwire.ErrHandlerSet) {
		t.Errorf("second OnReceive: %v, want ErrHandlerSet", err)
	}
	c := dialUDP(t, p, 9000)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2048)
	for i, size := range []int{0, 1, 64, 1472} {
		msg := randomBytes(size, uint64(i))
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		n, err := c.Read(buf)
		if err != nil || !bytes.Equal(buf[:n], msg) {
			t.Fatalf("echo of %d bytes: got %d, %v", size, n, err)
		}
	}
	local := c.LocalAddr().(*net.UDPAddr).AddrPort()
	mu.Lock()
	defer mu.Unlock()
	if len(froms) != 4 || froms[0] != netip.AddrPortFrom(addrA.Addr(), local.Port()) {
		t.Errorf("handler saw senders %v, want 4 times %v", froms, local)
	}
}

// TestUDPHandlerGetsQueuedDatagrams checks that datagrams received before
// OnReceive reach the handler, in order.
func TestUDPHandlerGetsQueuedDatagrams(t *testing.T) {
	p := newPair(t, staticARP)
	srv, err := p.b.ListenUDP(9001)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := dialUDP(t, p, 9001)
	for i := range 5 {
		c.Write([]byte{byte(i)})
	}
	got := make(chan byte, 10)
	if err := srv.OnReceive(func(_ *tickwire.UDPConn, payload []byte, _ netip.AddrPort) { got <- payload[0] }); err != nil {
		t.Fatal(err)
	}
	c.Write([]byte{5})
	for i := range 6 {
		select {
		case b := <-got:
			if b != byte(i) {
				t.Fatalf("datagram %d arrived as number %d", b, i)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d datagrams reached the handler", i)
		}
	}
}

// TestUDPReceiveQueueFull fills a socket's ring: the datagrams beyond
// Config.UDPReceiveQueue are dropped and counted, the others read in order.
func TestUDPReceiveQueueFull(t *testing.T) {
	p := newPair(t, func(c *tickwire.Config) {
		staticARP(c)
		c.UDPReceiveQueue = 4
	})
	srv, err := p.b.ListenUDP(9002)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := dialUDP(t, p, 9002)
	for i := range 10 {
		c.Write([]byte{byte(i)})
	}
	// Over link/pipe the datagrams usually arrive inline; they wait when
	// another goroutine is delivering in the same direction.
	for deadline := time.Now().Add(5 * time.Second); p.b.Stats().UDPRxPackets < 10 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if st := p.b.Stats(); st.DropUDPBufferFull != 6 {
		t.Errorf("DropUDPBufferFull = %d, want 6", st.DropUDPBufferFull)
	}
	buf := make([]byte, 10)
	for i := range 4 {
		n, _, err := srv.ReadFrom(buf)
		if err != nil || n != 1 || buf[0] != byte(i) {
			t.Fatalf("read %d: %v %v", i, buf[:n], err)
		}
	}
	srv.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, _, err := srv.ReadFrom(buf); !errors.Is(err, syscall.ETIMEDOUT) && !isTimeout(err) {
		t.Fatalf("fifth read: %v, want a timeout", err)
	}
}

// TestUDPReceiveBufferFull: a socket takes datagrams while it holds fewer
// than Config.UDPReceiveBuffer bytes (each counting its payload, rounded up
// to 8, plus 32), as the kernel does with SO_RCVBUF: 4 of 1000 bytes fill
// 4 KiB, the rest are dropped and counted, and reading makes room again.
func TestUDPReceiveBufferFull(t *testing.T) {
	p := newPair(t, func(c *tickwire.Config) {
		staticARP(c)
		c.UDPReceiveBuffer = tickwire.MinUDPReceiveBuffer
	})
	srv, err := p.b.ListenUDP(9002)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := dialUDP(t, p, 9002)
	send := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			c.Write(bytes.Repeat([]byte{byte(i)}, 1000))
		}
		for deadline := time.Now().Add(5 * time.Second); p.b.Stats().UDPRxPackets < uint64(to) && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	send(0, 10)
	if st := p.b.Stats(); st.DropUDPBufferFull != 6 {
		t.Errorf("DropUDPBufferFull = %d, want 6", st.DropUDPBufferFull)
	}
	buf := make([]byte, 2000)
	read := func(want byte) {
		t.Helper()
		n, _, err := srv.ReadFrom(buf)
		if err != nil || n != 1000 || buf[0] != want || buf[999] != want {
			t.Fatalf("read: %d bytes starting %d, %v; want 1000 of %d", n, buf[0], err, want)
		}
	}
	for i := range 4 {
		read(byte(i))
	}
	send(10, 12) // room again
	read(10)
	read(11)
	if st := p.b.Stats(); st.DropUDPBufferFull != 6 {
		t.Errorf("DropUDPBufferFull = %d after reading, want 6", st.DropUDPBufferFull)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// sendUDP injects a hand-made datagram from A's MAC into B.
func sendUDP(t *testing.T, p *pair, src netip.AddrPort, dst netip.AddrPort, payload []byte, edit func(ip []byte)) {
	t.Helper()
	ip := ipv4Packet(src.Addr(), dst.Addr(), uint8(header.UDPProtocolNumber), udpDatagram(src, dst, payload))
	if edit != nil {
		edit(ip)
	}
	if err := p.pa.Send(ethernet(p.pb.MAC(), p.pa.MAC(), uint16(header.IPv4ProtocolNumber), ip)); err != nil {
		t.Fatal(err)
	}
}

// TestUDPInboundRules injects datagrams direct delivery must take, refuse,
// or leave to netstack, and checks what the socket reads and what Stats
// count.
func TestUDPInboundRules(t *testing.T) {
	p := newPairOpts(t, wireSized, staticARP) // the stack's own checks count
	srv, err := p.b.ListenUDP(9003)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	src := netip.AddrPortFrom(addrA.Addr(), 5555)
	dst := addrPort(addrB, 9003)
	fixIP := func(ip []byte) {
		header.IPv4(ip).SetChecksum(0)
		header.IPv4(ip).SetChecksum(^header.IPv4(ip).CalculateChecksum())
	}

	sendUDP(t, p, src, dst, []byte("plain"), nil)
	sendUDP(t, p, src, dst, []byte("no checksum"), func(ip []byte) { ip[header.IPv4MinimumSize+6], ip[header.IPv4MinimumSize+7] = 0, 0 })
	sendUDP(t, p, src, netip.AddrPortFrom(netip.MustParseAddr("255.255.255.255"), 9003), []byte("broadcast"), nil)
	sendUDP(t, p, src, netip.AddrPortFrom(netip.MustParseAddr("10.0.0.255"), 9003), []byte("subnet broadcast"), nil)
	// Dropped and counted:
	sendUDP(t, p, src, dst, []byte("bad checksum"), func(ip []byte) { ip[header.IPv4MinimumSize+6] ^= 0x11 })
	sendUDP(t, p, src, dst, []byte("long length"), func(ip []byte) { ip[header.IPv4MinimumSize+5] += 1 })
	sendUDP(t, p, src, dst, []byte("short length"), func(ip []byte) { ip[header.IPv4MinimumSize+4], ip[header.IPv4MinimumSize+5] = 0, 7 })
	sendUDP(t, p, src, netip.AddrPortFrom(netip.MustParseAddr("10.0.0.3"), 9003), []byte("not for us"), nil)
	// Left to netstack, which drops them:
	sendUDP(t, p, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 1), dst, []byte("martian"), nil)
	sendUDP(t, p, netip.AddrPortFrom(netip.MustParseAddr("224.0.0.1"), 1), dst, []byte("multicast source"), nil)
	// Shorter UDP length than the IP payload: the rest is padding.
	sendUDP(t, p, src, dst, []byte("trimmedXXX"), func(ip []byte) {
		ip[header.IPv4MinimumSize+5] -= 3
		u := header.UDP(ip[header.IPv4MinimumSize:])
		u.SetChecksum(0)
		fixIP(ip)
	})

	want := []string{"plain", "no checksum", "broadcast", "subnet broadcast", "trimmed"}
	srv.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 100)
	for _, w := range want {
		n, from, err := srv.ReadFromUDPAddrPort(buf)
		if err != nil || string(buf[:n]) != w || from != src {
			t.Fatalf("read %q from %v, %v; want %q from %v", buf[:n], from, err, w, src)
		}
	}
	srv.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if n, _, err := srv.ReadFrom(buf); err == nil {
		t.Fatalf("read %q, want nothing more", buf[:n])
	}
	st := p.b.Stats()
	if st.DropUDPChecksum != 1 || st.DropUDPMalformed != 2 || st.DropIPv4NotForUs != 1 {
		t.Errorf("DropUDPChecksum %d, DropUDPMalformed %d, DropIPv4NotForUs %d; want 1, 2, 1",
			st.DropUDPChecksum, st.DropUDPMalformed, st.DropIPv4NotForUs)
	}
	if st.UDPRxPackets != 11 {
		t.Errorf("UDPRxPackets = %d, want 11", st.UDPRxPackets)
	}
}

// TestUDPConnectedFilter checks that a connected socket takes datagrams
// from its peer only; the others draw ICMP port unreachable, as before.
func TestUDPConnectedFilter(t *testing.T) {
	p := newPair(t, staticARP)
	peer := netip.AddrPortFrom(addrA.Addr(), 7000)
	c, err := p.b.DialUDP(peer)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	local := c.LocalAddr().(*net.UDPAddr).AddrPort()
	dst := netip.AddrPortFrom(addrB.Addr(), local.Port())
	sendUDP(t, p, netip.AddrPortFrom(addrA.Addr(), 7001), dst, []byte("stranger"), nil)
	sendUDP(t, p, peer, dst, []byte("peer"), nil)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 100)
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "peer" {
		t.Fatalf("read %q, %v; want \"peer\"", buf[:n], err)
	}
	for deadline := time.Now().Add(5 * time.Second); p.b.Stats().ICMPUnreachableTx == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond) // netstack counts the message after sending it
	}
	if st := p.b.Stats(); st.DropUDPNoListener != 1 || st.ICMPUnreachableTx != 1 {
		t.Errorf("DropUDPNoListener %d, ICMPUnreachableTx %d; want 1, 1", st.DropUDPNoListener, st.ICMPUnreachableTx)
	}
}

// TestUDPBindConflict checks that a port is taken once, and free again
// after Close.
func TestUDPBindConflict(t *testing.T) {
	p := newPair(t, staticARP)
	first, err := p.b.ListenUDP(9004)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.b.ListenUDP(9004); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("second ListenUDP: %v, want EADDRINUSE", err)
	}
	first.Close()
	second, err := p.b.ListenUDP(9004)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	c := dialUDP(t, p, 9004)
	c.Write([]byte("to the second"))
	second.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 100)
	if n, _, err := second.ReadFrom(buf); err != nil || string(buf[:n]) != "to the second" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	if _, _, err := first.ReadFrom(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read on the closed socket: %v", err)
	}
}

// TestUDPFragmented sends datagrams larger than the MTU: netstack fragments
// them, the wire reassembles them, and both a reader and a handler get them.
func TestUDPFragmented(t *testing.T) {
	p := newPair(t, staticARP)
	srv, err := p.b.ListenUDP(9005)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := dialUDP(t, p, 9005)
	big := randomBytes(4000, 1)
	if _, err := c.Write(big); err != nil {
		t.Fatal(err)
	}
	srv.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 8000)
	n, _, err := srv.ReadFrom(buf)
	if err != nil || !bytes.Equal(buf[:n], big) {
		t.Fatalf("read %d bytes, %v; want the 4000 sent", n, err)
	}

	got := make(chan []byte, 1)
	h, err := p.b.ServeUDP(9006, func(_ *tickwire.UDPConn, payload []byte, _ netip.AddrPort) {
		got <- append([]byte(nil), payload...)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c2 := dialUDP(t, p, 9006)
	c2.Write(big)
	select {
	case b := <-got:
		if !bytes.Equal(b, big) {
			t.Fatalf("handler got %d bytes, want the 4000 sent", len(b))
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the handler got nothing; receiver's stats: %+v", p.b.Stats())
	}
	if got := p.b.Stats().IPv4Reassembled; got != 2 {
		t.Errorf("IPv4Reassembled = %d, want 2", got)
	}
}

// TestUDPLargeDatagramToBusyHandler sends datagrams, one larger than a
// ring slot, while another goroutine runs the socket's handler: none is
// dropped, each reaches the handler once it is free.
func TestUDPLargeDatagramToBusyHandler(t *testing.T) {
	p := newPair(t, staticARP)
	got := make(chan int, 4)
	srv, err := p.b.ServeUDP(9007, func(_ *tickwire.UDPConn, payload []byte, _ netip.AddrPort) {
		got <- len(payload)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := dialUDP(t, p, 9007)
	release := tickwire.HoldUDPHandler(srv)
	for _, size := range []int{100, 4000} {
		if _, err := c.Write(randomBytes(size, 2)); err != nil {
			release()
			t.Fatal(err)
		}
	}
	release()
	sizes := map[int]bool{}
	for range 2 {
		select {
		case n := <-got:
			sizes[n] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("the handler got %v; receiver's stats: %+v", sizes, p.b.Stats())
		}
	}
	if !sizes[100] || !sizes[4000] {
		t.Errorf("the handler got sizes %v, want 100 and 4000", sizes)
	}
	if st := p.b.Stats(); st.DropUDPBufferFull != 0 {
		t.Errorf("DropUDPBufferFull = %d, want 0", st.DropUDPBufferFull)
	}
}

// TestUDPBroadcastRefused checks that a broadcast, which direct delivery
// leaves to netstack, is refused without SO_BROADCAST, as before.
func TestUDPBroadcastRefused(t *testing.T) {
	p := newPair(t, staticARP)
	b, err := p.b.ListenUDP(0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.WriteTo([]byte("all"), &net.UDPAddr{IP: net.IPv4bcast, Port: 9}); err == nil {
		t.Error("a broadcast without SO_BROADCAST was sent")
	}
}

// TestUDPClose checks that Close wakes a blocked reader, stops a handler
// (also when called from it), and that a Stack's Close with sockets left
// open leaks nothing (TestMain checks references and goroutines).
func TestUDPClose(t *testing.T) {
	p := newPair(t, staticARP)
	pc, err := p.b.ListenUDP(9008)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, _, err := pc.ReadFrom(make([]byte, 10))
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond)
	pc.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("blocked ReadFrom returned %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake the reader")
	}
	if err := pc.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}

	var calls atomic.Int32
	h, err := p.b.ServeUDP(9009, func(c *tickwire.UDPConn, _ []byte, _ netip.AddrPort) {
		calls.Add(1)
		c.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	c := dialUDP(t, p, 9009)
	c.Write([]byte("1"))
	c.Write([]byte("2"))
	// The first datagram may wait for the handler's goroutine (it drains
	// the socket once at OnReceive).
	for deadline := time.Now().Add(5 * time.Second); calls.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond)
	if n := calls.Load(); n != 1 {
		t.Errorf("handler called %d times, want 1 (it closed the socket)", n)
	}
	if err := h.OnReceive(func(*tickwire.UDPConn, []byte, netip.AddrPort) {}); !errors.Is(err, net.ErrClosed) {
		t.Errorf("OnReceive after Close: %v", err)
	}

	// Left open: the Stack's Close must release them.
	open, err := p.a.ListenUDP(9010)
	if err != nil {
		t.Fatal(err)
	}
	open.WriteTo([]byte("x"), &net.UDPAddr{IP: addrB.Addr().AsSlice(), Port: 9})
	if _, err := p.a.ServeUDP(9011, func(*tickwire.UDPConn, []byte, netip.AddrPort) {}); err != nil {
		t.Fatal(err)
	}
}

// TestUDPWriteErrors checks the write-side errors.
func TestUDPWriteErrors(t *testing.T) {
	p := newPair(t, staticARP)
	u, err := p.b.ListenUDP(0)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if _, err := u.Write([]byte("x")); !errors.Is(err, syscall.EDESTADDRREQ) {
		t.Errorf("Write on an unconnected socket: %v", err)
	}
	if _, err := u.WriteToUDPAddrPort(make([]byte, 65508), addrPort(addrA, 9)); !errors.Is(err, syscall.EMSGSIZE) {
		t.Errorf("oversized write: %v", err)
	}
	if _, err := u.WriteToUDPAddrPort([]byte("x"), netip.MustParseAddrPort("192.0.2.1:9")); !errors.Is(err, syscall.ENETUNREACH) {
		t.Errorf("write off-link without a gateway: %v", err)
	}
	u.SetWriteDeadline(time.Now().Add(-time.Second))
	if _, err := u.WriteToUDPAddrPort([]byte("x"), addrPort(addrA, 9)); !isTimeout(err) {
		t.Errorf("write past the deadline: %v", err)
	}
}

// TestUDPAfterStackClose checks a socket left open across the Stack's
// Close: reads and writes fail, Close succeeds, and nothing leaks (TestMain
// checks references).
func TestUDPAfterStackClose(t *testing.T) {
	p := newPair(t, staticARP)
	u, err := p.a.ListenUDP(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.WriteToUDPAddrPort([]byte("x"), addrPort(addrB, 9)); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, _, err := u.ReadFromUDPAddrPort(make([]byte, 10))
		errc <- err
	}()
	p.a.Close()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("a read blocked across the Stack's Close returned no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the Stack's Close did not wake the reader")
	}
	if _, err := u.WriteToUDPAddrPort([]byte("x"), addrPort(addrB, 9)); err == nil {
		t.Error("a write after the Stack's Close succeeded")
	}
	if err := u.Close(); err != nil {
		t.Errorf("Close after the Stack's Close: %v", err)
	}
}

// TestUDPRxIPv4ID: a handler and a reader see the IPv4 identification and
// flags of the datagram they are given (what RoCEv2's invariant CRC
// covers).
func TestUDPRxIPv4ID(t *testing.T) {
	p := newPair(t, staticARP)
	type idFlags struct {
		id, flags uint16
		ok        bool
	}
	got := make(chan idFlags, 1)
	h, err := p.b.ServeUDP(9008, func(c *tickwire.UDPConn, _ []byte, _ netip.AddrPort) {
		id, flags, ok := c.RxIPv4ID()
		got <- idFlags{id, flags, ok}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	r, err := p.b.ListenUDP(9009)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	src := netip.AddrPortFrom(addrA.Addr(), 4000)
	withID := func(id, flags uint16) func(ip []byte) {
		return func(ip []byte) {
			binary.BigEndian.PutUint16(ip[4:], id)
			binary.BigEndian.PutUint16(ip[6:], flags)
			h := header.IPv4(ip)
			h.SetChecksum(0)
			h.SetChecksum(^h.CalculateChecksum())
		}
	}
	sendUDP(t, p, src, netip.AddrPortFrom(addrB.Addr(), 9008), []byte("x"), withID(0x718c, 0x4000))
	select {
	case g := <-got:
		if g != (idFlags{0x718c, 0x4000, true}) {
			t.Errorf("handler: RxIPv4ID = %#x, %#x, %v; want 0x718c, 0x4000, true", g.id, g.flags, g.ok)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler got nothing")
	}
	sendUDP(t, p, src, netip.AddrPortFrom(addrB.Addr(), 9009), []byte("y"), withID(0xbeef, 0))
	r.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := r.ReadFrom(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	if id, flags, ok := r.RxIPv4ID(); id != 0xbeef || flags != 0 || !ok {
		t.Errorf("reader: RxIPv4ID = %#x, %#x, %v; want 0xbeef, 0, true", id, flags, ok)
	}
}
