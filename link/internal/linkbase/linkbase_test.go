package linkbase

import (
	"os"
	"testing"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/refs"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

func TestMain(m *testing.M) {
	refs.SetLeakMode(refs.LeaksPanic)
	code := m.Run()
	refs.DoLeakCheck()
	os.Exit(code)
}

type lastPacket struct {
	proto   tcpip.NetworkProtocolNumber
	pktType tcpip.PacketType
	payload string
	n       int
}

func (l *lastPacket) DeliverNetworkPacket(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	b := pkt.Data().ToBuffer()
	l.proto, l.pktType, l.payload = proto, pkt.PktType, string(b.Flatten())
	b.Release()
	l.n++
}

func (l *lastPacket) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

// TestHeaderRoundTrip builds a frame with AddHeader and delivers its bytes
// back with DeliverBytes.
func TestHeaderRoundTrip(t *testing.T) {
	const mac = tcpip.LinkAddress("\x02\x00\x00\x00\x00\x01")
	var e Endpoint
	e.Init(mac, 1500)
	if e.IsAttached() || e.MTU() != 1500 || e.LinkAddress() != mac || e.MaxHeaderLength() != 14 ||
		e.ARPHardwareType() != header.ARPHardwareEther || e.Capabilities()&stack.CapabilityResolutionRequired == 0 {
		t.Fatal("initial state wrong")
	}
	var got lastPacket
	if e.DeliverBytes(make([]byte, 20)) {
		t.Error("delivered without a dispatcher")
	}
	e.Attach(&got)

	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{ReserveHeaderBytes: 14, Payload: buffer.MakeWithData([]byte("payload"))})
	pkt.NetworkProtocolNumber = header.ARPProtocolNumber
	pkt.EgressRoute.LocalLinkAddress = "\x02\x00\x00\x00\x00\x09"
	pkt.EgressRoute.RemoteLinkAddress = mac
	e.AddHeader(pkt)
	v := pkt.ToView()
	frame := append([]byte(nil), v.AsSlice()...)
	v.Release()
	pkt.DecRef()

	if !e.DeliverBytes(frame) || got.proto != header.ARPProtocolNumber || got.payload != "payload" || got.pktType != tcpip.PacketHost {
		t.Errorf("delivered %+v", got)
	}
	if e.DeliverBytes(frame[:13]) {
		t.Error("delivered a runt")
	}
	closed := 0
	e.SetOnCloseAction(func() { closed++ })
	e.Close()
	e.Close()
	if closed != 1 || !e.Closed() {
		t.Errorf("close action ran %d times", closed)
	}
}
