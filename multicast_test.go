package tickwire_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

var testGroup = netip.MustParseAddr("239.1.2.3")

// multicastMAC is the Ethernet address of an IPv4 group (RFC 1112 6.4).
func multicastMAC(g netip.Addr) net.HardwareAddr {
	a := g.As4()
	return net.HardwareAddr{0x01, 0x00, 0x5e, a[1] & 0x7f, a[2], a[3]}
}

// groupFrame is a frame from A to group:port carrying payload.
func groupFrame(p *pair, group netip.Addr, port uint16, payload []byte) []byte {
	src := addrPort(addrA, 4000)
	ip := ipv4Packet(addrA.Addr(), group, uint8(header.UDPProtocolNumber), udpDatagram(src, netip.AddrPortFrom(group, port), payload))
	return ethernet(multicastMAC(group), p.pa.MAC(), uint16(header.IPv4ProtocolNumber), ip)
}

// TestMulticastDirect injects datagrams for a group into B: a socket
// receives them once it joined, on the direct path and without allocating,
// and not before nor after it left; another socket never does. Delivery
// may go through the socket's ring (when its goroutine holds the handler),
// which keeps order: a later datagram that arrives proves an earlier one
// was dropped.
func TestMulticastDirect(t *testing.T) {
	p := newPair(t, staticARP)
	var allocRuns atomic.Int64
	var group atomic.Value
	got, other := make(chan string, 64), make(chan string, 64)
	c, err := p.b.ServeUDP(5000, func(c *tickwire.UDPConn, payload []byte, from netip.AddrPort) {
		if string(payload) == "alloc" {
			allocRuns.Add(1)
			return
		}
		if string(payload) == "j1" {
			group.Store(c.RxGroup())
		}
		got <- string(payload)
	})
	if err != nil {
		t.Fatal(err)
	}
	o, err := p.b.ServeUDP(5001, func(c *tickwire.UDPConn, payload []byte, from netip.AddrPort) { other <- string(payload) })
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	send := func(f []byte) {
		t.Helper()
		if err := p.pa.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	next := func(ch chan string) string {
		t.Helper()
		select {
		case m := <-ch:
			return m
		case <-time.After(10 * time.Second):
			t.Fatalf("nothing received; stats %+v", p.b.Stats())
		}
		return ""
	}
	notForUs := p.b.Stats().DropIPv4NotForUs
	send(groupFrame(p, testGroup, 5000, []byte("pre")))
	if err := c.JoinGroup(testGroup); err != nil {
		t.Fatal(err)
	}
	send(groupFrame(p, testGroup, 5001, []byte("other"))) // o did not join
	sendUDP(t, p, addrPort(addrA, 4000), addrPort(addrB, 5001), []byte("o-marker"), nil)
	send(groupFrame(p, testGroup, 5000, []byte("j1")))
	if m := next(got); m != "j1" {
		t.Fatalf("joined socket got %q first, want j1", m)
	}
	if m := next(other); m != "o-marker" {
		t.Fatalf("other socket got %q first, want its unicast marker", m)
	}
	if g, _ := group.Load().(netip.Addr); g != testGroup {
		t.Errorf("RxGroup in the handler = %v, want %v", g, testGroup)
	}
	if d := p.b.Stats().DropIPv4NotForUs - notForUs; d != 2 {
		t.Errorf("DropIPv4NotForUs rose by %d, want 2", d)
	}
	f := groupFrame(p, testGroup, 5000, []byte("alloc"))
	if !raceEnabled {
		if allocs := testing.AllocsPerRun(1000, func() { send(f) }); allocs != 0 {
			t.Errorf("%.2f allocations per multicast datagram, want 0", allocs)
		}
	}
	if err := c.LeaveGroup(testGroup); err != nil {
		t.Fatal(err)
	}
	send(groupFrame(p, testGroup, 5000, []byte("post")))
	sendUDP(t, p, addrPort(addrA, 4000), addrPort(addrB, 5000), []byte("u-marker"), nil)
	if m := next(got); m != "u-marker" {
		t.Errorf("got %q after the leave, want the unicast marker", m)
	}
	c.Close()
}

// TestMulticastRead reads a group's datagram with ReadFromUDPAddrPort.
func TestMulticastRead(t *testing.T) {
	p := newPair(t, staticARP)
	c, err := p.b.ListenUDP(5002)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.JoinGroup(testGroup); err != nil {
		t.Fatal(err)
	}
	if err := p.pa.Send(groupFrame(p, testGroup, 5002, []byte("quote"))); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64)
	n, from, err := c.ReadFromUDPAddrPort(buf)
	if err != nil || string(buf[:n]) != "quote" || from != addrPort(addrA, 4000) {
		t.Fatalf("read %q from %v: %v", buf[:n], from, err)
	}
	if g := c.RxGroup(); g != testGroup {
		t.Errorf("RxGroup after the read = %v, want %v", g, testGroup)
	}
	// A unicast datagram clears it.
	sendUDP(t, p, addrPort(addrA, 4000), addrPort(addrB, 5002), []byte("u"), nil)
	if n, _, err = c.ReadFromUDPAddrPort(buf); err != nil || string(buf[:n]) != "u" || c.RxGroup().IsValid() {
		t.Errorf("unicast read %q: %v, RxGroup %v", buf[:n], err, c.RxGroup())
	}
}

