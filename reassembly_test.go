package tickwire_test

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// ipv4Fragment builds an IPv4 fragment of datagram id: payload at byte
// offset off (a multiple of 8) of the datagram's payload.
func ipv4Fragment(src, dst netip.Addr, proto uint8, id uint16, off int, more bool, payload []byte) []byte {
	p := make([]byte, header.IPv4MinimumSize+len(payload))
	ip := header.IPv4(p)
	var flags uint8
	if more {
		flags = header.IPv4FlagMoreFragments
	}
	ip.Encode(&header.IPv4Fields{
		TotalLength: uint16(len(p)), ID: id, Flags: flags, FragmentOffset: uint16(off), TTL: 64, Protocol: proto,
		SrcAddr: tcpip.AddrFrom4(src.As4()), DstAddr: tcpip.AddrFrom4(dst.As4()),
	})
	ip.SetChecksum(^ip.CalculateChecksum())
	copy(p[header.IPv4MinimumSize:], payload)
	return p
}

// junkProtocol is the IPv4 protocol of the floods' datagrams, which never
// complete: with a protocol of their own they cannot share a key with a
// UDP datagram the test sends, whatever its ID.
const junkProtocol = 253 // RFC 3692 experimentation

// sendFragments sends the first n fragments (all when n < 0) of datagram,
// an IPv4 payload of protocol proto, from A to dst through B's pipe, cut
// in fragments of size bytes (a multiple of 8), in order.
func (p *pair) sendFragments(t testing.TB, dst netip.Addr, proto uint8, id uint16, datagram []byte, size, n int) {
	t.Helper()
	for off := 0; off < len(datagram) && n != 0; off += size {
		end := min(off+size, len(datagram))
		ip := ipv4Fragment(addrA.Addr(), dst, proto, id, off, end < len(datagram), datagram[off:end])
		if err := p.pa.Send(ethernet(p.pb.MAC(), p.pa.MAC(), uint16(header.IPv4ProtocolNumber), ip)); err != nil {
			t.Fatal(err)
		}
		n--
	}
}

