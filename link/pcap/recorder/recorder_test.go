package recorder

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/refs"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/link/ethernet"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"

	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/pcap"
)

func TestMain(m *testing.M) {
	refs.SetLeakMode(refs.LeaksPanic)
	code := m.Run()
	refs.DoLeakCheck()
	os.Exit(code)
}

var (
	macA  = tcpip.LinkAddress("\x02\x00\x00\x00\x00\x0a")
	macB  = tcpip.LinkAddress("\x02\x00\x00\x00\x00\x0b")
	addrA = tcpip.AddrFrom4([4]byte{10, 9, 0, 1})
	addrB = tcpip.AddrFrom4([4]byte{10, 9, 0, 2})
)

func newStack(t *testing.T, ep stack.LinkEndpoint, addr tcpip.Address) *stack.Stack {
	t.Helper()
	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, icmp.NewProtocol4},
	})
	if err := s.CreateNIC(1, ep); err != nil {
		t.Fatal(err)
	}
	pa := tcpip.ProtocolAddress{Protocol: ipv4.ProtocolNumber, AddressWithPrefix: addr.WithPrefix()}
	pa.AddressWithPrefix.PrefixLen = 24
	if err := s.AddProtocolAddress(1, pa, stack.AddressProperties{}); err != nil {
		t.Fatal(err)
	}
	s.SetRouteTable([]tcpip.Route{{Destination: pa.AddressWithPrefix.Subnet(), NIC: 1}})
	return s
}

// shuttle moves frames written on from into to's inbound path, as a wire
// would, until ctx is done, counting them.
func shuttle(ctx context.Context, from, to *channel.Endpoint, n *atomic.Int64, wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		pkt := from.ReadContext(ctx)
		if pkt == nil {
			return
		}
		in := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: pkt.ToBuffer()})
		pkt.DecRef()
		n.Add(1)
		to.InjectInbound(0, in)
		in.DecRef()
	}
}

// TestRecordTCPExchange records a real TCP exchange between two netstack
// stacks and checks the file with gopacket and tshark.
func TestRecordTCPExchange(t *testing.T) {
	chA, chB := channel.New(1024, 1500, macA), channel.New(1024, 1500, macB)
	path := filepath.Join(t.TempDir(), "exchange.pcap")
	rec, err := Create(ethernet.New(chA), path)
	if err != nil {
		t.Fatal(err)
	}
	sA, sB := newStack(t, rec, addrA), newStack(t, ethernet.New(chB), addrB)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var aToB, bToA atomic.Int64
	wg.Add(2)
	go shuttle(ctx, chA, chB, &aToB, &wg)
	go shuttle(ctx, chB, chA, &bToA, &wg)

	ln, err := gonet.ListenTCP(sB, tcpip.FullAddress{NIC: 1, Addr: addrB, Port: 7}, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		io.Copy(c, c)
		c.Close()
	}()
	c, err := gonet.DialContextTCP(context.Background(), sA, tcpip.FullAddress{NIC: 1, Addr: addrB, Port: 7}, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	msg := bytes.Repeat([]byte("tickwire"), 8192) // 64 KiB
	go c.Write(msg)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("echo: %v", err)
	}
	c.Close()
	ln.Close()
	time.Sleep(200 * time.Millisecond) // let the FIN exchange finish
	cancel()
	wg.Wait()

	// Every frame that crossed the wire was recorded on its way (A may
	// still be sending timers' segments, so Sent is a lower bound).
	st := rec.Stats()
	if int64(st.Sent) < aToB.Load() || int64(st.Received) != bToA.Load() || st.Lost != 0 {
		t.Fatalf("recorder stats %+v; wire carried %d A->B, %d B->A", st, aToB.Load(), bToA.Load())
	}
	sA.Close()
	sB.Close()
	sA.Wait()
	sB.Wait()
	chA.Drain()
	chB.Drain()
	if err := rec.Err(); err != nil {
		t.Fatal(err)
	}
	st = rec.Stats() // closing may have sent a last segment
	want := int(st.Sent + st.Received)

	// gopacket: right count, every frame decodes as Ethernet, and the
	// handshake is there.
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if r.LinkType() != layers.LinkTypeEthernet || r.Resolution() != gopacket.TimestampResolutionNanosecond {
		t.Fatalf("link type %v resolution %v", r.LinkType(), r.Resolution())
	}
	var n, syns, payload int
	for {
		data, _, err := r.ReadPacketData()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		p := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		if tl, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP); ok {
			if tl.SYN {
				syns++
			}
			payload += len(tl.Payload)
		}
	}
	// Retransmissions may add payload bytes, never remove them.
	if n != want || syns != 2 || payload < 2*len(msg) {
		t.Fatalf("file: %d frames (want %d), %d SYNs (want 2), %d payload bytes (want at least %d)", n, want, syns, payload, 2*len(msg))
	}

	if _, err := exec.LookPath("tshark"); err != nil {
		t.Logf("tshark not installed; skipping the tshark check")
		return
	}
	out, err := exec.Command("tshark", "-n", "-r", path, "-T", "fields", "-e", "frame.number").Output()
	if err != nil {
		t.Fatalf("tshark -r: %v", err)
	}
	lines := strings.Fields(string(out))
	if len(lines) != want || lines[len(lines)-1] != strconv.Itoa(want) {
		t.Fatalf("tshark read %d frames, want %d", len(lines), want)
	}
}