// TestMulticastSend has A send to a group B joined, over the pipe: the
// frame carries the multicast TTL, the send allocates nothing, and A's own
// socket that joined the group gets its datagrams only with loopback on.
func TestMulticastSend(t *testing.T) {
	p := newPair(t, staticARP)
	got := make(chan string, 4)
	r, err := p.b.ServeUDP(5003, func(c *tickwire.UDPConn, payload []byte, from netip.AddrPort) {
		if string(payload) == "alloc" {
			return
		}
		select {
		case got <- string(payload) + " from " + from.String():
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.JoinGroup(testGroup); err != nil {
		t.Fatal(err)
	}
	ttls := make(chan byte, 4)
	p.pa.SetSniffer(func(f []byte) {
		if len(f) >= 14+20 && f[14+9] == 17 && f[14+16] == 239 {
			select {
			case ttls <- f[14+8]:
			default:
			}
		}
	})
	s, err := p.a.ListenUDP(4000)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.SetMulticastTTL(4); err != nil {
		t.Fatal(err)
	}
	// A's own socket on the group's port, joined.
	own := make(chan string, 4)
	mine, err := p.a.ServeUDP(5003, func(c *tickwire.UDPConn, payload []byte, from netip.AddrPort) {
		select {
		case own <- string(payload):
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	if err := mine.JoinGroup(testGroup); err != nil {
		t.Fatal(err)
	}
	to := netip.AddrPortFrom(testGroup, 5003)
	next := func(ch chan string) string {
		t.Helper()
		select {
		case m := <-ch:
			return m
		case <-time.After(10 * time.Second):
			t.Fatalf("nothing received; A's stats %+v", p.a.Stats())
		}
		return ""
	}
	if _, err := s.WriteToUDPAddrPort([]byte("hello group"), to); err != nil {
		t.Fatal(err)
	}
	if m, want := next(got), "hello group from "+addrPort(addrA, 4000).String(); m != want {
		t.Errorf("got %q, want %q", m, want)
	}
	if ttl := <-ttls; ttl != 4 {
		t.Errorf("TTL %d on the wire, want 4", ttl)
	}
	p.pa.SetSniffer(nil)
	if !raceEnabled {
		b := []byte("alloc")
		// AllocsPerRun counts the whole process and truncates: 2,000 runs
		// keep a one-off burst elsewhere (the joins' IGMP reports, both
		// stacks' timers) under one per send, while a send that allocates
		// still shows as 1.
		if allocs := testing.AllocsPerRun(2000, func() { s.WriteToUDPAddrPort(b, to) }); allocs != 0 {
			t.Errorf("%.2f allocations per multicast send, want 0", allocs)
		}
	}
	// Loopback on: A's own joined socket gets the datagram too; with it off
	// (above) it got none, or "looped" would not come first.
	s.SetMulticastLoopback(true)
	if _, err := s.WriteToUDPAddrPort([]byte("looped"), to); err != nil {
		t.Fatal(err)
	}
	if m := next(own); m != "looped" {
		t.Errorf("A's own socket got %q with loopback on, want looped", m)
	}
}

func TestMulticastErrors(t *testing.T) {
	p := newPair(t, staticARP)
	c, err := p.b.ListenUDP(5004)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.JoinGroup(netip.MustParseAddr("10.0.0.9")); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("join of a unicast address: %v", err)
	}
	if err := c.LeaveGroup(testGroup); !errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Errorf("leave without join: %v", err)
	}
	if err := c.JoinGroup(testGroup); err != nil {
		t.Fatal(err)
	}
	if err := c.JoinGroup(testGroup); !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("second join: %v", err)
	}
	if err := c.SetMulticastTTL(256); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("TTL 256: %v", err)
	}
	for i := 1; i < tickwire.MaxMulticastGroups; i++ {
		if err := c.JoinGroup(netip.AddrFrom4([4]byte{239, 2, byte(i >> 8), byte(i)})); err != nil {
			t.Fatalf("join %d: %v", i, err)
		}
	}
	if err := c.JoinGroup(netip.MustParseAddr("239.3.0.0")); !errors.Is(err, tickwire.ErrTooManyGroups) {
		t.Errorf("join past the bound: %v", err)
	}
	c.Close()
	if err := c.JoinGroup(testGroup); !errors.Is(err, net.ErrClosed) {
		t.Errorf("join after close: %v", err)
	}
	// Close gave the memberships back.
	d, err := p.b.ListenUDP(5005)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.JoinGroup(testGroup); err != nil {
		t.Errorf("join after the other socket closed: %v", err)
	}
}

// igmpQuery builds a general IGMP query from A to 224.0.0.1 with the
// Router Alert option and TTL 1 (RFC 2236, RFC 3376): IGMPv2 when v3 is
// false (8 bytes), IGMPv3 otherwise (12 bytes). maxResp is in tenths of a
// second.
func igmpQuery(p *pair, v3 bool, maxResp byte) []byte {
	igmp := []byte{0x11, maxResp, 0, 0, 0, 0, 0, 0}
	if v3 {
		igmp = append(igmp, 0, 0, 0, 0) // S/QRV, QQIC, no sources
	}
	binary.BigEndian.PutUint16(igmp[2:], onesComplement(igmp))
	ip := make([]byte, 24, 24+len(igmp))
	ip[0], ip[8], ip[9] = 0x46, 1, 2 // IHL 6, TTL 1, IGMP
	binary.BigEndian.PutUint16(ip[2:], uint16(24+len(igmp)))
	src, dst := addrA.Addr().As4(), [4]byte{224, 0, 0, 1}
	copy(ip[12:], src[:])
	copy(ip[16:], dst[:])
	copy(ip[20:], []byte{0x94, 0x04, 0, 0}) // Router Alert
	binary.BigEndian.PutUint16(ip[10:], onesComplement(ip))
	return ethernet(net.HardwareAddr{0x01, 0x00, 0x5e, 0, 0, 1}, p.pa.MAC(), uint16(header.IPv4ProtocolNumber), append(ip, igmp...))
}

func onesComplement(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// TestMulticastAnswersQueries has A query B's group memberships with an
// IGMPv3 and then an IGMPv2 general query: B answers each with a report of
// the same version naming the group it joined (to IGMPv3, a current-state
// record, which the join's state-change reports are not).
func TestMulticastAnswersQueries(t *testing.T) {
	p := newPair(t, staticARP)
	reports := make(chan string, 64)
	p.pb.SetSniffer(func(f []byte) {
		if len(f) < 14+20 || binary.BigEndian.Uint16(f[12:]) != 0x0800 || f[14+9] != 2 {
			return
		}
		igmp := f[14+int(f[14]&0x0f)*4:]
		var s string
		switch {
		case len(igmp) >= 16 && igmp[0] == 0x22: // v3 report: the first group record's type and address
			kind := map[byte]string{2: "is_ex", 4: "to_ex"}[igmp[8]]
			s = fmt.Sprintf("v3 %s %v", kind, netip.AddrFrom4([4]byte(igmp[12:16])))
		case len(igmp) >= 8 && igmp[0] == 0x16:
			s = fmt.Sprintf("v2 %v", netip.AddrFrom4([4]byte(igmp[4:8])))
		default:
			s = fmt.Sprintf("type %#x", igmp[0])
		}
		select {
		case reports <- s:
		default:
		}
	})
	c, err := p.b.ListenUDP(5006)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.JoinGroup(testGroup); err != nil {
		t.Fatal(err)
	}
	want := func(report string) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case r := <-reports:
				if r == report {
					return
				}
				t.Logf("skipping IGMP message %s", r)
			case <-deadline:
				t.Fatalf("no %q", report)
			}
		}
	}
	want("v3 to_ex " + testGroup.String()) // the join's state-change report
	for _, v3 := range []bool{true, false} {
		// Drain the join's retransmitted reports, then query.
		for len(reports) > 0 {
			<-reports
		}
		if err := p.pa.Send(igmpQuery(p, v3, 1)); err != nil {
			t.Fatal(err)
		}
		if v3 {
			want("v3 is_ex " + testGroup.String()) // a current-state record: the answer
		} else {
			want("v2 " + testGroup.String())
		}
	}
}

