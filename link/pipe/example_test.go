package pipe_test

import (
	"fmt"

	"github.com/tickwire/tickwire/link/pipe"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

type printer struct{}

func (printer) DeliverNetworkPacket(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	fmt.Printf("received EtherType %#04x, %d payload bytes, for this host: %v\n", uint16(proto), pkt.Data().Size(), pkt.PktType == tcpip.PacketHost)
}

func (printer) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

// A raw frame sent on one end reaches the dispatcher attached to the other;
// a sniffer on the sending end sees it first.
func Example() {
	a, b := pipe.New(pipe.Options{})
	defer a.Close()
	defer b.Close()
	b.Attach(printer{}) // a tickwire.Stack attaches itself the same way
	a.SetSniffer(func(frame []byte) { fmt.Printf("sniffed %d bytes\n", len(frame)) })

	frame := make([]byte, header.EthernetMinimumSize+4)
	header.Ethernet(frame).Encode(&header.EthernetFields{
		SrcAddr: tcpip.LinkAddress(a.MAC()), DstAddr: tcpip.LinkAddress(b.MAC()), Type: header.IPv4ProtocolNumber,
	})
	if err := a.Send(frame); err != nil {
		panic(err)
	}
	fmt.Printf("%+v\n", a.Stats())
	// Output:
	// sniffed 18 bytes
	// received EtherType 0x0800, 4 payload bytes, for this host: true
	// {Sent:1 Delivered:1 Dropped:0 Queued:0 Large:0}
}
