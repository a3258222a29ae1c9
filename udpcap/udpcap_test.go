package udpcap_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket/layers"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/pcap"
	"github.com/tickwire/tickwire/udpcap"
)

func sum16(b []byte, s uint32) uint32 {
	for len(b) >= 2 {
		s += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}

func fold(s uint32) uint16 {
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// ipUDP builds an IPv4/UDP packet with correct checksums.
func ipUDP(src, dst netip.AddrPort, payload []byte) []byte {
	p := make([]byte, 28+len(payload))
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	p[8] = 1
	p[9] = 17
	s4, d4 := src.Addr().As4(), dst.Addr().As4()
	copy(p[12:], s4[:])
	copy(p[16:], d4[:])
	binary.BigEndian.PutUint16(p[10:], fold(sum16(p[:20], 0)))
	u := p[20:]
	binary.BigEndian.PutUint16(u[0:], src.Port())
	binary.BigEndian.PutUint16(u[2:], dst.Port())
	binary.BigEndian.PutUint16(u[4:], uint16(len(u)))
	copy(u[8:], payload)
	c := fold(sum16(u, sum16(p[12:20], 17+uint32(len(u)))))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(u[6:], c)
	return p
}

func eth(etherType uint16, payload []byte) []byte {
	f := make([]byte, 14, 14+len(payload))
	copy(f, []byte{0x01, 0x00, 0x5e, 1, 1, 1, 2, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(f[12:], etherType)
	return append(f, payload...)
}

var (
	src    = netip.MustParseAddrPort("10.0.0.1:4000")
	srcB   = netip.MustParseAddrPort("10.0.0.2:4000")
	groupA = netip.MustParseAddrPort("239.1.1.1:5000")
	groupB = netip.MustParseAddrPort("239.1.1.2:5000")
)

func TestDecodeLinkTypes(t *testing.T) {
	pkt := ipUDP(src, groupA, []byte("hello"))
	vlan := append([]byte{0, 5, 0x08, 0x00}, pkt...)
	sll := append(make([]byte, 14), 0x08, 0x00)
	sll2 := append([]byte{0x08, 0x00}, make([]byte, 18)...)
	padded := append(eth(0x0800, pkt), make([]byte, 20)...)
	for _, c := range []struct {
		name string
		lt   uint16
		data []byte
	}{
		{"ethernet", frame.LinkTypeEthernet, eth(0x0800, pkt)},
		{"ethernet lt 0", 0, eth(0x0800, pkt)},
		{"padded", frame.LinkTypeEthernet, padded},
		{"vlan", frame.LinkTypeEthernet, eth(0x8100, vlan)},
		{"qinq outer", frame.LinkTypeEthernet, eth(0x88a8, vlan)},
		{"sll", frame.LinkTypeLinuxSLL, append(sll, pkt...)},
		{"sll2", frame.LinkTypeLinuxSLL2, append(sll2, pkt...)},
		{"raw", frame.LinkTypeRaw, pkt},
		{"ipv4", frame.LinkTypeIPv4, pkt},
	} {
		d, _ := udpcap.New(udpcap.Config{Checksums: true, Streams: []udpcap.Stream{{Group: groupA.Addr(), Port: groupA.Port()}}})
		dg, ok := d.Decode(c.lt, c.data, 42)
		if !ok || string(dg.Payload) != "hello" || dg.Src != src || dg.Dst != groupA || dg.Time != 42 || dg.Stream != 0 {
			t.Errorf("%s: %v %+v, stats %+v", c.name, ok, dg, d.Stats())
		}
	}
}

func TestDecodeSkips(t *testing.T) {
	pkt := ipUDP(src, groupA, []byte("hello"))
	frag := bytes.Clone(pkt)
	frag[6] = 0x20 // MF
	tcp := bytes.Clone(pkt)
	tcp[9] = 6
	badSum := bytes.Clone(pkt)
	badSum[len(badSum)-1] ^= 1
	badLen := bytes.Clone(pkt)
	binary.BigEndian.PutUint16(badLen[24:], 100)
	for _, c := range []struct {
		name string
		lt   uint16
		data []byte
		want udpcap.Stats
	}{
		{"fragment", 1, eth(0x0800, frag), udpcap.Stats{Fragments: 1}},
		{"tcp", 1, eth(0x0800, tcp), udpcap.Stats{NotUDP: 1}},
		{"arp", 1, eth(0x0806, make([]byte, 28)), udpcap.Stats{NotIPv4: 1}},
		{"two tags", 1, eth(0x8100, append([]byte{0, 1, 0x81, 0}, make([]byte, 30)...)), udpcap.Stats{NotIPv4: 1}},
		{"truncated", 1, eth(0x0800, pkt)[:40], udpcap.Stats{Truncated: 1}},
		{"short", 1, []byte{1, 2, 3}, udpcap.Stats{Truncated: 1}},
		{"bad checksum", 1, eth(0x0800, badSum), udpcap.Stats{BadChecksum: 1}},
		{"bad udp length", 1, eth(0x0800, badLen), udpcap.Stats{Malformed: 1}},
		{"unmatched", 1, eth(0x0800, ipUDP(src, groupB, nil)), udpcap.Stats{Unmatched: 1}},
		{"source", 1, eth(0x0800, ipUDP(srcB, groupA, nil)), udpcap.Stats{Unmatched: 1}},
		{"link type", 105, pkt, udpcap.Stats{LinkType: 1}},
		{"raw ipv6", 101, append([]byte{0x60}, pkt[1:]...), udpcap.Stats{NotIPv4: 1}},
	} {
		d, _ := udpcap.New(udpcap.Config{Checksums: true, Streams: []udpcap.Stream{{Group: groupA.Addr(), Port: groupA.Port(), Source: src.Addr()}}})
		if _, ok := d.Decode(c.lt, c.data, 0); ok {
			t.Errorf("%s: decoded", c.name)
		}
		c.want.Frames = 1
		if got := d.Stats(); got != c.want {
			t.Errorf("%s: stats %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestStreamsBySource(t *testing.T) {
	d, err := udpcap.New(udpcap.Config{Streams: []udpcap.Stream{
		{Group: groupA.Addr(), Port: groupA.Port(), Source: srcB.Addr()},
		{Group: groupA.Addr(), Port: groupA.Port(), Source: src.Addr()},
		{Group: groupB.Addr(), Port: groupB.Port()},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		src, dst netip.AddrPort
		want     int
	}{{src, groupA, 1}, {srcB, groupA, 0}, {src, groupB, 2}, {srcB, groupB, 2}} {
		dg, ok := d.Decode(1, eth(0x0800, ipUDP(c.src, c.dst, nil)), 0)
		if !ok || dg.Stream != c.want {
			t.Errorf("%v -> %v: stream %d (%v), want %d", c.src, c.dst, dg.Stream, ok, c.want)
		}
	}
	if _, err := udpcap.New(udpcap.Config{Streams: []udpcap.Stream{{Group: netip.MustParseAddr("ff02::1")}}}); err == nil {
		t.Error("IPv6 stream accepted")
	}
	if _, err := udpcap.New(udpcap.Config{Streams: make([]udpcap.Stream, udpcap.MaxStreams+1)}); err == nil {
		t.Error("too many streams accepted")
	}
}

func TestRunPcap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "feed.pcap")
	w, err := pcap.NewWriter(mustCreate(t, path), layers.LinkTypeEthernet, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.WriteFrame(1000, eth(0x0800, ipUDP(src, groupA, []byte("a1"))), 0)
	w.WriteFrame(2000, eth(0x0806, make([]byte, 28)), 0)
	w.WriteFrame(3000, eth(0x0800, ipUDP(src, groupB, []byte("b1"))), 0)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := pcap.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	d, _ := udpcap.New(udpcap.Config{})
	var got []string
	var times []int64
	if err := d.Run(r, frame.NewBatch(2, 2048), func(dg *udpcap.Datagram) {
		got = append(got, string(dg.Payload)+"@"+dg.Dst.String())
		times = append(times, dg.Time)
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "a1@239.1.1.1:5000" || got[1] != "b1@239.1.1.2:5000" || times[1] != 3000 {
		t.Errorf("got %q at %v", got, times)
	}
	if st := d.Stats(); st.Frames != 3 || st.NotIPv4 != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestDecodeAllocs(t *testing.T) {
	d, _ := udpcap.New(udpcap.Config{Checksums: true, Streams: []udpcap.Stream{{Group: groupA.Addr(), Port: groupA.Port()}}})
	f := eth(0x0800, ipUDP(src, groupA, []byte("hello")))
	if n := testing.AllocsPerRun(1000, func() { d.Decode(1, f, 0) }); n != 0 {
		t.Errorf("%v allocations per frame", n)
	}
}

func FuzzDecode(f *testing.F) {
	pkt := ipUDP(src, groupA, []byte("hello"))
	f.Add(uint16(1), eth(0x0800, pkt))
	f.Add(uint16(1), eth(0x8100, append([]byte{0, 5, 0x08, 0x00}, pkt...)))
	f.Add(uint16(113), append(append(make([]byte, 14), 0x08, 0x00), pkt...))
	f.Add(uint16(101), pkt)
	f.Fuzz(func(t *testing.T, lt uint16, data []byte) {
		d, _ := udpcap.New(udpcap.Config{Checksums: lt%2 == 0})
		dg, ok := d.Decode(lt, data, 1)
		st := d.Stats()
		other := st.Unmatched + st.NotUDP + st.NotIPv4 + st.Fragments + st.Truncated + st.Malformed + st.BadChecksum + st.LinkType
		if st.Frames != 1 || st.Datagrams+other != 1 || ok != (st.Datagrams == 1) {
			t.Fatalf("stats %+v, ok %v", st, ok)
		}
		if ok && len(dg.Payload) > 0 {
			// The payload must alias the frame's bytes.
			end := &dg.Payload[len(dg.Payload)-1]
			found := false
			for i := range data {
				if &data[i] == end {
					found = true
				}
			}
			if !found {
				t.Fatal("payload does not alias the frame")
			}
		}
	})
}
