package recorder

import (
	"errors"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/link/ethernet"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// offloading is a link that, like link/tap, verifies checksums for the
// stack and counts what it dropped.
type offloading struct{ stack.LinkEndpoint }

func (offloading) Capabilities() stack.LinkEndpointCapabilities {
	return stack.CapabilityResolutionRequired | stack.CapabilityRXChecksumOffload
}

func (offloading) RxChecksumDrops() (ipv4, tcp, udp, icmp uint64) { return 1, 2, 3, 4 }

// TestInjectVerifiesForOffloadingLink: above a link that tells the stack
// not to verify checksums, InjectFrame verifies them itself, and the
// recorder passes on the link's checksum drop counts.
func TestInjectVerifiesForOffloadingLink(t *testing.T) {
	ch := channel.New(16, 1500, macA)
	rec, err := New(offloading{ethernet.New(ch)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := newStack(t, rec, addrA)
	defer func() { s.Close(); s.Wait(); ch.Drain() }()

	frame := make([]byte, header.EthernetMinimumSize+header.IPv4MinimumSize+8)
	header.Ethernet(frame).Encode(&header.EthernetFields{SrcAddr: macB, DstAddr: macA, Type: header.IPv4ProtocolNumber})
	ip := header.IPv4(frame[header.EthernetMinimumSize:])
	ip.Encode(&header.IPv4Fields{TotalLength: uint16(len(ip)), TTL: 64, Protocol: uint8(header.ICMPv4ProtocolNumber),
		SrcAddr: tcpip.AddrFrom4([4]byte{10, 9, 9, 9}), DstAddr: addrA})
	ip.SetChecksum(^ip.CalculateChecksum() + 1) // wrong
	if err := rec.InjectFrame(frame); !errors.Is(err, ErrBadChecksum) {
		t.Fatalf("InjectFrame of a frame with a wrong IPv4 checksum: %v, want ErrBadChecksum", err)
	}
	if st := rec.Stats(); st.Rejected != 1 || st.Injected != 0 {
		t.Fatalf("stats %+v", st)
	}
	if a, b, c, d := rec.RxChecksumDrops(); a != 1 || b != 2 || c != 3 || d != 4 {
		t.Fatalf("RxChecksumDrops = %d %d %d %d, want the wrapped link's", a, b, c, d)
	}
}
