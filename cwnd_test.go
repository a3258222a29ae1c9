package tickwire_test

import (
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/pipe"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// frameTap is a NetworkDispatcher standing in for a peer: it records the
// frames the stack sends, Ethernet header included.
type frameTap struct {
	mu sync.Mutex
	// +checklocks:mu
	frames [][]byte
}

func (f *frameTap) DeliverNetworkPacket(_ tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	v := pkt.ToView()
	f.mu.Lock()
	f.frames = append(f.frames, append([]byte(nil), v.AsSlice()...))
	f.mu.Unlock()
	v.Release()
}

func (f *frameTap) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

func (f *frameTap) snapshot() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.frames...)
}

// TestInitialWindowOnTheWire dials a fake peer that completes the handshake
// and then never acknowledges: the stack sends exactly 10 full segments
// (the initial congestion window of 10 MSS) and waits.
func TestInitialWindowOnTheWire(t *testing.T) {
	pa, pb := pipe.New(pipe.Options{})
	peerMAC := pb.MAC()
	s, err := newStack(tickwire.Config{Link: pa, Addr: addrA, StaticARP: map[netip.Addr]net.HardwareAddr{addrB.Addr(): peerMAC}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var peer frameTap
	pb.Attach(&peer)

	dialed := make(chan net.Conn, 1)
	go func() {
		c, err := s.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, 80))
		if err != nil {
			t.Error(err)
		}
		dialed <- c
	}()
	var syn header.TCP
	for deadline := time.Now().Add(5 * time.Second); syn == nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no SYN")
		}
		for _, f := range peer.snapshot() {
			if seg, _, ok := tcpSegment(f); ok && seg.Flags() == header.TCPFlagSyn {
				syn = seg
			}
		}
	}
	const iss = 1000
	synAck := make([]byte, header.TCPMinimumSize+4)
	header.TCP(synAck).Encode(&header.TCPFields{
		SrcPort: 80, DstPort: syn.SourcePort(), SeqNum: iss, AckNum: syn.SequenceNumber() + 1,
		DataOffset: uint8(len(synAck)), Flags: header.TCPFlagSyn | header.TCPFlagAck, WindowSize: 65535,
	})
	header.EncodeMSSOption(1408, synAck[header.TCPMinimumSize:])
	xsum := header.PseudoHeaderChecksum(header.TCPProtocolNumber, tcpip.AddrFrom4(addrB.Addr().As4()), tcpip.AddrFrom4(addrA.Addr().As4()), uint16(len(synAck)))
	header.TCP(synAck).SetChecksum(^checksum.Checksum(synAck, xsum))
	if err := pb.Send(ethernet(pa.MAC(), peerMAC, uint16(header.IPv4ProtocolNumber), ipv4Packet(addrB.Addr(), addrA.Addr(), uint8(header.TCPProtocolNumber), synAck))); err != nil {
		t.Fatal(err)
	}
	c := <-dialed
	if c == nil {
		t.FailNow()
	}
	defer c.Close()
	go c.Write(make([]byte, 100<<10)) // blocks: nothing is ever acknowledged; Close ends it

	// Count distinct data segments; a retransmission after the 1 s RTO would
	// repeat a sequence number, not add one.
	seqs := map[uint32]int{}
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		for _, f := range peer.snapshot() {
			if seg, n, ok := tcpSegment(f); ok && n > 0 {
				seqs[seg.SequenceNumber()] = n
			}
		}
		if len(seqs) >= 10 || time.Now().After(deadline) {
			break
		}
	}
	time.Sleep(50 * time.Millisecond) // anything beyond the window would show up now
	for _, f := range peer.snapshot() {
		if seg, n, ok := tcpSegment(f); ok && n > 0 {
			seqs[seg.SequenceNumber()] = n
		}
	}
	if len(seqs) != 10 {
		t.Fatalf("%d data segments before the first ACK, want 10 (initial window 10 MSS)", len(seqs))
	}
	for seq, n := range seqs {
		if n != 1408 {
			t.Errorf("segment %d carries %d bytes, want 1408", seq, n)
		}
	}
}

// TestWindowSurvivesIdle: a connection that grew its congestion window and
// then sent nothing for longer than its retransmission timeout sends its
// next 16 KiB write as one segment (GSO), instead of going back to the
// initial window of 10 segments and sending the rest after a round trip
// (Config.SlowStartAfterIdle).
func TestWindowSurvivesIdle(t *testing.T) {
	p := newPair(t, nil)
	ln, err := p.b.ListenTCP(echoPort)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c := p.dialEcho(t)
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	// transfer writes n bytes on c while sc reads them.
	transfer := func(n int) {
		t.Helper()
		read := make(chan error, 1)
		go func() {
			_, err := io.ReadFull(sc, make([]byte, n))
			read <- err
		}()
		if _, err := c.Write(make([]byte, n)); err != nil {
			t.Fatal(err)
		}
		if err := <-read; err != nil {
			t.Fatal(err)
		}
	}
	// Slow start grows the window past the 12 segments of 16 KiB; a
	// retransmission timeout (a loaded machine) may take it back down, so
	// transfer again until it is there.
	for i := 0; i == 0 || tickwire.ConnOptionsOf(c).SndCwnd < 12; i++ {
		if i == 10 {
			t.Skipf("congestion window %d segments after 10 transfers of 256 KiB, want 12", tickwire.ConnOptionsOf(c).SndCwnd)
		}
		transfer(256 << 10)
	}
	// netstack's retransmission timeout is at least 200 ms, and about that
	// after round trips of microseconds: the connection is idle past it.
	time.Sleep(time.Second)
	sent := p.pa.Stats().Sent
	transfer(16 << 10)
	if n := p.pa.Stats().Sent - sent; n != 1 {
		t.Errorf("a 16 KiB write after an idle second left in %d frames, want 1", n)
	}
}
