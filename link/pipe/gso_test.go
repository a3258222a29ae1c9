package pipe_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/pipe"
)

// wireLog records what a sniffer saw: the largest frame, the frames above
// the MTU, the MSS option of SYNs, and TCP segments whose checksum fails.
type wireLog struct {
	mu sync.Mutex
	// +checklocks:mu
	largest, large, badSum int
	// +checklocks:mu
	synMSS []int
}

func (l *wireLog) record(frame []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.largest = max(l.largest, len(frame))
	if len(frame) > header.EthernetMinimumSize+pipe.DefaultMTU {
		l.large++
	}
	ip := header.IPv4(frame[header.EthernetMinimumSize:])
	if header.Ethernet(frame).Type() != header.IPv4ProtocolNumber || !ip.IsValid(len(ip)) || ip.TransportProtocol() != header.TCPProtocolNumber {
		return
	}
	seg := header.TCP(ip.Payload())
	if seg.Flags()&header.TCPFlagSyn != 0 {
		l.synMSS = append(l.synMSS, int(header.ParseSynOptions(seg.Options(), seg.Flags()&header.TCPFlagAck != 0).MSS))
	}
	payload := seg[seg.DataOffset():]
	if !seg.IsChecksumValid(ip.SourceAddress(), ip.DestinationAddress(), checksum.Checksum(payload, 0), uint16(len(payload))) {
		l.badSum++
	}
}

// stream sends size bytes of a pattern from one stack to the other over a
// pipe built with opts and checks that they arrive byte-exact; it returns
// what sniffers on both ends saw and the sending end's Stats.
func stream(t *testing.T, opts pipe.Options, size int) (*wireLog, pipe.Stats) {
	t.Helper()
	a, b := pipe.New(opts)
	arp := map[netip.Addr]net.HardwareAddr{netip.MustParseAddr("10.0.0.1"): a.MAC(), netip.MustParseAddr("10.0.0.2"): b.MAC()}
	sa, err := tickwire.New(tickwire.Config{Link: a, MAC: a.MAC(), Addr: netip.MustParsePrefix("10.0.0.1/24"), StaticARP: arp})
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	sb, err := tickwire.New(tickwire.Config{Link: b, MAC: b.MAC(), Addr: netip.MustParsePrefix("10.0.0.2/24"), StaticARP: arp})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	var log wireLog
	a.SetSniffer(log.record)
	b.SetSniffer(log.record)
	defer a.SetSniffer(nil)
	defer b.SetSniffer(nil)

	ln, err := sb.ListenTCP(7)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i*7 + i>>11)
	}
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Minute))
		b, _ := io.ReadAll(c)
		got <- b
	}()
	c, err := sa.DialTCP(context.Background(), netip.MustParseAddrPort("10.0.0.2:7"))
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := c.Write(want); err != nil {
		t.Fatal(err)
	}
	c.CloseWrite()
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("received %d bytes, want the %d sent, byte-exact", len(b), len(want))
	}
	c.Close()
	return &log, a.Stats()
}

// TestGSOStream: with GSO (the default) a 10 MiB stream arrives byte-exact
// in frames above the MTU, each of whose checksums the sniffer finds right,
// while the SYNs still announce the 1408-byte MSS of the wire.
func TestGSOStream(t *testing.T) {
	log, st := stream(t, pipe.Options{}, 10<<20)
	log.mu.Lock()
	defer log.mu.Unlock()
	t.Logf("%+v; largest frame %d bytes", st, log.largest)
	if log.large == 0 || st.Large == 0 {
		t.Errorf("%d frames above the MTU seen, %d counted (largest %d bytes); want some", log.large, st.Large, log.largest)
	}
	if log.largest > header.EthernetMinimumSize+pipe.GSOMaxSize {
		t.Errorf("largest frame %d bytes, above %d", log.largest, header.EthernetMinimumSize+pipe.GSOMaxSize)
	}
	if log.badSum != 0 {
		t.Errorf("%d TCP segments with a wrong checksum in the sniffer's copies", log.badSum)
	}
	if len(log.synMSS) != 2 || log.synMSS[0] != tickwire.DefaultMSS || log.synMSS[1] != tickwire.DefaultMSS {
		t.Errorf("SYN, SYN-ACK MSS options %v; want %d both", log.synMSS, tickwire.DefaultMSS)
	}
}

