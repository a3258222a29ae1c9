package nicsim

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// msVector is one IPv4 row of Microsoft's verification table.
type msVector struct {
	dst, src         string
	dstPort, srcPort uint16
	ipv4, ipv4TCP    uint32
}

// msVectors is the IPv4 table of "Verifying the RSS Hash Calculation",
// https://learn.microsoft.com/windows-hardware/drivers/network/verifying-the-rss-hash-calculation
// (source: github.com/MicrosoftDocs/windows-driver-docs,
// windows-driver-docs-pr/network/verifying-the-rss-hash-calculation.md),
// under the key that is DefaultRSSKey. The columns are, as on the page,
// destination address:port, source address:port, the "IPv4 only" hash and
// the "IPv4 with TCP" hash.
var msVectors = []msVector{
	{"161.142.100.80", "66.9.149.187", 1766, 2794, 0x323e8fc2, 0x51ccc178},
	{"65.69.140.83", "199.92.111.2", 4739, 14230, 0xd718262a, 0xc626b0ea},
	{"12.22.207.184", "24.19.198.95", 38024, 12898, 0xd2d0a5de, 0x5c2b394a},
	{"209.142.163.6", "38.27.205.30", 2217, 48228, 0x82989176, 0xafc7327f},
	{"202.188.127.2", "153.39.163.191", 1303, 44251, 0x5d1809c5, 0x10e828a2},
}

// tuple returns Microsoft's 12-byte input: source address, destination
// address, source port, destination port.
func (v msVector) tuple() []byte {
	b := netip.MustParseAddr(v.src).As4()
	in := append([]byte(nil), b[:]...)
	b = netip.MustParseAddr(v.dst).As4()
	in = append(in, b[:]...)
	in = binary.BigEndian.AppendUint16(in, v.srcPort)
	return binary.BigEndian.AppendUint16(in, v.dstPort)
}

// slowToeplitz is the pseudocode of Microsoft's "RSS hashing functions"
// page, word for word: keep the key as a bit string, XOR its leftmost 32
// bits into the result for every set input bit, shift it left one bit per
// input bit. It is the reference the table-driven code is checked against.
func slowToeplitz(key, input []byte) uint32 {
	k := append([]byte(nil), key...)
	for len(k) < len(input)+4 {
		k = append(k, 0)
	}
	var h uint32
	for _, b := range input {
		for j := 7; j >= 0; j-- {
			if b>>j&1 == 1 {
				h ^= binary.BigEndian.Uint32(k)
			}
			// Shift k left by one bit.
			for i := range k {
				k[i] <<= 1
				if i+1 < len(k) {
					k[i] |= k[i+1] >> 7
				}
			}
		}
	}
	return h
}

func TestToeplitzMicrosoftVectors(t *testing.T) {
	for _, v := range msVectors {
		in := v.tuple()
		if got := Toeplitz(DefaultRSSKey[:], in[:8]); got != v.ipv4 {
			t.Errorf("%s -> %s IPv4 only: Toeplitz = %#08x, want %#08x", v.src, v.dst, got, v.ipv4)
		}
		if got := Toeplitz(DefaultRSSKey[:], in); got != v.ipv4TCP {
			t.Errorf("%s:%d -> %s:%d IPv4 with TCP: Toeplitz = %#08x, want %#08x",
				v.src, v.srcPort, v.dst, v.dstPort, got, v.ipv4TCP)
		}
		if got := slowToeplitz(DefaultRSSKey[:], in); got != v.ipv4TCP {
			t.Errorf("slowToeplitz(%s:%d -> %s:%d) = %#08x, want %#08x",
				v.src, v.srcPort, v.dst, v.dstPort, got, v.ipv4TCP)
		}
	}
}

