package tickwire_test

import (
	"errors"
	"flag"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// echoServer accepts on ln and echoes each connection until ln closes.
func echoServer(ln net.Listener) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
}

func ping(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write: %v", err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
		t.Fatalf("echo: %q, %v", buf, err)
	}
}

// TestConnectionLimitAccept: B allows the default 64 connections; the 65th
// is reset, the first 64 keep working, and closing one frees a slot.
func TestConnectionLimitAccept(t *testing.T) {
	const limit = tickwire.DefaultMaxConnections
	p := newPair(t, func(c *tickwire.Config) {
		if c.Addr == addrA {
			c.MaxConnections = 2 * limit // only B's limit is under test
		}
		c.MaxConnectionsPerSource = limit // every client is A
	})
	ln, err := p.b.ListenTCP(7)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	echoServer(ln)

	var conns []net.Conn
	for i := range limit {
		c, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, 7))
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		defer c.Close()
		ping(t, c, "hello")
		conns = append(conns, c)
	}
	// The handshake of the 65th completes in netstack; Accept then resets it.
	extra, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, 7))
	if err == nil {
		extra.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = extra.Read(make([]byte, 1))
		extra.Close()
	}
	if err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("connection %d: err = %v, want a reset", limit+1, err)
	}
	for _, c := range conns {
		ping(t, c, "still here")
	}
	st := p.b.Stats()
	if st.ConnsRefused != 1 || st.ConnsOpen != limit || st.ConnsAccepted != limit {
		t.Errorf("B: refused %d open %d accepted %d; want 1, %d, %d", st.ConnsRefused, st.ConnsOpen, st.ConnsAccepted, limit, limit)
	}

	// Free a slot on both sides: B's server closes its end after A's FIN.
	conns[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for p.b.Stats().ConnsOpen != limit-1 {
		if time.Now().After(deadline) {
			t.Fatalf("B still holds %d slots after a close", p.b.Stats().ConnsOpen)
		}
		time.Sleep(time.Millisecond)
	}
	c, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, 7))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ping(t, c, "freed")
}

// TestConnectionLimitDial: A allows 2 connections; the third dial fails at
// once with ErrTooManyConnections.
func TestConnectionLimitDial(t *testing.T) {
	p := newPair(t, func(c *tickwire.Config) {
		if c.Addr == addrA {
			c.MaxConnections = 2
		}
	})
	ln, err := p.b.ListenTCP(7)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	echoServer(ln)
	for range 2 {
		c, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, 7))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	_, err = p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, 7))
	var op *net.OpError
	if !errors.Is(err, tickwire.ErrTooManyConnections) || !errors.As(err, &op) {
		t.Fatalf("third dial: %v, want a *net.OpError wrapping ErrTooManyConnections", err)
	}
	if st := p.a.Stats(); st.ConnsRefused != 1 || st.ConnsDialed != 2 {
		t.Errorf("A: refused %d dialed %d; want 1, 2", st.ConnsRefused, st.ConnsDialed)
	}
}

// TestManyConnections opens 1,000 connections (200 under -race or -short,
// -conns to change) with the limit configured to 10,000, and echoes on each.
// manyConns sets TestManyConnections' count: go test -run TestManyConnections
// -args -conns=10000 checks the full 10,000 (about 10 s and 450 MB).
var manyConns = flag.Int("conns", 0, "connections opened by TestManyConnections (0: 1000, or 200 under -race or -short)")

func TestManyConnections(t *testing.T) {
	n := *manyConns
	switch {
	case n > 0:
	case testing.Short() || raceEnabled:
		n = 200
	default:
		n = 1000
	}
	p := newPair(t, func(c *tickwire.Config) { c.MaxConnections, c.MaxConnectionsPerSource = 10000, 10000 })
	ln, err := p.b.ListenTCP(7)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	echoServer(ln)
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range n {
		c, err := p.a.DialTCP(ctxTimeout(t, 10*time.Second), addrPort(addrB, 7))
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		ping(t, c, "x")
	}
	if st := p.b.Stats(); st.ConnsOpen != uint64(n) {
		t.Errorf("B ConnsOpen = %d, want %d", st.ConnsOpen, n)
	}
}

