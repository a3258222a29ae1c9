package tickwire_test

import (
	"io"
	"net"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/tickwire/tickwire"
)

// TestLatencyDirectTCP checks latency mode's shortcut past netstack's
// network layer (tcpdirect.go): the segments of held connections take it on
// both sides, a segment with a bad checksum that takes it is still dropped
// and counted by TCP, and closing a connection takes its flow out.
func TestLatencyDirectTCP(t *testing.T) {
	p := newPair(t, latencyMode)
	p.serveEcho(t)
	c := p.dialEcho(t)
	msg, buf := make([]byte, 64), make([]byte, 64)
	roundTrips := func(n int) {
		t.Helper()
		for range n {
			if _, err := c.Write(msg); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(c, buf); err != nil {
				t.Fatal(err)
			}
		}
	}
	roundTrips(10) // the first segments may beat Accept
	a0, b0 := p.a.Stats().LatencyTCPDirect, p.b.Stats().LatencyTCPDirect
	roundTrips(100)
	// A segment that finds its endpoint busy (a reader or a busy-polling
	// goroutine holds it) takes the stock path, so not all of them take
	// the direct one; none would if it were broken.
	a, b := p.a.Stats().LatencyTCPDirect-a0, p.b.Stats().LatencyTCPDirect-b0
	if a < 50 || b < 50 {
		t.Errorf("direct segments in 100 round trips: client %d, server %d; want >= 50 each", a, b)
	}
	if a, b := tickwire.HeldFlows(p.a), tickwire.HeldFlows(p.b); a != 1 || b != 1 {
		t.Errorf("held flows: client %d, server %d; want 1 each", a, b)
	}

	// A data segment of the connection with a wrong checksum, sent to the
	// server as if from the client.
	from := c.LocalAddr().(*net.TCPAddr).AddrPort()
	to := addrPort(addrB, echoPort)
	seg := make([]byte, header.TCPMinimumSize+10)
	tcp := header.TCP(seg)
	tcp.Encode(&header.TCPFields{SrcPort: from.Port(), DstPort: to.Port(), SeqNum: 1, AckNum: 1,
		DataOffset: header.TCPMinimumSize, Flags: header.TCPFlagAck | header.TCPFlagPsh, WindowSize: 1000})
	xsum := header.PseudoHeaderChecksum(header.TCPProtocolNumber, tcpip.AddrFrom4(from.Addr().As4()), tcpip.AddrFrom4(to.Addr().As4()), uint16(len(seg)))
	tcp.SetChecksum(^checksum.Checksum(seg, xsum) ^ 0x0101)
	frame := ethernet(p.pb.MAC(), p.pa.MAC(), uint16(header.IPv4ProtocolNumber), ipv4Packet(from.Addr(), to.Addr(), uint8(header.TCPProtocolNumber), seg))
	if err := p.pa.Send(frame); err != nil {
		t.Fatal(err)
	}
	// It takes the direct path unless the server's endpoint was busy at that
	// moment (then the stock one); either way TCP drops and counts it.
	if st := p.b.Stats(); st.DropTCPChecksum != 1 {
		t.Errorf("bad checksum: %d checksum drops, want 1", st.DropTCPChecksum)
	}
	roundTrips(10) // the connection is unharmed

	c.Close()
	if n := tickwire.HeldFlows(p.a); n != 0 {
		t.Errorf("client holds %d flows after Close, want 0", n)
	}
}