func TestToeplitzMatchesReference(t *testing.T) {
	key := DefaultRSSKey[:]
	in := make([]byte, 36)
	for i := range in {
		in[i] = byte(i*37 + 11)
	}
	for n := 0; n <= len(in); n++ {
		if got, want := Toeplitz(key, in[:n]), slowToeplitz(key, in[:n]); got != want {
			t.Errorf("Toeplitz over %d bytes = %#08x, reference %#08x", n, got, want)
		}
	}
	// A short key is zero-extended.
	if got, want := Toeplitz(key[:6], in[:12]), slowToeplitz(key[:6], in[:12]); got != want {
		t.Errorf("Toeplitz with a 6-byte key = %#08x, reference %#08x", got, want)
	}
	if got := Toeplitz(nil, in); got != 0 {
		t.Errorf("Toeplitz with no key = %#08x, want 0", got)
	}
}

// frameSpec describes a test frame for buildFrame.
type frameSpec struct {
	vlan     bool   // one 802.1Q tag
	etype    uint16 // EtherType after the tag; 0 means IPv4
	proto    byte
	src, dst string
	sport    uint16
	dport    uint16
	options  int    // IPv4 option bytes, a multiple of 4
	frag     uint16 // flags and fragment offset word
	l4       int    // transport bytes in the frame; 0 means a full header
	version  byte   // 0 means 4
	ihl      int    // 0 means computed from options
	trimTail int    // bytes to cut from the end
}

// buildFrame builds an Ethernet II frame from s.
func buildFrame(s frameSpec) []byte {
	f := []byte{0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2}
	if s.vlan {
		f = append(f, 0x81, 0x00, 0x00, 0x05)
	}
	etype := s.etype
	if etype == 0 {
		etype = etherTypeIPv4
	}
	f = binary.BigEndian.AppendUint16(f, etype)
	version, ihl := s.version, s.ihl
	if version == 0 {
		version = 4
	}
	if ihl == 0 {
		ihl = (20 + s.options) / 4
	}
	l4 := s.l4
	if l4 == 0 {
		l4 = 20
		if s.proto == protoUDP {
			l4 = 8
		}
	}
	ip := make([]byte, 20+s.options)
	ip[0] = version<<4 | byte(ihl&0x0f)
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)+l4))
	binary.BigEndian.PutUint16(ip[6:], s.frag)
	ip[8] = 64
	ip[9] = s.proto
	if s.src == "" {
		s.src = "10.0.0.1"
	}
	if s.dst == "" {
		s.dst = "10.0.0.2"
	}
	src, dst := netip.MustParseAddr(s.src).As4(), netip.MustParseAddr(s.dst).As4()
	copy(ip[12:], src[:])
	copy(ip[16:], dst[:])
	for i := 20; i < len(ip); i++ {
		ip[i] = 0x01 // NOP options
	}
	f = append(f, ip...)
	tp := make([]byte, l4)
	if l4 >= 4 {
		binary.BigEndian.PutUint16(tp, s.sport)
		binary.BigEndian.PutUint16(tp[2:], s.dport)
	}
	f = append(f, tp...)
	return f[:len(f)-s.trimTail]
}