// TestSYNFlood floods B with SYNs from spoofed off-subnet sources while a
// connection is open: the connection keeps working, a new one is
// established, and B answered the flood with SYN cookies.
func TestSYNFlood(t *testing.T) {
	p := newPair(t, func(c *tickwire.Config) {
		if c.Addr == addrB {
			c.Gateway = addrA.Addr() // replies to spoofed sources go to A, which drops them
		}
	})
	p.serveEcho(t)
	old := p.dialEcho(t)
	ping(t, old, "before")

	r := rand.New(rand.NewPCG(7, 7))
	floods := 5000
	if raceEnabled {
		floods = 1000 // still 15 times the SYN queue
	}
	for range floods {
		src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{byte(128 + r.IntN(96)), byte(r.Uint32()), byte(r.Uint32()), byte(1 + r.IntN(254))}), uint16(1024+r.IntN(60000)))
		frame := ethernet(p.pb.MAC(), p.pa.MAC(), uint16(header.IPv4ProtocolNumber),
			ipv4Packet(src.Addr(), addrB.Addr(), uint8(header.TCPProtocolNumber), tcpSYN(src, addrPort(addrB, 7), r.Uint32(), 1460)))
		if err := p.pa.Send(frame); err != nil {
			t.Fatal(err)
		}
	}
	ping(t, old, "during")
	fresh, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, 7))
	if err != nil {
		t.Fatalf("new connection under flood: %v", err)
	}
	defer fresh.Close()
	ping(t, fresh, "new")
	st := p.b.Stats()
	if st.TCPSYNCookiesTx == 0 {
		t.Errorf("no SYN cookies sent under a flood of %d SYNs", floods)
	}
	if st.ConnsOpen != 2 {
		t.Errorf("ConnsOpen = %d, want 2: half-open connections must not use the budget", st.ConnsOpen)
	}
	t.Logf("flood of %d SYNs: %d SYN cookies, %d listen drops", floods, st.TCPSYNCookiesTx, st.DropTCPListenFull)
}

// TestARPTimeout dials an on-link address nobody holds: ARP gives up after
// ARPTimeout and the dial fails with EHOSTUNREACH.
func TestARPTimeout(t *testing.T) {
	p := newPair(t, nil)
	start := time.Now()
	_, err := p.a.DialTCP(ctxTimeout(t, 10*time.Second), netip.MustParseAddrPort("10.0.0.99:7"))
	elapsed := time.Since(start)
	if !errors.Is(err, syscall.EHOSTUNREACH) {
		t.Fatalf("dial: %v, want EHOSTUNREACH", err)
	}
	// Not a timing assertion on speed: ARP must not give up before the
	// configured timeout, and must give up instead of running into the SYN
	// retries (more than 1 s).
	upper := 1500 * time.Millisecond
	if raceEnabled {
		upper = 3 * time.Second
	}
	if elapsed < 400*time.Millisecond || elapsed > upper {
		t.Errorf("gave up after %v, want about 500 ms", elapsed)
	}
	deadline := time.Now().Add(time.Second)
	for p.a.Stats().ARPTimeouts == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // netstack reports the state change just after failing the dial
	}
	st := p.a.Stats()
	if st.ARPTimeouts != 1 || st.ARPMisses == 0 || st.ConnsFailed != 1 || st.ConnsOpen != 0 {
		t.Errorf("ARPTimeouts %d ARPMisses %d ConnsFailed %d ConnsOpen %d; want 1, >0, 1, 0", st.ARPTimeouts, st.ARPMisses, st.ConnsFailed, st.ConnsOpen)
	}
	t.Logf("host unreachable after %v", elapsed)
}

// TestStaticARP gives A a static entry for B: A never sends an ARP request.
func TestStaticARP(t *testing.T) {
	p := newPair(t, func(c *tickwire.Config) {
		if c.Addr == addrA {
			c.StaticARP = map[netip.Addr]net.HardwareAddr{addrB.Addr(): {2, 0, 0, 0, 0, 0x0b}}
		}
	})
	p.serveEcho(t)
	c := p.dialEcho(t)
	ping(t, c, "static")
	if st := p.a.Stats(); st.ARPRequestsTx != 0 || st.ARPEntries != 0 {
		t.Errorf("A sent %d ARP requests and holds %d dynamic entries; want 0, 0", st.ARPRequestsTx, st.ARPEntries)
	}
	// netstack counts a request once its write returns, which over
	// link/pipe can be after the answer has done its work.
	settled(func() bool { return p.b.Stats().ARPRequestsTx == 1 })
	if st := p.b.Stats(); st.ARPRequestsTx != 1 {
		t.Errorf("B sent %d ARP requests, want 1", st.ARPRequestsTx)
	}
}

