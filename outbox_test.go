package tickwire

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/tickwire/tickwire/link/pipe"
)

// segSpec describes an outbound TCP segment for the outbox tests.
type segSpec struct {
	flags   header.TCPFlags
	ack     uint32
	wnd     uint16
	payload int
	sack    bool   // carry a SACK block (8 bytes of options, padded to 12)
	port    uint16 // source port; 0 means 1000
}

// flagLetters names TCP flags compactly: "A", "PA", "FA", "R".
func flagLetters(f header.TCPFlags) string {
	var b []byte
	for _, x := range []struct {
		flag   header.TCPFlags
		letter byte
	}{{header.TCPFlagSyn, 'S'}, {header.TCPFlagFin, 'F'}, {header.TCPFlagRst, 'R'}, {header.TCPFlagPsh, 'P'}, {header.TCPFlagAck, 'A'}} {
		if f&x.flag != 0 {
			b = append(b, x.letter)
		}
	}
	return string(b)
}

// tcpSegment builds an outbound IPv4/TCP segment the way netstack does.
func tcpSegment(s segSpec, src, dst tcpip.Address, srcMAC, dstMAC tcpip.LinkAddress) *gstack.PacketBuffer {
	if s.port == 0 {
		s.port = 1000
	}
	tcpLen := header.TCPMinimumSize
	if s.sack {
		tcpLen += 12
	}
	pkt := gstack.NewPacketBuffer(gstack.PacketBufferOptions{
		ReserveHeaderBytes: header.EthernetMinimumSize + header.IPv4MinimumSize + tcpLen,
		Payload:            buffer.MakeWithData(make([]byte, s.payload)),
	})
	tcp := header.TCP(pkt.TransportHeader().Push(tcpLen))
	tcp.Encode(&header.TCPFields{SrcPort: s.port, DstPort: 7, SeqNum: 1, AckNum: s.ack, DataOffset: uint8(tcpLen), Flags: s.flags, WindowSize: s.wnd})
	if s.sack {
		copy(tcp[header.TCPMinimumSize:], []byte{1, 1, 5, 10, 0, 0, 0, 0, 0, 0, 0, 0})
	}
	pkt.TransportProtocolNumber = header.TCPProtocolNumber
	ip := header.IPv4(pkt.NetworkHeader().Push(header.IPv4MinimumSize))
	ip.Encode(&header.IPv4Fields{TotalLength: uint16(pkt.Size()), TTL: 64, Protocol: uint8(header.TCPProtocolNumber), SrcAddr: src, DstAddr: dst})
	ip.SetChecksum(^ip.CalculateChecksum())
	pkt.NetworkProtocolNumber = header.IPv4ProtocolNumber
	pkt.EgressRoute.LocalLinkAddress = srcMAC
	pkt.EgressRoute.RemoteLinkAddress = dstMAC
	return pkt
}

// outboxRig is a latency-mode wire over one end of a pipe whose frames are
// recorded as they leave.
type outboxRig struct {
	w    *wire
	a, b *pipe.Endpoint
	mu   sync.Mutex
	sent []string // "flags/ack" of each TCP frame that left
}

func newOutboxRig(t *testing.T) *outboxRig {
	a, b := pipe.New(pipe.Options{})
	r := &outboxRig{a: a, b: b}
	local := tcpip.AddrFrom4([4]byte{10, 0, 0, 1})
	r.w = newWire(a, 1500, 1408, local, newARPTable(128), newSyncer())
	a.SetSniffer(func(frame []byte) {
		tcp := header.TCP(frame[header.EthernetMinimumSize+header.IPv4MinimumSize:])
		r.mu.Lock()
		r.sent = append(r.sent, fmt.Sprintf("%s/%d", flagLetters(tcp.Flags()), tcp.AckNumber()))
		r.mu.Unlock()
	})
	var far countingDispatcher
	b.Attach(&far)
	t.Cleanup(func() {
		r.w.out.close()
		b.Close()
		r.w.Close()
	})
	return r
}

// write sends the segments in one netstack call (one outbox hold).
func (r *outboxRig) write(segs ...segSpec) {
	local, remote := tcpip.AddrFrom4([4]byte{10, 0, 0, 1}), tcpip.AddrFrom4([4]byte{10, 0, 0, 2})
	r.w.out.hold()
	for _, s := range segs {
		pkt := tcpSegment(s, local, remote, r.a.LinkAddress(), r.b.LinkAddress())
		r.w.AddHeader(pkt)
		var l gstack.PacketBufferList
		l.PushBack(pkt)
		r.w.WritePackets(l)
		l.Reset()
	}
	r.w.out.release()
}

// take returns the frames sent since the last take.
func (r *outboxRig) take() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := strings.Join(r.sent, " ")
	r.sent = r.sent[:0]
	return s
}