func mustRSS(t testing.TB, c RSSConfig) *RSS {
	t.Helper()
	r, err := NewRSS(c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestClassifyMicrosoftVectors(t *testing.T) {
	r := mustRSS(t, RSSConfig{Key: DefaultRSSKey, Queues: 4})
	for _, v := range msVectors {
		for _, vlan := range []bool{false, true} {
			f := buildFrame(frameSpec{vlan: vlan, proto: protoTCP, src: v.src, dst: v.dst, sport: v.srcPort, dport: v.dstPort})
			h, typ, q := r.Classify(f)
			if h != v.ipv4TCP || typ != HashTypeIPv4|HashTypeTCP || q != int(v.ipv4TCP%4) {
				t.Errorf("TCP %s:%d -> %s:%d vlan=%v: Classify = %#08x, %#x, %d; want %#08x, %#x, %d",
					v.src, v.srcPort, v.dst, v.dstPort, vlan, h, typ, q, v.ipv4TCP, HashTypeIPv4|HashTypeTCP, v.ipv4TCP%4)
			}
			// UDP hashes the same 12 bytes as TCP.
			f = buildFrame(frameSpec{vlan: vlan, proto: protoUDP, src: v.src, dst: v.dst, sport: v.srcPort, dport: v.dstPort})
			if h, typ, _ := r.Classify(f); h != v.ipv4TCP || typ != HashTypeIPv4|HashTypeUDP {
				t.Errorf("UDP %s:%d -> %s:%d: Classify = %#08x, %#x; want %#08x, %#x",
					v.src, v.srcPort, v.dst, v.dstPort, h, typ, v.ipv4TCP, HashTypeIPv4|HashTypeUDP)
			}
			// ICMP has no ports: addresses only.
			f = buildFrame(frameSpec{vlan: vlan, proto: 1, src: v.src, dst: v.dst})
			if h, typ, q := r.Classify(f); h != v.ipv4 || typ != HashTypeIPv4 || q != int(v.ipv4%4) {
				t.Errorf("ICMP %s -> %s: Classify = %#08x, %#x, %d; want %#08x, %#x, %d",
					v.src, v.dst, h, typ, q, v.ipv4, HashTypeIPv4, v.ipv4%4)
			}
		}
	}
}

func TestClassify(t *testing.T) {
	const src, dst = "66.9.149.187", "161.142.100.80"
	v := msVectors[0]
	tcp := HashTypeIPv4 | HashTypeTCP
	tests := []struct {
		name     string
		frame    []byte
		hash     uint32
		hashType uint32
	}{
		{"tcp", buildFrame(frameSpec{proto: protoTCP, src: src, dst: dst, sport: 2794, dport: 1766}), v.ipv4TCP, uint32(tcp)},
		{"tcp with options", buildFrame(frameSpec{proto: protoTCP, src: src, dst: dst, sport: 2794, dport: 1766, options: 8}), v.ipv4TCP, uint32(tcp)},
		{"tcp with 40 option bytes", buildFrame(frameSpec{proto: protoTCP, src: src, dst: dst, sport: 2794, dport: 1766, options: 40}), v.ipv4TCP, uint32(tcp)},
		{"tcp ports only", buildFrame(frameSpec{proto: protoTCP, src: src, dst: dst, sport: 2794, dport: 1766, l4: 4}), v.ipv4TCP, uint32(tcp)},
		{"tcp ports cut", buildFrame(frameSpec{proto: protoTCP, src: src, dst: dst, sport: 2794, dport: 1766, l4: 3}), v.ipv4, HashTypeIPv4},
		{"first fragment", buildFrame(frameSpec{proto: protoUDP, src: src, dst: dst, sport: 2794, dport: 1766, frag: 0x2000}), v.ipv4, HashTypeIPv4},
		{"later fragment", buildFrame(frameSpec{proto: protoUDP, src: src, dst: dst, sport: 2794, dport: 1766, frag: 0x00b9}), v.ipv4, HashTypeIPv4},
		{"don't fragment", buildFrame(frameSpec{proto: protoUDP, src: src, dst: dst, sport: 2794, dport: 1766, frag: 0x4000}), v.ipv4TCP, HashTypeIPv4 | HashTypeUDP},
		{"sctp", buildFrame(frameSpec{proto: 132, src: src, dst: dst, sport: 2794, dport: 1766}), v.ipv4, HashTypeIPv4},
		{"ipv4 header only", buildFrame(frameSpec{proto: protoTCP, src: src, dst: dst, l4: 1, trimTail: 1}), v.ipv4, HashTypeIPv4},
		{"ipv4 header cut", buildFrame(frameSpec{proto: protoTCP, src: src, dst: dst, l4: 1, trimTail: 2}), 0, 0},
		{"options cut", buildFrame(frameSpec{proto: protoTCP, src: src, dst: dst, options: 8, l4: 1, trimTail: 5}), 0, 0},
		{"ihl 4", buildFrame(frameSpec{proto: protoTCP, src: src, dst: dst, ihl: 4}), 0, 0},
		{"version 6 in an IPv4 EtherType", buildFrame(frameSpec{proto: protoTCP, src: src, dst: dst, version: 6}), 0, 0},
		{"arp", buildFrame(frameSpec{etype: 0x0806, proto: protoTCP, src: src, dst: dst}), 0, 0},
		{"ipv6", buildFrame(frameSpec{etype: 0x86dd, proto: protoTCP, src: src, dst: dst}), 0, 0},
		{"two vlan tags", append(buildFrame(frameSpec{vlan: true, etype: etherTypeVLAN})[:18:18], buildFrame(frameSpec{proto: protoTCP, src: src, dst: dst, sport: 2794, dport: 1766})[12:]...), 0, 0},
		{"qinq", buildFrame(frameSpec{etype: 0x88a8, proto: protoTCP, src: src, dst: dst}), 0, 0},
		{"vlan tag cut", buildFrame(frameSpec{vlan: true})[:17], 0, 0},
		{"ethernet header cut", make([]byte, 13), 0, 0},
		{"empty", nil, 0, 0},
	}
	r := mustRSS(t, RSSConfig{Queues: 3, Table: []uint16{2, 1, 0, 1}})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, typ, q := r.Classify(tt.frame)
			wantQ := 0
			if tt.hashType != 0 {
				wantQ = int([]uint16{2, 1, 0, 1}[tt.hash&3])
			}
			if h != tt.hash || typ != tt.hashType || q != wantQ {
				t.Errorf("Classify = %#08x, %#x, %d; want %#08x, %#x, %d", h, typ, q, tt.hash, tt.hashType, wantQ)
			}
		})
	}
}

