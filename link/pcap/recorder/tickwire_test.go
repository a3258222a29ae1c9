package recorder

import (
	"bytes"
	"context"
	"io"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/pcap"
	"github.com/tickwire/tickwire/link/pipe"
)

// TestRecordTickwireExchange records two tickwire stacks talking over a
// pipe (TCP echo, UDP, ping) and reads the file back with link/pcap and
// tshark.
func TestRecordTickwireExchange(t *testing.T) {
	a, b := pipe.New(pipe.Options{})
	path := filepath.Join(t.TempDir(), "tickwire.pcap")
	rec, err := Create(a, path)
	if err != nil {
		t.Fatal(err)
	}
	left, err := tickwire.New(tickwire.Config{Link: rec, MAC: a.MAC(), Addr: netip.MustParsePrefix("10.9.0.1/24")})
	if err != nil {
		t.Fatal(err)
	}
	right, err := tickwire.New(tickwire.Config{Link: b, Addr: netip.MustParsePrefix("10.9.0.2/24")})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := right.ListenTCP(7)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.Copy(c, c)
			c.Close()
		}
	}()
	ctx := context.Background()
	if _, err := left.Ping(ctx, netip.MustParseAddr("10.9.0.2")); err != nil {
		t.Fatal(err)
	}
	c, err := left.DialTCP(ctx, netip.MustParseAddrPort("10.9.0.2:7"))
	if err != nil {
		t.Fatal(err)
	}
	msg := bytes.Repeat([]byte("record me "), 20000)
	go c.Write(msg)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("echo: %v", err)
	}
	c.Close()
	ln.Close()
	time.Sleep(50 * time.Millisecond)
	left.Close() // closes rec, which finishes the file
	right.Close()
	if err := rec.Err(); err != nil {
		t.Fatal(err)
	}
	st := rec.Stats()
	lst := left.Stats()
	if st.Sent != lst.EthernetTxPackets || st.Received != lst.EthernetRxPackets {
		t.Fatalf("recorder saw %d sent %d received; stack counted %d tx %d rx", st.Sent, st.Received, lst.EthernetTxPackets, lst.EthernetRxPackets)
	}

	r, err := pcap.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.LinkType() != layers.LinkTypeEthernet || r.Format() != pcap.FormatPcapNano {
		t.Fatalf("file %v %v", r.LinkType(), r.Format())
	}
	batch := frame.NewBatch(16, pcap.DefaultSnapLen)
	n, large := 0, 0
	var last int64
	for {
		k, err := r.ReadFrames(batch)
		for _, f := range batch[:k] {
			if f.Time < last {
				t.Fatalf("timestamps go backwards: %d after %d", f.Time, last)
			}
			last = f.Time
			// The pipe offers GSO: the stack sends segments above the MTU,
			// recorded whole, with the checksum the link completes.
			if eth := header.Ethernet(f.Buf[:f.N]); f.N > header.EthernetMinimumSize+int(a.MTU()) && eth.SourceAddress() == tcpip.LinkAddress(a.MAC()) {
				large++
				ip := header.IPv4(f.Buf[header.EthernetMinimumSize:f.N])
				seg := header.TCP(ip.Payload())
				payload := seg[seg.DataOffset():]
				if f.N != f.WireLen || !seg.IsChecksumValid(ip.SourceAddress(), ip.DestinationAddress(), checksum.Checksum(payload, 0), uint16(len(payload))) {
					t.Errorf("recorded a %d-byte segment (%d on the wire) with checksum %#04x", f.N, f.WireLen, seg.Checksum())
				}
			}
		}
		n += k
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if uint64(n) != st.Sent+st.Received {
		t.Fatalf("%d frames in the file, recorder counted %d", n, st.Sent+st.Received)
	}
	if large == 0 {
		t.Error("no segment above the MTU recorded")
	}
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Log("tshark not installed; skipping the tshark check")
		return
	}
	out, err := exec.Command("tshark", "-n", "-r", path, "-Y", "tcp.flags.syn==1 || icmp").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	if s := string(out); strings.Count(s, "\n") != 4 || !strings.Contains(s, "Echo (ping) request") || !strings.Contains(s, "MSS=1408") {
		t.Fatalf("tshark sees:\n%s", s)
	}
}