func arpRequestFrame(target tcpip.Address) []byte {
	f := make([]byte, header.EthernetMinimumSize+header.ARPSize)
	header.Ethernet(f).Encode(&header.EthernetFields{SrcAddr: macB, DstAddr: header.EthernetBroadcastAddress, Type: header.ARPProtocolNumber})
	a := header.ARP(f[header.EthernetMinimumSize:])
	a.SetIPv4OverEthernet()
	a.SetOp(header.ARPRequest)
	copy(a.HardwareAddressSender(), macB)
	copy(a.ProtocolAddressSender(), addrB.AsSlice())
	copy(a.ProtocolAddressTarget(), target.AsSlice())
	return f
}

// TestInjectAndReplay replays a capture of one ARP request into a stack
// through the Endpoint and sees the stack's reply on the wire.
func TestInjectAndReplay(t *testing.T) {
	ch := channel.New(16, 1500, macA)
	var file bytes.Buffer
	rec, err := New(ethernet.New(ch), &file)
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.InjectFrame(arpRequestFrame(addrA)); !errors.Is(err, pcap.ErrNotAttached) {
		t.Fatalf("inject before attach: %v", err)
	}
	s := newStack(t, rec, addrA)
	defer func() { s.Close(); s.Wait(); ch.Drain() }()

	var capture bytes.Buffer
	w, _ := pcap.NewWriter(&capture, layers.LinkTypeEthernet, 0)
	w.WriteFrame(1, arpRequestFrame(addrA), 0)
	w.WriteFrame(2, []byte{1, 2, 3}, 0) // too short: rejected, counted
	w.Flush()
	src, err := pcap.NewReader(&capture)
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&pcap.Replayer{}).Replay(context.Background(), src, rec)
	if err != nil || res.Frames != 1 || res.Rejected != 1 {
		t.Fatalf("replay %+v %v", res, err)
	}
	pkt := ch.Read()
	if pkt == nil {
		t.Fatal("no reply to the injected ARP request")
	}
	defer pkt.DecRef()
	v := pkt.ToView()
	defer v.Release()
	reply := v.AsSlice()
	a := header.ARP(reply[header.EthernetMinimumSize:])
	if header.Ethernet(reply).Type() != header.ARPProtocolNumber || a.Op() != header.ARPReply ||
		tcpip.LinkAddress(a.HardwareAddressSender()) != macA {
		t.Fatalf("reply %x is not our ARP reply", reply)
	}
	st := rec.Stats()
	if st.Injected != 1 || st.Rejected != 1 || st.Received != 1 || st.Sent != 1 {
		t.Fatalf("stats %+v", st)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// testPacket builds an outbound Ethernet frame as the stack hands it to the
// link: headers pushed into reserved space, payload in the buffer.
func testPacket(payload int) *stack.PacketBuffer {
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{
		ReserveHeaderBytes: header.EthernetMinimumSize + header.IPv4MinimumSize,
		Payload:            buffer.MakeWithData(make([]byte, payload)),
	})
	ip := header.IPv4(pkt.NetworkHeader().Push(header.IPv4MinimumSize))
	ip.Encode(&header.IPv4Fields{TotalLength: uint16(header.IPv4MinimumSize + payload), TTL: 64, Protocol: 17, SrcAddr: addrA, DstAddr: addrB})
	pkt.NetworkProtocolNumber = header.IPv4ProtocolNumber
	eth := header.Ethernet(pkt.LinkHeader().Push(header.EthernetMinimumSize))
	eth.Encode(&header.EthernetFields{SrcAddr: macA, DstAddr: macB, Type: header.IPv4ProtocolNumber})
	return pkt
}

func TestWriteErrorsCountedNotPanicking(t *testing.T) {
	rec, err := New(ethernet.New(channel.New(16, 1500, macA)), failingWriter{})
	if err != nil {
		t.Fatal(err)
	}
	pkt := testPacket(1400)
	defer pkt.DecRef()
	for range 200 { // enough to overflow the write buffer
		rec.record(pkt, false)
	}
	if rec.Stats().Lost == 0 || rec.Err() == nil || rec.Flush() == nil {
		t.Fatalf("write errors not reported: %+v %v", rec.Stats(), rec.Err())
	}
	rec.Close()
	rec.Close() // idempotent
	rec.record(pkt, false)
}

func TestRecordFrameBytesAndNoAllocs(t *testing.T) {
	var file bytes.Buffer
	rec, err := New(ethernet.New(channel.New(16, 1500, macA)), &file)
	if err != nil {
		t.Fatal(err)
	}
	pkt := testPacket(1000)
	defer pkt.DecRef()
	want := pkt.ToView()
	defer want.Release()
	rec.record(pkt, false)
	if allocs := testing.AllocsPerRun(200, func() { rec.record(pkt, false) }); allocs != 0 {
		t.Errorf("%v allocations per recorded frame, want 0", allocs)
	}
	// Concurrent recording from both paths is serialised (run with -race).
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				rec.record(pkt, g%2 == 0)
			}
		}()
	}
	wg.Wait()
	if err := rec.Finish(); err != nil {
		t.Fatal(err)
	}
	r, err := pcap.NewReader(&file)
	if err != nil {
		t.Fatal(err)
	}
	batch := frame.NewBatch(1, 2048)
	var frames int
	for {
		n, err := r.ReadFrames(batch)
		if n == 1 {
			frames++
			if frames == 1 && !bytes.Equal(batch[0].Data(), want.AsSlice()) {
				t.Fatal("recorded bytes differ from the frame")
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if frames != 602 {
		t.Fatalf("%d frames in the file, want 602", frames)
	}
}

func BenchmarkRecord(b *testing.B) {
	rec, err := New(ethernet.New(channel.New(16, 1500, macA)), io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	pkt := testPacket(1408 + 20)
	defer pkt.DecRef()
	b.SetBytes(int64(pkt.Size()))
	b.ReportAllocs()
	for range b.N {
		rec.record(pkt, false)
	}
}