// TestMulticastFragments sends a 3000-byte datagram to a group in
// fragments: the wire reassembles it and the joined socket's handler gets
// it whole, with its group.
func TestMulticastFragments(t *testing.T) {
	p := newPair(t, staticARP)
	got := make(chan string, 1)
	c, err := p.b.ServeUDP(5007, func(c *tickwire.UDPConn, payload []byte, from netip.AddrPort) {
		select {
		case got <- fmt.Sprintf("%d bytes on %v", len(payload), c.RxGroup()):
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.JoinGroup(testGroup); err != nil {
		t.Fatal(err)
	}
	dg := udpDatagram(addrPort(addrA, 4000), netip.AddrPortFrom(testGroup, 5007), make([]byte, 3000))
	// The second time the handler is busy on another goroutine: the
	// datagram, larger than a ring slot, waits in netstack's endpoint and
	// keeps its group.
	for i, busy := range []bool{false, true} {
		release := func() {}
		if busy {
			release = tickwire.HoldUDPHandler(c)
		}
		p.sendFragments(t, testGroup, uint8(header.UDPProtocolNumber), uint16(77+i), dg, 1480, -1)
		release()
		select {
		case m := <-got:
			if want := "3000 bytes on " + testGroup.String(); m != want {
				t.Errorf("busy %v: got %q, want %q", busy, m, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("busy %v: nothing received; stats %+v", busy, p.b.Stats())
		}
	}
}