func TestClassifyUnhashedGoesToQueue0(t *testing.T) {
	// Table[0] is 1, yet an ARP frame (hash 0) goes to queue 0.
	r := mustRSS(t, RSSConfig{Queues: 2, Table: []uint16{1, 0}})
	arp := buildFrame(frameSpec{etype: 0x0806, src: "10.0.0.1", dst: "10.0.0.2"})
	if h, typ, q := r.Classify(arp); h != 0 || typ != 0 || q != 0 {
		t.Errorf("Classify(ARP) = %#x, %#x, %d; want 0, 0, 0", h, typ, q)
	}
}

// TestClassifySpreadsFlows checks that the default table spreads random
// TCP flows evenly, and keeps each flow on one queue whatever its payload,
// VLAN tag or IPv4 options.
func TestClassifySpreadsFlows(t *testing.T) {
	const queues, flows = 4, 20000
	r := mustRSS(t, RSSConfig{Queues: queues})
	rng := rand.New(rand.NewPCG(7, 8))
	var count [queues]int
	for range flows {
		var a, b [4]byte
		binary.BigEndian.PutUint32(a[:], rng.Uint32())
		binary.BigEndian.PutUint32(b[:], rng.Uint32())
		s := frameSpec{proto: protoTCP, src: netip.AddrFrom4(a).String(), dst: netip.AddrFrom4(b).String(),
			sport: uint16(rng.Uint32()), dport: uint16(rng.Uint32()), l4: 20 + rng.IntN(100)}
		_, _, q := r.Classify(buildFrame(s))
		count[q]++
		s.vlan, s.options = true, 4*rng.IntN(11)
		if _, _, q2 := r.Classify(buildFrame(s)); q2 != q {
			t.Fatalf("flow %+v: queue %d, but %d with a VLAN tag and options", s, q, q2)
		}
	}
	for q, n := range count {
		if share := float64(n) / flows; share < 0.23 || share > 0.27 {
			t.Errorf("queue %d got %.1f%% of %d flows, want 25%% +- 2", q, 100*share, flows)
		}
	}
}

