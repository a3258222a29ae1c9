package pipe_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"

	"github.com/tickwire/tickwire"
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

// Two stacks on a pipe exchange a stream in segments of up to the window
// (GSO, the default), or of at most the MTU with Options.NoGSO, as on a
// cable. The SYNs announce the same MSS either way.
func Example_gso() {
	for _, opts := range []pipe.Options{{}, {NoGSO: true}} {
		a, b := pipe.New(opts)
		arp := map[netip.Addr]net.HardwareAddr{netip.MustParseAddr("10.0.0.1"): a.MAC(), netip.MustParseAddr("10.0.0.2"): b.MAC()}
		client, _ := tickwire.New(tickwire.Config{Link: a, MAC: a.MAC(), Addr: netip.MustParsePrefix("10.0.0.1/24"), StaticARP: arp})
		server, _ := tickwire.New(tickwire.Config{Link: b, MAC: b.MAC(), Addr: netip.MustParsePrefix("10.0.0.2/24"), StaticARP: arp})
		ln, _ := server.ListenTCP(7)
		got := make(chan int64)
		go func() {
			c, _ := ln.Accept()
			n, _ := io.Copy(io.Discard, c)
			got <- n
		}()
		c, err := client.DialTCP(context.Background(), netip.MustParseAddrPort("10.0.0.2:7"))
		if err != nil {
			panic(err)
		}
		c.Write(make([]byte, 1<<20))
		c.CloseWrite()
		fmt.Printf("NoGSO %v: %d bytes received, frames above the MTU: %v\n", opts.NoGSO, <-got, a.Stats().Large > 0)
		c.Close()
		ln.Close()
		client.Close()
		server.Close()
	}
	// Output:
	// NoGSO false: 1048576 bytes received, frames above the MTU: true
	// NoGSO true: 1048576 bytes received, frames above the MTU: false
}

// gate is a dispatcher that holds every delivery until release is closed,
// as a busy receiver would.
type gate struct{ entered, release chan struct{} }

func (g gate) DeliverNetworkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.release
}

func (gate) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

// Frames sent while the other end is still busy with an earlier one queue
// on the sender (link.TxBacklogger): a tickwire.Stack holds its TCP Writes
// while the backlog is long and asks to be woken when it has drained.
func Example_txBacklog() {
	a, b := pipe.New(pipe.Options{QueueLen: 16})
	defer a.Close()
	defer b.Close()
	g := gate{entered: make(chan struct{}, 1), release: make(chan struct{})}
	b.Attach(g)
	frame := make([]byte, header.EthernetMinimumSize+4)
	header.Ethernet(frame).Encode(&header.EthernetFields{
		SrcAddr: tcpip.LinkAddress(a.MAC()), DstAddr: tcpip.LinkAddress(b.MAC()), Type: header.IPv4ProtocolNumber,
	})
	go a.Send(frame) // the direction is idle: this goroutine delivers, and waits in g
	<-g.entered
	for range 4 {
		a.Send(frame) // queued behind the delivery in progress
	}
	fmt.Println("backlog:", a.TxBacklog(), "of at most", a.TxQueueLen())
	drained := make(chan struct{})
	fmt.Println("asked to wait:", a.NotifyTxBacklog(0, func() { close(drained) }))
	close(g.release)
	<-drained
	fmt.Println("backlog:", a.TxBacklog())
	// Output:
	// backlog: 5 of at most 16
	// asked to wait: true
	// backlog: 0
}