const (
	ack    = header.TCPFlagAck
	ackPsh = header.TCPFlagAck | header.TCPFlagPsh
)

// TestOutboxDelaysACKs walks the delayed-ACK rules one segment (or one
// netstack call) at a time, checking what leaves at once.
func TestOutboxDelaysACKs(t *testing.T) {
	r := newOutboxRig(t)
	steps := []struct {
		name string
		segs []segSpec
		want string
	}{
		{"first segment with ACK leaves and teaches the flow", []segSpec{{flags: ackPsh, ack: 100, wnd: 1000, payload: 64}}, "PA/100"},
		{"pure ACK of new data is held", []segSpec{{flags: ack, ack: 164, wnd: 1000}}, ""},
		{"next data segment carries it", []segSpec{{flags: ackPsh, ack: 164, wnd: 1000, payload: 64}}, "PA/164"},
		{"ACK then answer in one call: the answer alone", []segSpec{{flags: ack, ack: 228, wnd: 1000}, {flags: ackPsh, ack: 228, wnd: 1000, payload: 64}}, "PA/228"},
		{"duplicate ACK leaves at once", []segSpec{{flags: ack, ack: 228, wnd: 1000}}, "A/228"},
		{"another duplicate too", []segSpec{{flags: ack, ack: 228, wnd: 1000}}, "A/228"},
		{"window update (same ACK) leaves at once", []segSpec{{flags: ack, ack: 228, wnd: 2000}}, "A/228"},
		{"held again", []segSpec{{flags: ack, ack: 300, wnd: 2000}}, ""},
		{"a second ACK leaves and replaces the first", []segSpec{{flags: ack, ack: 400, wnd: 2000}}, "A/400"},
		{"more than one MSS unacknowledged leaves", []segSpec{{flags: ack, ack: 400 + 1409, wnd: 2000}}, "A/1809"},
		{"zero window leaves", []segSpec{{flags: ack, ack: 1900, wnd: 0}}, "A/1900"},
		{"the ACK after a zero window leaves", []segSpec{{flags: ack, ack: 2000, wnd: 2000}}, "A/2000"},
		{"an ACK of new data that opens the window leaves", []segSpec{{flags: ack, ack: 2050, wnd: 3000}}, "A/2050"},
		{"held with a window no larger", []segSpec{{flags: ack, ack: 2060, wnd: 3000}}, ""},
		{"an ACK opening the window replaces it and leaves", []segSpec{{flags: ack, ack: 2070, wnd: 3001}}, "A/2070"},
		{"ACK with SACK option leaves", []segSpec{{flags: ack, ack: 2100, wnd: 2000, sack: true}}, "A/2100"},
		{"held before a reset without ACK", []segSpec{{flags: ack, ack: 2200, wnd: 2000}}, ""},
		{"reset without ACK: the held ACK first", []segSpec{{flags: header.TCPFlagRst, ack: 0}}, "A/2200 R/0"},
	}
	for _, s := range steps {
		r.write(s.segs...)
		if got := r.take(); got != s.want {
			t.Fatalf("%s: sent %q, want %q", s.name, got, s.want)
		}
	}

	// A new connection (the reset forgot the flow): FIN carries a held ACK,
	// and after the FIN nothing is delayed.
	for _, s := range []struct {
		name string
		segs []segSpec
		want string
	}{
		{"first segment", []segSpec{{flags: ackPsh, ack: 10, wnd: 1000, payload: 1}}, "PA/10"},
		{"held", []segSpec{{flags: ack, ack: 20, wnd: 1000}}, ""},
		{"FIN carries it", []segSpec{{flags: header.TCPFlagFin | ack, ack: 20, wnd: 1000}}, "FA/20"},
		{"after the FIN, not delayed", []segSpec{{flags: ack, ack: 21, wnd: 1000}}, "A/21"},
	} {
		r.write(s.segs...)
		if got := r.take(); got != s.want {
			t.Fatalf("%s: sent %q, want %q", s.name, got, s.want)
		}
	}

	o := r.w.out
	if m, h := o.merged.Load(), o.held.Load(); m != 5 || h != 6 {
		t.Errorf("merged %d, held %d; want 5 and 6", m, h)
	}
}

// TestOutboxSendsLateACKs checks that a held ACK nothing carries leaves
// after the delay, alone.
func TestOutboxSendsLateACKs(t *testing.T) {
	r := newOutboxRig(t)
	r.write(segSpec{flags: ackPsh, ack: 100, wnd: 1000, payload: 64})
	r.take()
	start := time.Now()
	r.write(segSpec{flags: ack, ack: 164, wnd: 1000})
	if got := r.take(); got != "" {
		t.Fatalf("sent %q at once, want the ACK held", got)
	}
	var got string
	for got == "" && time.Since(start) < 5*time.Second {
		time.Sleep(100 * time.Microsecond)
		got = r.take()
	}
	if got != "A/164" {
		t.Fatalf("after %v sent %q, want \"A/164\"", time.Since(start), got)
	}
	if n := r.w.out.expired.Load(); n != 1 {
		t.Errorf("late ACKs %d, want 1", n)
	}
	// The timer stops once nothing is held.
	time.Sleep(5 * ackDelayTick)
	r.w.out.mu.Lock()
	armed := r.w.out.armed
	r.w.out.mu.Unlock()
	if armed {
		t.Error("delayed-ACK timer still armed with nothing held")
	}
}

