package tickwire

import (
	"testing"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/tickwire/tickwire/link/pipe"
)

type countingDispatcher struct{ n int }

func (d *countingDispatcher) DeliverNetworkPacket(tcpip.NetworkProtocolNumber, *gstack.PacketBuffer) {
	d.n++
}
func (d *countingDispatcher) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *gstack.PacketBuffer) {}

// dataSegment builds an outbound IPv4/TCP data segment (ACK, 64 bytes) the
// way netstack does: headers pushed in front of a payload buffer.
func dataSegment(payload buffer.Buffer, src, dst tcpip.Address, srcMAC, dstMAC tcpip.LinkAddress) *gstack.PacketBuffer {
	pkt := gstack.NewPacketBuffer(gstack.PacketBufferOptions{
		ReserveHeaderBytes: header.EthernetMinimumSize + header.IPv4MinimumSize + header.TCPMinimumSize,
		Payload:            payload.Clone(),
	})
	tcp := header.TCP(pkt.TransportHeader().Push(header.TCPMinimumSize))
	tcp.Encode(&header.TCPFields{SrcPort: 1000, DstPort: 7, DataOffset: header.TCPMinimumSize, Flags: header.TCPFlagAck, WindowSize: 1000})
	pkt.TransportProtocolNumber = header.TCPProtocolNumber
	ip := header.IPv4(pkt.NetworkHeader().Push(header.IPv4MinimumSize))
	ip.Encode(&header.IPv4Fields{TotalLength: uint16(pkt.Size()), TTL: 64, Protocol: uint8(header.TCPProtocolNumber), SrcAddr: src, DstAddr: dst})
	ip.SetChecksum(^ip.CalculateChecksum())
	pkt.NetworkProtocolNumber = header.IPv4ProtocolNumber
	pkt.EgressRoute.LocalLinkAddress = srcMAC
	pkt.EgressRoute.RemoteLinkAddress = dstMAC
	return pkt
}

// TestWireDoesNotAllocate asserts that tickwire's link wrapper adds no
// allocation per frame in either direction: a data segment written through
// it crosses a pipe, and one written from the far end comes up through it.
func TestWireDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items; run without -race")
	}
	a, b := pipe.New(pipe.Options{})
	local, remote := tcpip.AddrFrom4([4]byte{10, 0, 0, 1}), tcpip.AddrFrom4([4]byte{10, 0, 0, 2})
	w := newWire(a, 1500, 1408, local, newARPTable(128), nil)
	var up, far countingDispatcher
	w.Attach(&up)
	b.Attach(&far)
	payload := buffer.MakeWithData(make([]byte, 64))
	defer payload.Release()

	var list gstack.PacketBufferList
	send := func(via gstack.LinkEndpoint, src, dst tcpip.Address, srcMAC, dstMAC tcpip.LinkAddress) {
		pkt := dataSegment(payload, src, dst, srcMAC, dstMAC)
		via.AddHeader(pkt)
		list.PushBack(pkt)
		via.WritePackets(list)
		list.Reset()
	}
	baseline := testing.AllocsPerRun(1000, func() {
		dataSegment(payload, local, remote, a.LinkAddress(), b.LinkAddress()).DecRef()
	})
	out := testing.AllocsPerRun(1000, func() { send(w, local, remote, a.LinkAddress(), b.LinkAddress()) })
	in := testing.AllocsPerRun(1000, func() { send(b, remote, local, b.LinkAddress(), a.LinkAddress()) })
	if out-baseline > 0 || in-baseline > 0 {
		t.Errorf("allocations per frame over a baseline of %.1f: out %.1f, in %.1f; want 0", baseline, out, in)
	}
	if up.n < 1000 || far.n < 1000 {
		t.Fatalf("delivered %d up, %d to the far end", up.n, far.n)
	}
	if st := w.counters.tcpRx.packets.Load(); st < 1000 {
		t.Errorf("wire counted %d TCP frames in", st)
	}
	w.Attach(nil)
	b.Close()
	w.Close()
}