// TestReassemblyBound floods B with incomplete datagrams, 44 fragments of
// 1480 bytes each, never the last: the 64 datagrams would hold 5.2 MiB,
// over netstack's 4 MiB, past which netstack drops datagrams without a
// count. tickwire holds at most 1 MiB, every datagram is either held or
// counted as evicted, and no fragment reaches netstack. A datagram sent
// whole in fragments afterwards is delivered, as is one that A's netstack
// fragments, and fragments not for B are counted.
func TestReassemblyBound(t *testing.T) {
	p := newPair(t, staticARP)
	srv, err := p.b.ListenUDP(4000)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	before := tickwire.NetstackIPv4Received(p.b)
	const datagrams = 64
	junk := randomBytes(45*1480, 1)
	for id := range uint16(datagrams) {
		p.sendFragments(t, addrB.Addr(), junkProtocol, id, junk, 1480, 44)
	}
	st := p.b.Stats()
	held, mem := tickwire.FragHeld(p.b)
	t.Logf("after %d incomplete datagrams: %d held (%d bytes), %d evicted", datagrams, held, mem, st.DropIPv4FragEvicted)
	if mem > tickwire.FragMemory {
		t.Errorf("holding %d bytes, over the bound of %d", mem, tickwire.FragMemory)
	}
	if held+int(st.DropIPv4FragEvicted) != datagrams || held == 0 {
		t.Errorf("%d datagrams held and %d evicted; want %d in all", held, st.DropIPv4FragEvicted, datagrams)
	}
	if got := tickwire.NetstackIPv4Received(p.b); got != before {
		t.Errorf("netstack received %d IPv4 packets during the flood, want 0", got-before)
	}

	// A datagram in 3 fragments: the oldest datagrams make room.
	src := netip.AddrPortFrom(addrA.Addr(), 1234)
	msg := randomBytes(2992, 2)
	p.sendFragments(t, addrB.Addr(), uint8(header.UDPProtocolNumber), 0, udpDatagram(src, addrPort(addrB, 4000), msg), 1480, -1)
	srv.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 8192)
	n, _, err := srv.ReadFrom(buf)
	if err != nil || !bytes.Equal(buf[:n], msg) {
		t.Fatalf("read %d bytes, %v; want the %d sent in fragments", n, err, len(msg))
	}

	// One A's netstack fragments.
	c := dialUDP(t, p, 4000)
	big := randomBytes(4000, 3)
	if _, err := c.Write(big); err != nil {
		t.Fatal(err)
	}
	n, _, err = srv.ReadFrom(buf)
	if err != nil || !bytes.Equal(buf[:n], big) {
		t.Fatalf("read %d bytes, %v; want the %d A's stack sent", n, err, len(big))
	}

	// Fragments for another address are dropped before reassembly.
	p.sendFragments(t, netip.MustParseAddr("10.0.0.3"), uint8(header.UDPProtocolNumber), 1, udpDatagram(src, netip.MustParseAddrPort("10.0.0.3:4000"), msg), 1480, -1)

	st = p.b.Stats()
	if st.IPv4Reassembled != 2 || st.DropIPv4NotForUs != 3 || st.DropIPv4Malformed != 0 || st.DropIPv4FragTimeout != 0 {
		t.Errorf("IPv4Reassembled %d, DropIPv4NotForUs %d, DropIPv4Malformed %d, DropIPv4FragTimeout %d; want 2, 3, 0, 0",
			st.IPv4Reassembled, st.DropIPv4NotForUs, st.DropIPv4Malformed, st.DropIPv4FragTimeout)
	}
	if held, mem := tickwire.FragHeld(p.b); mem > tickwire.FragMemory || held+int(st.DropIPv4FragEvicted) != datagrams {
		t.Errorf("%d datagrams held (%d bytes) and %d evicted; want %d in all", held, mem, st.DropIPv4FragEvicted, datagrams)
	}
}

// TestReassemblyOverlap sends a datagram whose second fragment overlaps
// its first: the fragment is counted as malformed and the datagram
// discarded, as netstack and Linux do; the same datagram sent again
// cleanly arrives.
func TestReassemblyOverlap(t *testing.T) {
	p := newPair(t, staticARP)
	srv, err := p.b.ListenUDP(4000)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	src := netip.AddrPortFrom(addrA.Addr(), 1234)
	msg := randomBytes(2992, 4)
	d := udpDatagram(src, addrPort(addrB, 4000), msg)
	send := func(off int, more bool, payload []byte) {
		ip := ipv4Fragment(addrA.Addr(), addrB.Addr(), uint8(header.UDPProtocolNumber), 7, off, more, payload)
		if err := p.pa.Send(ethernet(p.pb.MAC(), p.pa.MAC(), uint16(header.IPv4ProtocolNumber), ip)); err != nil {
			t.Fatal(err)
		}
	}
	send(0, true, d[:1480])
	send(1472, true, d[1472:2952])
	send(2960, false, d[2960:])
	if st := p.b.Stats(); st.DropIPv4Malformed != 1 || st.IPv4Reassembled != 0 {
		t.Fatalf("DropIPv4Malformed %d, IPv4Reassembled %d; want 1, 0", st.DropIPv4Malformed, st.IPv4Reassembled)
	}
	if held, _ := tickwire.FragHeld(p.b); held != 1 { // the last fragment, anew
		t.Errorf("held %d datagrams, want 1", held)
	}
	send(0, true, d[:1480])
	send(1480, true, d[1480:2960])
	srv.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	n, _, err := srv.ReadFrom(buf)
	if err != nil || !bytes.Equal(buf[:n], msg) {
		t.Fatalf("read %d bytes, %v; want the %d sent", n, err, len(msg))
	}
}