func TestNewRSSDefaults(t *testing.T) {
	r := mustRSS(t, RSSConfig{Queues: 3})
	if r.Key() != DefaultRSSKey {
		t.Errorf("Key() = %x, want DefaultRSSKey", r.Key())
	}
	tab := r.Table()
	if len(tab) != DefaultRSSTableSize {
		t.Fatalf("len(Table()) = %d, want %d", len(tab), DefaultRSSTableSize)
	}
	for i, q := range tab {
		if int(q) != i%3 {
			t.Fatalf("Table()[%d] = %d, want %d", i, q, i%3)
		}
	}
	// Table returns a copy, and NewRSS copied its input.
	tab[0] = 2
	in := []uint16{0, 1}
	r2 := mustRSS(t, RSSConfig{Queues: 2, Table: in})
	in[0] = 1
	if r.Table()[0] != 0 || r2.Table()[0] != 0 {
		t.Error("the indirection table is shared with the caller")
	}
	var key [RSSKeySize]byte
	key[0] = 0x80
	if r3 := mustRSS(t, RSSConfig{Queues: 1, Key: key}); r3.Key() != key {
		t.Errorf("Key() = %x, want %x", r3.Key(), key)
	}
}

func TestNewRSSErrors(t *testing.T) {
	tests := []struct {
		name string
		c    RSSConfig
	}{
		{"no queues", RSSConfig{}},
		{"negative queues", RSSConfig{Queues: -1}},
		{"too many queues", RSSConfig{Queues: 1<<16 + 1}},
		{"empty table", RSSConfig{Queues: 1, Table: []uint16{}}},
		{"table of 3", RSSConfig{Queues: 4, Table: []uint16{0, 1, 2}}},
		{"table too long", RSSConfig{Queues: 4, Table: make([]uint16, 2*MaxRSSTableSize)}},
		{"entry out of range", RSSConfig{Queues: 2, Table: []uint16{0, 1, 2, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewRSS(tt.c)
			if !errors.Is(err, ErrRSSConfig) || r != nil {
				t.Fatalf("NewRSS = %v, %v; want nil and an ErrRSSConfig", r, err)
			}
			t.Log(err)
		})
	}
	if _, err := NewRSS(RSSConfig{Queues: 1 << 16, Table: make([]uint16, MaxRSSTableSize)}); err != nil {
		t.Errorf("NewRSS with the largest table and queue count: %v", err)
	}
}

func TestClassifyDoesNotAllocate(t *testing.T) {
	r := mustRSS(t, RSSConfig{Queues: 4})
	frames := [][]byte{
		buildFrame(frameSpec{proto: protoTCP, src: "10.0.0.1", dst: "10.0.0.2", sport: 1, dport: 2}),
		buildFrame(frameSpec{vlan: true, proto: protoUDP, src: "10.0.0.1", dst: "10.0.0.2", sport: 1, dport: 2}),
		buildFrame(frameSpec{etype: 0x0806}),
	}
	var sink uint32
	allocs := testing.AllocsPerRun(1000, func() {
		for _, f := range frames {
			h, typ, q := r.Classify(f)
			sink += h + typ + uint32(q)
		}
	})
	if allocs != 0 {
		t.Errorf("Classify allocates %v times per 3 frames, want 0", allocs)
	}
	_ = sink
}

func BenchmarkClassify(b *testing.B) {
	r := mustRSS(b, RSSConfig{Queues: 4})
	for _, bb := range []struct {
		name  string
		frame []byte
	}{
		{"tcp", buildFrame(frameSpec{proto: protoTCP, src: "10.0.0.1", dst: "10.0.0.2", sport: 40000, dport: 443})},
		{"vlan-udp", buildFrame(frameSpec{vlan: true, proto: protoUDP, src: "10.0.0.1", dst: "10.0.0.2", sport: 40000, dport: 443})},
		{"icmp", buildFrame(frameSpec{proto: 1, src: "10.0.0.1", dst: "10.0.0.2"})},
		{"arp", buildFrame(frameSpec{etype: 0x0806})},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			var sink int
			for b.Loop() {
				_, _, q := r.Classify(bb.frame)
				sink += q
			}
			_ = sink
		})
	}
}

func BenchmarkToeplitz12(b *testing.B) {
	in := msVectors[0].tuple()
	b.ReportAllocs()
	var sink uint32
	for b.Loop() {
		sink += Toeplitz(DefaultRSSKey[:], in)
	}
	_ = sink
}