// TestOutboxFlowEviction checks that a flow taking another's slot sends the
// held ACK of the one it evicts, and counts the eviction.
func TestOutboxFlowEviction(t *testing.T) {
	r := newOutboxRig(t)
	local, remote := tcpip.AddrFrom4([4]byte{10, 0, 0, 1}), tcpip.AddrFrom4([4]byte{10, 0, 0, 2})
	keyOf := func(port uint16) flowKey {
		pkt := tcpSegment(segSpec{port: port}, local, remote, "", "")
		defer pkt.DecRef()
		ip, tcp := pkt.NetworkHeader().Slice(), pkt.TransportHeader().Slice()
		return flowKey{addrs: uint64(be32(ip[12:]))<<32 | uint64(be32(ip[16:])), ports: be32(tcp)}
	}
	// Find two ports whose flows share a slot.
	first := uint16(1000)
	var second uint16
	for p := first + 1; p != 0; p++ {
		if keyOf(p).slot() == keyOf(first).slot() {
			second = p
			break
		}
	}
	if second == 0 {
		t.Fatal("no colliding port")
	}
	r.write(segSpec{flags: ackPsh, ack: 100, wnd: 1000, payload: 64, port: first})
	r.write(segSpec{flags: ack, ack: 164, wnd: 1000, port: first})
	if got := r.take(); got != "PA/100" {
		t.Fatalf("sent %q, want \"PA/100\"", got)
	}
	r.write(segSpec{flags: ackPsh, ack: 7, wnd: 1000, payload: 64, port: second})
	if got := r.take(); got != "A/164 PA/7" {
		t.Fatalf("sent %q, want the evicted flow's ACK first: \"A/164 PA/7\"", got)
	}
	if n := r.w.out.evicted.Load(); n != 1 {
		t.Errorf("evictions %d, want 1", n)
	}

	// A RST or a SYN-ACK on a colliding flow (what a stack sends to an ACK
	// or SYN flood) leaves at once and takes nothing: the pure ACK of the
	// connection in the slot stays held until its next segment carries it,
	// and nothing counts as evicted. All in one netstack call, so that the
	// delayed-ACK timer cannot send the held ACK meanwhile.
	r.write(
		segSpec{flags: ack, ack: 71, wnd: 1000, port: second},
		segSpec{flags: header.TCPFlagRst | header.TCPFlagAck, port: first},
		segSpec{flags: header.TCPFlagSyn | header.TCPFlagAck, ack: 1, wnd: 1000, port: first},
		segSpec{flags: ackPsh, ack: 71, wnd: 1000, payload: 8, port: second},
	)
	if got := r.take(); got != "RA/0 SA/1 PA/71" {
		t.Fatalf("sent %q, want the held ACK carried by the data: \"RA/0 SA/1 PA/71\"", got)
	}
	if n := r.w.out.evicted.Load(); n != 1 {
		t.Errorf("evictions %d after the RST and SYN-ACK, want still 1", n)
	}
}

// TestClockStamp: while a delivery holds the stamp, every reading is the
// frozen time; a nested freeze does not take it over; thawing returns the
// clock to real time, and a nil stamp never freezes.
func TestClockStamp(t *testing.T) {
	var s clockStamp
	c := newClock(&s)
	owned := s.freeze()
	if !owned {
		t.Fatal("freeze of an idle stamp did not take it")
	}
	a := c.NowMonotonic()
	time.Sleep(time.Millisecond)
	if b := c.NowMonotonic(); b != a {
		t.Fatalf("frozen clock moved by %v", b.Sub(a))
	}
	if s.freeze() {
		t.Fatal("a nested freeze took the stamp over")
	}
	s.thaw(false)
	if b := c.NowMonotonic(); b != a {
		t.Fatal("thaw by a non-owner unfroze the clock")
	}
	s.thaw(owned)
	if b := c.NowMonotonic(); b.Sub(a) < time.Millisecond {
		t.Fatalf("thawed clock reads %v after a 1 ms sleep", b.Sub(a))
	}
	var none *clockStamp
	if none.freeze() {
		t.Fatal("a nil stamp froze")
	}
	none.thaw(false)
	if none.read() == 0 {
		t.Fatal("a nil stamp reads zero")
	}
}