// TestARPBound floods B with ARP requests from 600 hosts: the dynamic table
// never holds more than ARPEntries, the overflow is counted, the peer B is
// talking to keeps its entry, and B still answers a late newcomer after its
// retry.
func TestARPBound(t *testing.T) {
	const bound = 128
	p := newPair(t, func(c *tickwire.Config) {
		c.Addr = netip.PrefixFrom(c.Addr.Addr(), 16)
	})
	if _, err := p.b.Ping(ctxTimeout(t, 5*time.Second), addrA.Addr()); err != nil {
		t.Fatal(err)
	}
	if st := tickwire.NeighborState(p.b, addrA.Addr()); st != "Reachable" {
		t.Fatalf("B's entry for A is %q, want Reachable", st)
	}
	var maxSeen int
	for i := range 600 {
		ip := netip.AddrFrom4([4]byte{10, 0, byte(1 + i/250), byte(1 + i%250)})
		mac := net.HardwareAddr{2, 1, 0, 0, byte(i >> 8), byte(i)}
		if err := p.pa.Send(arpRequest(mac, ip, addrB.Addr())); err != nil {
			t.Fatal(err)
		}
		maxSeen = max(maxSeen, tickwire.NeighborCount(p.b))
	}
	deadline := time.Now().Add(5 * time.Second)
	for tickwire.NeighborCount(p.b) > bound {
		if time.Now().After(deadline) {
			t.Fatalf("table still holds %d entries", tickwire.NeighborCount(p.b))
		}
		time.Sleep(time.Millisecond)
	}
	if maxSeen > bound {
		t.Errorf("neighbor table reached %d entries, bound %d", maxSeen, bound)
	}
	if st := tickwire.NeighborState(p.b, addrA.Addr()); st == "" {
		t.Error("the flood evicted the entry of the peer in use")
	}
	for p.b.Stats().ARPEvictions == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // the evictor runs on its own goroutine
	}
	st := p.b.Stats()
	if st.ARPTableFull == 0 || st.ARPEvictions == 0 || st.ARPEntries > bound {
		t.Errorf("ARPTableFull %d ARPEvictions %d ARPEntries %d", st.ARPTableFull, st.ARPEvictions, st.ARPEntries)
	}
	t.Logf("600 hosts: table max %d, %d refused, %d evicted", maxSeen, st.ARPTableFull, st.ARPEvictions)

	// A newcomer is refused at most once: the evictor makes room for its retry.
	replies := st.ARPRepliesTx
	late := arpRequest(net.HardwareAddr{2, 1, 0, 0, 0xff, 0xff}, netip.MustParseAddr("10.0.9.9"), addrB.Addr())
	deadline = time.Now().Add(5 * time.Second)
	for p.b.Stats().ARPRepliesTx == replies {
		if time.Now().After(deadline) {
			t.Fatal("B never answered the newcomer")
		}
		if err := p.pa.Send(late); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := tickwire.NeighborCount(p.b); n > bound {
		t.Errorf("table holds %d entries after the newcomer", n)
	}

	// Entries netstack creates to resolve outgoing packets are trimmed too.
	evicted := p.b.Stats().ARPEvictions
	pc, err := p.b.ListenUDP(0)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	for i := range 300 {
		pc.WriteTo([]byte("x"), &net.UDPAddr{IP: net.IPv4(10, 0, byte(100+i/250), byte(1+i%250)), Port: 9})
	}
	deadline = time.Now().Add(5 * time.Second)
	for tickwire.NeighborCount(p.b) > bound {
		if time.Now().After(deadline) {
			t.Fatalf("table still holds %d entries after resolving 300 hosts", tickwire.NeighborCount(p.b))
		}
		time.Sleep(time.Millisecond)
	}
	if p.b.Stats().ARPEvictions == evicted {
		t.Error("no eviction counted for outgoing resolutions")
	}
}

// TestDialRefused dials a port nobody listens on: the peer's RST fails the
// dial with ECONNREFUSED and frees the slot.
func TestDialRefused(t *testing.T) {
	p := newPair(t, nil)
	_, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, 4444))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial: %v, want ECONNREFUSED", err)
	}
	if st := p.a.Stats(); st.ConnsOpen != 0 || st.ConnsFailed != 1 || st.TCPResetsRx != 1 {
		t.Errorf("ConnsOpen %d ConnsFailed %d TCPResetsRx %d; want 0, 1, 1", st.ConnsOpen, st.ConnsFailed, st.TCPResetsRx)
	}
}

// TestDialNoRoute dials off-link without a gateway: ENETUNREACH at once.
func TestDialNoRoute(t *testing.T) {
	p := newPair(t, nil)
	_, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), netip.MustParseAddrPort("192.0.2.1:7"))
	if !errors.Is(err, syscall.ENETUNREACH) {
		t.Fatalf("dial: %v, want ENETUNREACH", err)
	}
	if st := p.a.Stats(); st.ConnsOpen != 0 || st.ConnsFailed != 1 {
		t.Errorf("ConnsOpen %d ConnsFailed %d; want 0, 1", st.ConnsOpen, st.ConnsFailed)
	}
}