// TestNoGSOStream: with Options.NoGSO no frame exceeds the MTU.
func TestNoGSOStream(t *testing.T) {
	log, st := stream(t, pipe.Options{NoGSO: true}, 1<<20)
	log.mu.Lock()
	defer log.mu.Unlock()
	if log.largest > header.EthernetMinimumSize+pipe.DefaultMTU || st.Large != 0 || log.badSum != 0 {
		t.Errorf("largest frame %d bytes, %d counted large, %d bad checksums; want <= %d, 0, 0",
			log.largest, st.Large, log.badSum, header.EthernetMinimumSize+pipe.DefaultMTU)
	}
}

// quiet is a dispatcher that drops what it receives.
type quiet struct{}

func (quiet) DeliverNetworkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}
func (quiet) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer)    {}

// gsoProbe is a dispatcher that says whether it takes large segments.
type gsoProbe struct {
	quiet
	takes bool
}

func (p gsoProbe) ReceivesGSO() bool { return p.takes }

// TestSupportedGSO: an end offers GSO only when the other end's dispatcher
// takes large segments, and never with NoGSO.
func TestSupportedGSO(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   pipe.Options
		attach func(*pipe.Endpoint)
		want   bool
	}{
		{"GSOReceiver", pipe.Options{}, func(e *pipe.Endpoint) { e.Attach(gsoProbe{takes: true}) }, true},
		{"GSOReceiver that declines", pipe.Options{}, func(e *pipe.Endpoint) { e.Attach(gsoProbe{}) }, false},
		{"plain dispatcher", pipe.Options{}, func(e *pipe.Endpoint) { e.Attach(quiet{}) }, false},
		{"detached", pipe.Options{}, func(*pipe.Endpoint) {}, false},
		{"NoGSO", pipe.Options{NoGSO: true}, func(e *pipe.Endpoint) { e.Attach(gsoProbe{takes: true}) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := pipe.New(tc.opts)
			defer a.Close()
			defer b.Close()
			tc.attach(b)
			if got := a.SupportedGSO() == stack.HostGSOSupported; got != tc.want {
				t.Errorf("SupportedGSO() = %v, want GSO %v", a.SupportedGSO(), tc.want)
			}
		})
	}
}

// TestSendChecksum: with GSO the receiving stack trusts the pipe, so Send
// drops an IPv4 frame with a wrong checksum and counts it at the receiving
// end; without GSO it delivers it for the stack to check.
func TestSendChecksum(t *testing.T) {
	ip := make([]byte, header.IPv4MinimumSize+header.UDPMinimumSize+4)
	h := header.IPv4(ip)
	h.Encode(&header.IPv4Fields{TotalLength: uint16(len(ip)), TTL: 64, Protocol: uint8(header.UDPProtocolNumber),
		SrcAddr: tcpip.AddrFrom4([4]byte{10, 0, 0, 1}), DstAddr: tcpip.AddrFrom4([4]byte{10, 0, 0, 2})})
	h.SetChecksum(^h.CalculateChecksum())
	u := header.UDP(ip[header.IPv4MinimumSize:])
	u.Encode(&header.UDPFields{SrcPort: 1, DstPort: 2, Length: uint16(len(u))})
	u.SetChecksum(0x1234) // wrong
	for _, noGSO := range []bool{false, true} {
		a, b := pipe.New(pipe.Options{NoGSO: noGSO})
		b.Attach(quiet{})
		frame := make([]byte, header.EthernetMinimumSize, header.EthernetMinimumSize+len(ip))
		header.Ethernet(frame).Encode(&header.EthernetFields{SrcAddr: tcpip.LinkAddress(a.MAC()), DstAddr: tcpip.LinkAddress(b.MAC()), Type: header.IPv4ProtocolNumber})
		if err := a.Send(append(frame, ip...)); err != nil {
			t.Fatal(err)
		}
		_, _, udp, _ := b.RxChecksumDrops()
		if delivered := a.Stats().Delivered; noGSO && (udp != 0 || delivered != 1) || !noGSO && (udp != 1 || delivered != 0) {
			t.Errorf("NoGSO %v: %d UDP checksum drops, %d delivered", noGSO, udp, delivered)
		}
		if got := b.Capabilities()&stack.CapabilityRXChecksumOffload != 0; got == noGSO {
			t.Errorf("NoGSO %v: receive checksum offload %v", noGSO, got)
		}
		a.Close()
		b.Close()
	}
}
