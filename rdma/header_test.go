package rdma

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A congestion notification packet captured on a ConnectX-4 Lx, with its
// ICRC as the NIC computed it (scapy's test/contrib/roce.uts carries it):
// IPv4 identification 0x718c, TOS 0xc2, BECN set.
const cx4CNP = `e41d 2dab 2bc2 7cfe 9064 3b32 0800 45c2
003c 718c 4000 4011 9161 0a00 1101 0a00
1201 0000 12b7 0028 0000 8100 ffff 4000
0118 0000 0000 0000 0000 0000 0000 0000
0000 0000 0000 82fd 002a`

// An unreliable-connection SEND_ONLY with 2 pad bytes, whose ICRC scapy's
// RoCE layer computes as 0x78f353f3 (read big-endian from the wire).
const scapyUCSend = `4501 0040 0478 4000 4011 0000 c0a8 0007 c0a8 0007
c000 12b7 002c 0000
2460 ffff 0000 00d3 00cf 1710
4630 818b e289 35d9 0e9a 9550 5401 be88 5e50 0000
78f3 53f3`

func TestICRCKnownPackets(t *testing.T) {
	for _, c := range []struct {
		name string
		ip   []byte
	}{
		{"ConnectX-4 CNP", unhex(t, cx4CNP)[14:]},
		{"scapy UC SEND_ONLY", unhex(t, scapyUCSend)},
	} {
		ip := c.ip
		udp := ip[20 : len(ip)-ICRCSize]
		want := ip[len(ip)-ICRCSize:]
		var got [4]byte
		binary.LittleEndian.PutUint32(got[:], ICRC(ip[:20], udp))
		if !bytes.Equal(got[:], want) {
			t.Errorf("%s: ICRC on the wire % x, want % x", c.name, got, want)
		}
		// The variant fields do not count.
		v := bytes.Clone(ip)
		v[1] ^= 0x3c
		v[8]--
		v[10], v[11], v[26], v[27] = 1, 2, 3, 4
		v[28+BTHResv8aOffset] ^= 0xc0
		if ICRC(v[:20], v[20:len(v)-4]) != ICRC(ip[:20], udp) {
			t.Errorf("%s: ICRC changed with a variant field", c.name)
		}
		// Every invariant byte does.
		for i := range len(ip) - ICRCSize {
			switch i {
			case 1, 8, 10, 11, 26, 27, 28 + BTHResv8aOffset:
				continue
			}
			v := bytes.Clone(ip)
			v[i] ^= 0x01
			if ICRC(v[:20], v[20:len(v)-4]) == ICRC(ip[:20], udp) {
				t.Errorf("%s: ICRC unchanged when byte %d changes", c.name, i)
			}
		}
	}
}

func TestICRCReconstructed(t *testing.T) {
	// icrcFor rebuilds the IPv4 and UDP headers; with identification 0
	// and DF it must agree with ICRC over the real headers.
	ip := unhex(t, scapyUCSend)
	binary.BigEndian.PutUint16(ip[4:], 0)
	src := netip.MustParseAddrPort("192.168.0.7:49152")
	dst := netip.MustParseAddrPort("192.168.0.7:4791")
	transport := ip[28 : len(ip)-4]
	if got, want := icrcFor(new([icrcScratch]byte), src, dst, transport), ICRC(ip[:20], ip[20:len(ip)-4]); got != want {
		t.Fatalf("icrcFor = %#x, ICRC = %#x", got, want)
	}
}

func TestParse(t *testing.T) {
	b := make([]byte, BTHSize+RETHSize+ImmSize+8+ICRCSize)
	BTH(b).Encode(&BTHFields{Opcode: OpWriteOnlyImm, PadCount: 3, PKey: DefaultPKey, DestQP: 0xabcdef, AckReq: true, PSN: 0x123456})
	RETH(b[BTHSize:]).Encode(0x1122334455667788, 0xdeadbeef, 5)
	binary.BigEndian.PutUint32(b[BTHSize+RETHSize:], 0xcafef00d)
	copy(b[BTHSize+RETHSize+ImmSize:], "hello\x00\x00\x00")
	binary.LittleEndian.PutUint32(b[len(b)-4:], 0x01020304)
	var p Packet
	if err := Parse(b, &p); err != nil {
		t.Fatal(err)
	}
	if p.BTH.Opcode() != OpWriteOnlyImm || !p.BTH.AckReq() || p.BTH.DestQP() != 0xabcdef || p.BTH.PSN() != 0x123456 ||
		p.BTH.PKey() != 0xffff || p.BTH.PadCount() != 3 || p.BTH.SolicitedEvent() || p.BTH.MigReq() || p.BTH.FECN() || p.BTH.BECN() {
		t.Errorf("BTH fields wrong: % x", []byte(p.BTH))
	}
	if p.RETH.VA() != 0x1122334455667788 || p.RETH.RKey() != 0xdeadbeef || p.RETH.DMALength() != 5 {
		t.Errorf("RETH fields wrong: % x", []byte(p.RETH))
	}
	if binary.BigEndian.Uint32(p.Imm) != 0xcafef00d || string(p.Payload) != "hello" || p.ICRC != 0x01020304 || p.AETH != nil {
		t.Errorf("imm %x payload %q icrc %#x", p.Imm, p.Payload, p.ICRC)
	}
	for _, c := range []struct {
		name string
		b    []byte
		err  error
	}{
		{"empty", nil, ErrShort},
		{"bth only", b[:BTHSize], ErrShort},
		{"cut reth", b[:BTHSize+8], ErrShort},
		{"unknown opcode", append([]byte{0x24}, b[1:]...), ErrOpcode},
		{"version", append([]byte{b[0], b[1] | 1}, b[2:]...), ErrVersion},
		{"unaligned", b[:len(b)-1], ErrPadding},
	} {
		if err := Parse(c.b, &p); err != c.err {
			t.Errorf("%s: Parse = %v, want %v", c.name, err, c.err)
		}
	}
	ack := make([]byte, BTHSize+AETHSize+ICRCSize)
	BTH(ack).Encode(&BTHFields{Opcode: OpAcknowledge, PSN: 7})
	AETH(ack[BTHSize:]).Encode(SyndromeNAK|NAKRemoteAccessError, 0x10203)
	if err := Parse(ack, &p); err != nil || p.AETH.Syndrome() != 0x62 || p.AETH.MSN() != 0x10203 || p.Payload != nil {
		t.Errorf("ACK: %v %+v", err, p)
	}
	if err := Parse(append(ack[:BTHSize+AETHSize:BTHSize+AETHSize], 0, 0, 0, 0, 0, 0, 0, 0), &p); err != ErrPayloadLen {
		t.Errorf("ACK with payload: %v", err)
	}
	if s := OpReadResponseMid.String(); s != "RC_READ_RESPONSE_MIDDLE" {
		t.Errorf("String = %q", s)
	}
}
