package tickwire_test

import (
	"net/netip"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// FuzzInboundFrame feeds arbitrary bytes, behind B's Ethernet header, to a
// stack: nothing may panic, and the stack must still answer a ping after
// the corpus run.
func FuzzInboundFrame(f *testing.F) {
	syn := ipv4Packet(addrA.Addr(), addrB.Addr(), uint8(header.TCPProtocolNumber), tcpSYN(netip.AddrPortFrom(addrA.Addr(), 999), addrPort(addrB, 7), 1, 1460))
	f.Add(uint16(header.IPv4ProtocolNumber), syn)
	f.Add(uint16(header.IPv4ProtocolNumber), ipv4Packet(addrA.Addr(), addrB.Addr(), uint8(header.UDPProtocolNumber), udpDatagram(netip.AddrPortFrom(addrA.Addr(), 5), addrPort(addrB, 7), []byte("hi"))))
	f.Add(uint16(header.ARPProtocolNumber), arpRequest(nil, addrA.Addr(), addrB.Addr())[header.EthernetMinimumSize:])
	f.Add(uint16(0x86dd), []byte{0x60, 0, 0, 0})
	p := newPair(f, nil)
	ln, err := p.b.ListenTCP(7)
	if err != nil {
		f.Fatal(err)
	}
	defer ln.Close()
	echoServer(ln)
	f.Fuzz(func(t *testing.T, etherType uint16, payload []byte) {
		if len(payload) > 1500 {
			payload = payload[:1500]
		}
		p.pa.Send(ethernet(p.pb.MAC(), p.pa.MAC(), etherType, payload))
	})
	// The deadline only catches a stack that stopped answering: a
	// coordinator niced on a loaded machine missed 5 s once.
	if _, err := p.a.Ping(ctxTimeout(f, time.Minute), addrB.Addr()); err != nil {
		f.Fatalf("B stopped answering: %v", err)
	}
}