// TestReplayIntoTickwireStack replays a capture of a host pinging into a
// tickwire stack that has never seen it: the stack answers ARP and ICMP
// from the replayed frames alone.
func TestReplayIntoTickwireStack(t *testing.T) {
	a, b := pipe.New(pipe.Options{})
	rec, err := New(a, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := tickwire.New(tickwire.Config{Link: rec, MAC: a.MAC(), Addr: netip.MustParsePrefix("10.9.0.1/24")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	replies := make(chan []byte, 16)
	b.Peer().SetSniffer(func(f []byte) { replies <- append([]byte(nil), f...) })

	// The capture: who-has 10.9.0.1, then an echo request, 1 ms apart.
	host := tcpip.AddrFrom4([4]byte{10, 9, 0, 2})
	arp := arpRequestFrame(tcpip.AddrFrom4([4]byte{10, 9, 0, 1}))
	echo := make([]byte, header.EthernetMinimumSize+header.IPv4MinimumSize+header.ICMPv4MinimumSize+8)
	header.Ethernet(echo).Encode(&header.EthernetFields{SrcAddr: macB, DstAddr: tcpip.LinkAddress(a.MAC()), Type: header.IPv4ProtocolNumber})
	ip := header.IPv4(echo[header.EthernetMinimumSize:])
	ip.Encode(&header.IPv4Fields{TotalLength: uint16(len(ip)), TTL: 64, Protocol: uint8(header.ICMPv4ProtocolNumber),
		SrcAddr: host, DstAddr: tcpip.AddrFrom4([4]byte{10, 9, 0, 1})})
	ip.SetChecksum(^ip.CalculateChecksum())
	icmp := header.ICMPv4(ip.Payload())
	icmp.SetType(header.ICMPv4Echo)
	icmp.SetIdent(77)
	icmp.SetSequence(1)
	icmp.SetChecksum(^checksum.Checksum(icmp, 0))
	var capture bytes.Buffer
	w, _ := pcap.NewWriter(&capture, layers.LinkTypeEthernet, 0)
	w.WriteFrame(1e18, arp, 0)
	w.WriteFrame(1e18+1e6, echo, 0)
	w.Flush()
	src, err := pcap.NewReader(&capture)
	if err != nil {
		t.Fatal(err)
	}
	var progress []pcap.ReplayResult
	res, err := (&pcap.Replayer{Speed: 1, Progress: func(r pcap.ReplayResult) { progress = append(progress, r) }}).Replay(context.Background(), src, rec)
	if err != nil || res.Frames != 2 || len(progress) != 1 {
		t.Fatalf("replay %+v %v (progress %v)", res, err, progress)
	}
	var sawARP, sawEcho bool
	for !(sawARP && sawEcho) {
		select {
		case f := <-replies:
			switch header.Ethernet(f).Type() {
			case header.ARPProtocolNumber:
				sawARP = header.ARP(f[header.EthernetMinimumSize:]).Op() == header.ARPReply
			case header.IPv4ProtocolNumber:
				r := header.ICMPv4(header.IPv4(f[header.EthernetMinimumSize:]).Payload())
				sawEcho = r.Type() == header.ICMPv4EchoReply && r.Ident() == 77
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("stack did not answer the replayed frames (ARP %v, echo %v); stats %+v", sawARP, sawEcho, s.Stats())
		}
	}
	if st := s.Stats(); st.ICMPEchoRequestsRx != 1 || st.ARPRequestsRx != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// BenchmarkReplayIntoStack replays a capture of 1024 UDP frames into a
// tickwire stack through InjectFrame (the stack drops them: not its address).
func BenchmarkReplayIntoStack(b *testing.B) {
	a, _ := pipe.New(pipe.Options{})
	rec, err := New(a, nil)
	if err != nil {
		b.Fatal(err)
	}
	s, err := tickwire.New(tickwire.Config{Link: rec, MAC: a.MAC(), Addr: netip.MustParsePrefix("10.9.0.1/24")})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	f := make([]byte, header.EthernetMinimumSize+header.IPv4MinimumSize+8+64)
	header.Ethernet(f).Encode(&header.EthernetFields{SrcAddr: macB, DstAddr: tcpip.LinkAddress(a.MAC()), Type: header.IPv4ProtocolNumber})
	ip := header.IPv4(f[header.EthernetMinimumSize:])
	ip.Encode(&header.IPv4Fields{TotalLength: uint16(len(ip)), TTL: 64, Protocol: uint8(header.UDPProtocolNumber),
		SrcAddr: tcpip.AddrFrom4([4]byte{10, 9, 0, 2}), DstAddr: tcpip.AddrFrom4([4]byte{10, 9, 0, 3})})
	ip.SetChecksum(^ip.CalculateChecksum())
	var capture bytes.Buffer
	w, _ := pcap.NewWriter(&capture, layers.LinkTypeEthernet, 0)
	for i := range 1024 {
		w.WriteFrame(int64(i), f, 0)
	}
	w.Flush()
	file := capture.Bytes()
	b.SetBytes(int64(1024 * len(f)))
	b.ReportAllocs()
	for range b.N {
		src, _ := pcap.NewReader(bytes.NewReader(file))
		if res, err := (&pcap.Replayer{}).Replay(context.Background(), src, rec); err != nil || res.Frames != 1024 {
			b.Fatal(res, err)
		}
	}
}
