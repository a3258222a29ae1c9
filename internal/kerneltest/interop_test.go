//go:build linux

package kerneltest_test

// Kernel interop: the Linux kernel is the peer of a tickwire stack, through a
// TAP device inside a network namespace that each test creates. Needs root;
// skips otherwise.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/internal/kerneltest"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/pcap"
	"github.com/tickwire/tickwire/link/pcap/recorder"
	"github.com/tickwire/tickwire/link/tap"
)

var (
	kernelIP = netip.MustParseAddr("10.201.0.1")
	stackIP  = netip.MustParseAddr("10.201.0.2")
)

const echoPort = 7

var bcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// peer is a tickwire stack on a TAP device whose kernel side lives in a
// namespace of its own, recorded to a pcap file.
type peer struct {
	ns        *kerneltest.Netns
	dev       string
	ep        *tap.Endpoint
	rec       *recorder.Endpoint
	s         *tickwire.Stack
	pcapPath  string
	kernelMAC net.HardwareAddr
}

// busyPoll is Config.BusyPoll in latency mode: TICKWIRE_BUSYPOLL, a
// duration such as "20us", 0 when unset.
var busyPoll, _ = time.ParseDuration(os.Getenv("TICKWIRE_BUSYPOLL"))

func newPeer(t testing.TB) *peer {
	t.Helper()
	return newPeerTap(t, tap.Config{})
}

// newPeerTap is newPeer with the TAP device configured as cfg says (Name and
// Host are the peer's own).
func newPeerTap(t testing.TB, cfg tap.Config) *peer {
	t.Helper()
	kerneltest.RequireRoot(t)
	p := &peer{ns: kerneltest.NewNetns(t, "twl"), dev: kerneltest.Name("twl")}
	// IPv6 off for devices made in the namespace: only the test's frames
	// cross the device.
	p.ns.DisableIPv6(t)
	if err := p.ns.Do(func() error {
		var err error
		cfg.Name, cfg.Host = p.dev, netip.PrefixFrom(kernelIP, 24)
		if p.ep, err = tap.New(cfg); err != nil {
			return err
		}
		ifi, err := net.InterfaceByName(p.dev)
		if err != nil {
			return err
		}
		p.kernelMAC = ifi.HardwareAddr
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	p.pcapPath = filepath.Join(t.TempDir(), "wire.pcap")
	var err error
	if p.rec, err = recorder.Create(p.ep, p.pcapPath); err != nil {
		p.ep.Close()
		t.Fatal(err)
	}
	p.s, err = tickwire.New(tickwire.Config{
		Link:    p.rec,
		MAC:     p.ep.MAC(),
		Addr:    netip.PrefixFrom(stackIP, 24),
		Gateway: kernelIP,
		// CI runs the suite a second time in latency mode (.ci/run).
		Latency:  os.Getenv("TICKWIRE_LATENCY") == "1",
		BusyPoll: busyPoll,
	})
	if err != nil {
		p.rec.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.s.Close()
		if err := p.rec.Err(); err != nil {
			t.Errorf("recording: %v", err)
		}
	})
	kerneltest.ServeEcho(t, p.s, echoPort)
	return p
}

// kernelDial opens a kernel socket inside the namespace.
func (p *peer) kernelDial(t testing.TB, network, addr string) net.Conn {
	t.Helper()
	var c net.Conn
	if err := p.ns.Do(func() (err error) {
		c, err = net.DialTimeout(network, addr, 5*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// echoRoundTrip sends size random bytes through c and checks that the same
// bytes come back, writing and reading concurrently. It returns the time
// taken.
func echoRoundTrip(t testing.TB, c net.Conn, size int) time.Duration {
	t.Helper()
	msg := make([]byte, size)
	rand.Read(msg)
	c.SetDeadline(time.Now().Add(60 * time.Second))
	defer c.SetDeadline(time.Time{})
	start := time.Now()
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(msg)
		werr <- err
	}()
	got := make([]byte, size)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("echo read after %v: %v", time.Since(start), err)
	}
	d := time.Since(start)
	if err := <-werr; err != nil {
		t.Fatalf("echo write: %v", err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("echoed bytes differ")
	}
	return d
}

// sendFrames transmits raw Ethernet frames from the kernel side of the TAP
// (an AF_PACKET socket in the namespace), as a misbehaving host would. It
// returns how many the kernel accepted.
func (p *peer) sendFrames(t testing.TB, frames [][]byte) int {
	t.Helper()
	sent := 0
	if err := p.ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		ifi, err := net.InterfaceByName(p.dev)
		if err != nil {
			return err
		}
		sa := &unix.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6}
		for _, f := range frames {
			for {
				err = unix.Sendto(fd, f, 0, sa)
				if !errors.Is(err, unix.ENOBUFS) {
					break
				}
				time.Sleep(time.Millisecond) // device queue full: let the stack drain it
			}
			if err != nil {
				return fmt.Errorf("sendto: %w", err)
			}
			sent++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return sent
}

// waitStats polls the stack's counters until cond holds or 5 s pass.
func (p *peer) waitStats(t testing.TB, what string, cond func(tickwire.Stats) bool) tickwire.Stats {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := p.s.Stats()
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: stats %+v", what, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Frame builders for the kernel side.

func ethernet(dst, src net.HardwareAddr, typ tcpip.NetworkProtocolNumber, payload []byte) []byte {
	f := make([]byte, header.EthernetMinimumSize+len(payload))
	header.Ethernet(f).Encode(&header.EthernetFields{SrcAddr: tcpip.LinkAddress(src), DstAddr: tcpip.LinkAddress(dst), Type: typ})
	copy(f[header.EthernetMinimumSize:], payload)
	return f
}

func ipv4Packet(src, dst netip.Addr, proto uint8, id uint16, payload []byte) []byte {
	b := make([]byte, header.IPv4MinimumSize+len(payload))
	ip := header.IPv4(b)
	ip.Encode(&header.IPv4Fields{
		TotalLength: uint16(len(b)), ID: id, TTL: 64, Protocol: proto,
		SrcAddr: tcpip.AddrFrom4(src.As4()), DstAddr: tcpip.AddrFrom4(dst.As4()),
	})
	ip.SetChecksum(^ip.CalculateChecksum())
	copy(b[header.IPv4MinimumSize:], payload)
	return b
}

type tcpSeg struct {
	src, dst         netip.Addr
	srcPort, dstPort uint16
	seq, ack         uint32
	flags            header.TCPFlags
	payload          []byte
	badChecksum      bool
}

func (s tcpSeg) bytes() []byte {
	b := make([]byte, header.TCPMinimumSize+len(s.payload))
	tcp := header.TCP(b)
	tcp.Encode(&header.TCPFields{
		SrcPort: s.srcPort, DstPort: s.dstPort, SeqNum: s.seq, AckNum: s.ack,
		DataOffset: header.TCPMinimumSize, Flags: s.flags, WindowSize: 65535,
	})
	copy(b[header.TCPMinimumSize:], s.payload)
	xsum := header.PseudoHeaderChecksum(header.TCPProtocolNumber, tcpip.AddrFrom4(s.src.As4()), tcpip.AddrFrom4(s.dst.As4()), uint16(len(b)))
	xsum = checksum.Checksum(s.payload, xsum)
	sum := ^tcp.CalculateChecksum(xsum)
	if s.badChecksum {
		sum ^= 0x5a5a
	}
	tcp.SetChecksum(sum)
	return b
}

func (p *peer) tcpFrame(s tcpSeg) []byte {
	return ethernet(p.ep.MAC(), p.kernelMAC, header.IPv4ProtocolNumber,
		ipv4Packet(s.src, s.dst, uint8(header.TCPProtocolNumber), 1, s.bytes()))
}

// Tests.

func TestKernelPingAndARPBothWays(t *testing.T) {
	kerneltest.RequireTool(t, "ping")
	p := newPeer(t)

	// The stack resolves the kernel first: its own ARP request, the
	// kernel's reply.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := p.s.Ping(ctx, kernelIP); err != nil {
		t.Fatalf("stack pings kernel: %v", err)
	}
	// Now the kernel pings the stack.
	p.ns.MustRun(t, "ping", "-c", "3", "-i", "0.2", "-W", "2", stackIP.String())

	// netstack counts a reply once it has left, so ping may have it
	// before the counter moves.
	st := p.waitStats(t, "ICMP stats", func(st tickwire.Stats) bool {
		return st.ICMPEchoRequestsRx >= 3 && st.ICMPEchoRepliesTx >= 3 && st.ICMPEchoRepliesRx >= 1
	})
	if st.ARPRequestsTx < 1 || st.ARPRepliesRx < 1 || st.ARPEntries < 1 {
		t.Fatalf("the stack did not resolve the kernel by ARP: %+v", st)
	}
	// The kernel knows the stack's MAC: it learnt it from the stack's
	// request, or asked itself (then the stack counted the request).
	neigh := string(p.ns.MustRun(t, "ip", "neigh", "show", stackIP.String(), "dev", p.dev))
	if !strings.Contains(neigh, "lladdr "+p.ep.MAC().String()) || strings.Contains(neigh, "FAILED") {
		t.Fatalf("kernel neighbor entry for the stack: %q", neigh)
	}
	t.Logf("kernel neighbor: %s; stack ARP: %d requests tx, %d replies rx, %d requests rx, %d replies tx",
		strings.TrimSpace(neigh), st.ARPRequestsTx, st.ARPRepliesRx, st.ARPRequestsRx, st.ARPRepliesTx)

	// Make the kernel ask: flush its entry and ping again.
	p.ns.MustRun(t, "ip", "neigh", "flush", "dev", p.dev)
	before := p.s.Stats()
	p.ns.MustRun(t, "ping", "-c", "1", "-W", "2", stackIP.String())
	p.waitStats(t, "kernel's ARP request not answered", func(st tickwire.Stats) bool {
		return st.ARPRequestsRx > before.ARPRequestsRx && st.ARPRepliesTx > before.ARPRepliesTx
	})
}

// TestKernelTCPClientEcho exchanges 1 MiB and 10 MiB with the stack's echo
// server from a kernel TCP socket, byte-exact, and logs the times.
func TestKernelTCPClientEcho(t *testing.T) {
	p := newPeer(t)
	for _, size := range []int{1 << 20, 10 << 20} {
		c := p.kernelDial(t, "tcp", netip.AddrPortFrom(stackIP, echoPort).String())
		d := echoRoundTrip(t, c, size)
		t.Logf("kernel client, %d MiB echoed through the stack over TAP: %v (%.1f MB/s each way)",
			size>>20, d, float64(size)/d.Seconds()/1e6)
		c.Close()
	}
	// The kernel hands the stream over in TSO segments (link/tap's
	// TUN_F_TSO4) larger than the MTU: on average, frames larger than a
	// full 1514-byte one.
	if st := p.ep.Stats(); st.RxFrames == 0 || st.RxBytes/st.RxFrames <= 1514 {
		t.Errorf("TAP received %d frames, %d bytes: no TSO segment", st.RxFrames, st.RxBytes)
	}
	// The echo goes back the same way: the stack sends TSO segments
	// (tap's GSO), which the kernel takes whole.
	if st := p.ep.Stats(); st.TxFrames == 0 || st.TxBytes/st.TxFrames <= 1514 || st.TxDropped != 0 {
		t.Errorf("TAP sent %d frames, %d bytes, dropped %d: no TSO segment", st.TxFrames, st.TxBytes, st.TxDropped)
	}
}

// TestStackDialsKernel connects from the stack to a kernel listener and
// checks data both ways.
func TestStackDialsKernel(t *testing.T) {
	p := newPeer(t)
	var ln net.Listener
	if err := p.ns.Do(func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(kernelIP, 9000).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		io.Copy(c, c)
		c.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := p.s.DialTCP(ctx, netip.AddrPortFrom(kernelIP, 9000))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d := echoRoundTrip(t, c, 1<<20)
	t.Logf("stack client, 1 MiB echoed by the kernel over TAP: %v", d)
	if st := p.s.Stats(); st.ConnsDialed != 1 {
		t.Fatalf("ConnsDialed %d", st.ConnsDialed)
	}
}

func TestUDPBothWays(t *testing.T) {
	p := newPeer(t)
	// Kernel to stack: the stack echoes.
	c := p.kernelDial(t, "udp", netip.AddrPortFrom(stackIP, echoPort).String())
	c.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2048)
	for i := range 3 {
		msg := fmt.Sprintf("kernel datagram %d", i)
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		n, err := c.Read(buf)
		if err != nil || string(buf[:n]) != msg {
			t.Fatalf("stack echo: %q %v", buf[:n], err)
		}
	}

	// Stack to kernel: a kernel socket answers.
	var kpc net.PacketConn
	if err := p.ns.Do(func() (err error) {
		kpc, err = net.ListenPacket("udp", netip.AddrPortFrom(kernelIP, 9001).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer kpc.Close()
	u, err := p.s.DialUDP(netip.AddrPortFrom(kernelIP, 9001))
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	big := bytes.Repeat([]byte{0xab}, 1400)
	if _, err := u.Write(big); err != nil {
		t.Fatal(err)
	}
	kpc.SetDeadline(time.Now().Add(5 * time.Second))
	n, from, err := kpc.ReadFrom(buf)
	if err != nil || !bytes.Equal(buf[:n], big) {
		t.Fatalf("kernel received %d bytes, %v", n, err)
	}
	if from.(*net.UDPAddr).IP.String() != stackIP.String() {
		t.Fatalf("datagram from %v", from)
	}
	kpc.WriteTo([]byte("reply"), from)
	u.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := u.Read(buf); err != nil || string(buf[:n]) != "reply" {
		t.Fatalf("stack received %q %v", buf[:n], err)
	}
	if st := p.s.Stats(); st.UDPRxPackets < 4 || st.UDPTxPackets < 4 {
		t.Fatalf("UDP stats %+v", st)
	}
}

// TestBadTCPChecksumDropped sends SYNs with a wrong TCP checksum from the
// kernel side: they are dropped and counted, and draw no answer.
func TestBadTCPChecksumDropped(t *testing.T) {
	p := newPeer(t)
	// Warm up ARP so the stack has nothing else to say.
	c := p.kernelDial(t, "tcp", netip.AddrPortFrom(stackIP, echoPort).String())
	echoRoundTrip(t, c, 100)
	time.Sleep(300 * time.Millisecond) // delayed ACKs settle: the stack has nothing left to send
	before := p.s.Stats()
	const n = 5
	var frames [][]byte
	for i := range n {
		frames = append(frames, p.tcpFrame(tcpSeg{src: kernelIP, dst: stackIP, srcPort: uint16(40000 + i), dstPort: echoPort,
			seq: 1000, flags: header.TCPFlagSyn, badChecksum: true}))
	}
	p.sendFrames(t, frames)
	st := p.waitStats(t, "bad checksums counted", func(st tickwire.Stats) bool {
		return st.DropTCPChecksum >= before.DropTCPChecksum+n
	})
	time.Sleep(100 * time.Millisecond)
	if after := p.s.Stats(); after.TCPTxPackets != before.TCPTxPackets {
		t.Fatalf("stack answered a segment with a bad checksum: TCP tx %d -> %d", before.TCPTxPackets, after.TCPTxPackets)
	}
	t.Logf("DropTCPChecksum %d -> %d", before.DropTCPChecksum, st.DropTCPChecksum)

	// The same SYN with a good checksum is answered (so the drop above was
	// the checksum's doing).
	good := p.tcpFrame(tcpSeg{src: kernelIP, dst: stackIP, srcPort: 40100, dstPort: echoPort, seq: 1000, flags: header.TCPFlagSyn})
	p.sendFrames(t, [][]byte{good})
	p.waitStats(t, "good SYN answered", func(st tickwire.Stats) bool { return st.TCPTxPackets > before.TCPTxPackets })
}

// TestMalformedFramesLeaveStackServing sends broken frames of every kind and
// checks that the stack counts them and still echoes.
func TestMalformedFramesLeaveStackServing(t *testing.T) {
	p := newPeer(t)
	c := p.kernelDial(t, "tcp", netip.AddrPortFrom(stackIP, echoPort).String())
	echoRoundTrip(t, c, 1000)
	before := p.s.Stats()

	validTCP := func(flags header.TCPFlags) []byte {
		return ipv4Packet(kernelIP, stackIP, uint8(header.TCPProtocolNumber), 7,
			tcpSeg{src: kernelIP, dst: stackIP, srcPort: 41000, dstPort: echoPort, seq: 1, flags: flags}.bytes())
	}
	eth := func(payload []byte) []byte {
		return ethernet(p.ep.MAC(), p.kernelMAC, header.IPv4ProtocolNumber, payload)
	}
	mutate := func(b []byte, f func([]byte)) []byte { b = append([]byte(nil), b...); f(b); return b }
	fixIPSum := func(b []byte) {
		ip := header.IPv4(b)
		ip.SetChecksum(0)
		ip.SetChecksum(^checksum.Checksum(b[:int(b[0]&0xf)*4], 0))
	}
	udp := make([]byte, 8+100)
	binary.BigEndian.PutUint16(udp[0:], 5000)
	binary.BigEndian.PutUint16(udp[2:], echoPort)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	fragment := func(offset8 uint16, more bool, data []byte) []byte {
		return mutate(ipv4Packet(kernelIP, stackIP, uint8(header.UDPProtocolNumber), 99, data), func(b []byte) {
			flags := offset8
			if more {
				flags |= 0x2000
			}
			binary.BigEndian.PutUint16(b[6:], flags)
			fixIPSum(b)
		})
	}

	malformed := map[string][]byte{
		"runt (header only)":        ethernet(p.ep.MAC(), p.kernelMAC, header.IPv4ProtocolNumber, nil),
		"IPv6 ethertype":            ethernet(p.ep.MAC(), p.kernelMAC, header.IPv6ProtocolNumber, make([]byte, 60)),
		"LLDP ethertype":            ethernet(bcast, p.kernelMAC, 0x88cc, make([]byte, 46)),
		"truncated IPv4 header":     eth(validTCP(header.TCPFlagSyn)[:12]),
		"IHL below 5":               eth(mutate(validTCP(header.TCPFlagSyn), func(b []byte) { b[0] = 0x43; fixIPSum(b) })),
		"total length too big":      eth(mutate(validTCP(header.TCPFlagSyn), func(b []byte) { binary.BigEndian.PutUint16(b[2:], 1400); fixIPSum(b) })),
		"total length below header": eth(mutate(validTCP(header.TCPFlagSyn), func(b []byte) { binary.BigEndian.PutUint16(b[2:], 10); fixIPSum(b) })),
		"bad IPv4 checksum":         eth(mutate(validTCP(header.TCPFlagSyn), func(b []byte) { b[10] ^= 0xff })),
		"IPv4 version 5":            eth(mutate(validTCP(header.TCPFlagSyn), func(b []byte) { b[0] = 0x55; fixIPSum(b) })),
		"truncated TCP header":      eth(mutate(validTCP(header.TCPFlagSyn)[:30], func(b []byte) { binary.BigEndian.PutUint16(b[2:], 30); fixIPSum(b) })),
		"TCP data offset 2":         eth(mutate(validTCP(header.TCPFlagSyn), func(b []byte) { b[20+12] = 2 << 4 })),
		"TCP SYN+FIN":               eth(validTCP(header.TCPFlagSyn | header.TCPFlagFin)),
		"TCP SYN+RST":               eth(validTCP(header.TCPFlagSyn | header.TCPFlagRst)),
		"TCP no flags":              eth(validTCP(0)),
		"TCP all flags":             eth(validTCP(0x3f)),
		"first fragment":            eth(fragment(0, true, udp[:48])),
		"middle fragment":           eth(fragment(6, true, udp[48:96])),
		"overlapping fragment":      eth(fragment(2, false, udp[16:])),
		"lone last fragment":        eth(fragment(100, false, udp[:40])),
		"ARP truncated":             ethernet(bcast, p.kernelMAC, header.ARPProtocolNumber, make([]byte, 10)),
		"ARP bad hardware type":     ethernet(bcast, p.kernelMAC, header.ARPProtocolNumber, bytes.Repeat([]byte{0xff}, 28)),
		"ICMP truncated":            eth(ipv4Packet(kernelIP, stackIP, uint8(header.ICMPv4ProtocolNumber), 3, []byte{8, 0})),
		"UDP length lies":           eth(ipv4Packet(kernelIP, stackIP, uint8(header.UDPProtocolNumber), 4, mutate(udp, func(b []byte) { binary.BigEndian.PutUint16(b[4:], 3000) }))),
		"unknown IP protocol":       eth(ipv4Packet(kernelIP, stackIP, 253, 5, make([]byte, 20))),
	}
	var frames [][]byte
	for round := range 20 { // enough to matter, in varied order
		for name, f := range malformed {
			if round == 0 {
				t.Logf("sending %-26s %4d bytes", name, len(f))
			}
			frames = append(frames, f)
		}
	}
	p.sendFrames(t, frames)
	time.Sleep(200 * time.Millisecond)

	// Still serving: the old connection and a new one.
	echoRoundTrip(t, c, 64<<10)
	c2 := p.kernelDial(t, "tcp", netip.AddrPortFrom(stackIP, echoPort).String())
	echoRoundTrip(t, c2, 64<<10)

	st := p.s.Stats()
	if st.DropEtherType <= before.DropEtherType || st.DropIPv4Checksum <= before.DropIPv4Checksum ||
		st.DropIPv4Malformed <= before.DropIPv4Malformed {
		t.Fatalf("malformed frames not counted: before %+v\nafter %+v", before, st)
	}
	t.Logf("drops: ethertype +%d, IPv4 checksum +%d, IPv4 malformed +%d, TCP invalid +%d, ARP malformed +%d, ICMP invalid +%d, UDP malformed +%d, total +%d",
		st.DropEtherType-before.DropEtherType, st.DropIPv4Checksum-before.DropIPv4Checksum,
		st.DropIPv4Malformed-before.DropIPv4Malformed, st.DropTCPInvalid-before.DropTCPInvalid,
		st.DropARPMalformed-before.DropARPMalformed, st.DropICMPInvalid-before.DropICMPInvalid,
		st.DropUDPMalformed-before.DropUDPMalformed, st.DropTotal-before.DropTotal)
}

// TestSYNFloodLeavesStackServing floods the echo port with SYNs from spoofed
// sources beyond the gateway: an established connection keeps echoing and a
// new one still gets in.
func TestSYNFloodLeavesStackServing(t *testing.T) {
	p := newPeer(t)
	c := p.kernelDial(t, "tcp", netip.AddrPortFrom(stackIP, echoPort).String())
	echoRoundTrip(t, c, 1000)

	const flood = 5000
	// A longer device queue: fewer SYNs lost before the stack reads them.
	p.ns.MustRun(t, "ip", "link", "set", "dev", p.dev, "txqueuelen", "10000")
	frames := make([][]byte, flood)
	var rnd [8]byte
	for i := range frames {
		rand.Read(rnd[:])
		src := netip.AddrFrom4([4]byte{198, 18, rnd[0], rnd[1] | 1})
		frames[i] = p.tcpFrame(tcpSeg{src: src, dst: stackIP, srcPort: binary.BigEndian.Uint16(rnd[2:]) | 1024,
			dstPort: echoPort, seq: binary.BigEndian.Uint32(rnd[4:]), flags: header.TCPFlagSyn})
	}
	// Flood while the established connection is in use.
	done := make(chan int)
	go func() { done <- p.sendFrames(t, frames) }()
	echoRoundTrip(t, c, 256<<10)
	sent := <-done

	echoRoundTrip(t, c, 256<<10)
	c2 := p.kernelDial(t, "tcp", netip.AddrPortFrom(stackIP, echoPort).String())
	echoRoundTrip(t, c2, 256<<10)
	st := p.s.Stats()
	t.Logf("%d spoofed SYNs sent; stack: %d SYN cookies sent, %d listen-queue drops, %d connections open, %d accepted, %d refused",
		sent, st.TCPSYNCookiesTx, st.DropTCPListenFull, st.ConnsOpen, st.ConnsAccepted, st.ConnsRefused)
	// The device queue may drop part of a burst (more so under -race), but
	// the stack must have taken far more SYNs than its 64-entry SYN queue.
	if st.TCPRxPackets < 1000 {
		t.Fatalf("the flood did not reach the stack: %d TCP frames received", st.TCPRxPackets)
	}
	if st.ConnsRefused != 0 {
		t.Fatalf("half-open connections used up the connection budget: %d refused", st.ConnsRefused)
	}
}

// TestMSSOnTheWire checks, on the frames the kernel exchanged with the stack,
// that the stack's SYN and SYN-ACK advertise MSS 1408 and that its full
// data segments carry exactly 1408 bytes. The TAP does no TSO, so the
// segments it carries are the wire's; with TSO the kernel cuts the stack's
// large segments at the MSS the stack gave (TestTxHeaderTSO in link/tap).
func TestMSSOnTheWire(t *testing.T) {
	p := newPeerTap(t, tap.Config{NoTSO: true})
	// The kernel dials (the stack answers with SYN-ACK) and the stack
	// echoes 1 MiB back: full-size segments from the stack.
	c := p.kernelDial(t, "tcp", netip.AddrPortFrom(stackIP, echoPort).String())
	echoRoundTrip(t, c, 1<<20)
	// The stack dials (the stack sends the SYN).
	var ln net.Listener
	if err := p.ns.Do(func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(kernelIP, 9002).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if k, err := ln.Accept(); err == nil {
			io.Copy(io.Discard, k)
			k.Close()
		}
	}()
	sc, err := p.s.DialTCP(context.Background(), netip.AddrPortFrom(kernelIP, 9002))
	if err != nil {
		t.Fatal(err)
	}
	sc.Close()
	if err := p.rec.Flush(); err != nil {
		t.Fatal(err)
	}

	r, err := pcap.Open(p.pcapPath)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	batch := frame.NewBatch(64, 2048)
	var syn, synAck, kernelSyn uint16
	var largest, full int
	stackMAC := p.ep.MAC().String()
	for {
		n, rerr := r.ReadFrames(batch)
		for _, f := range batch[:n] {
			pkt := gopacket.NewPacket(f.Data(), layers.LayerTypeEthernet, gopacket.NoCopy)
			eth, _ := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
			tl, ok := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
			if !ok || eth == nil {
				continue
			}
			fromStack := eth.SrcMAC.String() == stackMAC
			if tl.SYN {
				mss := mssOption(tl)
				switch {
				case fromStack && tl.ACK:
					synAck = mss
				case fromStack:
					syn = mss
				default:
					kernelSyn = mss
				}
			}
			if fromStack && len(tl.Payload) > 0 {
				largest = max(largest, len(tl.Payload))
				if len(tl.Payload) == tickwire.DefaultMSS {
					full++
				}
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			t.Fatal(rerr)
		}
	}
	t.Logf("MSS: stack SYN %d, stack SYN-ACK %d, kernel SYN %d; largest stack segment %d bytes, %d full segments",
		syn, synAck, kernelSyn, largest, full)
	if syn != 1408 || synAck != 1408 {
		t.Fatalf("stack advertised MSS %d (SYN) and %d (SYN-ACK), want 1408", syn, synAck)
	}
	if largest != 1408 || full == 0 {
		t.Fatalf("largest data segment from the stack %d bytes, want 1408", largest)
	}
}

func mssOption(tl *layers.TCP) uint16 {
	for _, o := range tl.Options {
		if o.OptionType == layers.TCPOptionKindMSS && len(o.OptionData) == 2 {
			return binary.BigEndian.Uint16(o.OptionData)
		}
	}
	return 0
}

// TestFramesForOtherHostsIgnored sends a frame addressed to another MAC (as
// a kernel with a stale neighbor entry would): the link must keep
// receiving. (The kernel refuses to send runts shorter than an Ethernet
// header through the device.)
func TestFramesForOtherHostsIgnored(t *testing.T) {
	p := newPeer(t)
	c := p.kernelDial(t, "tcp", netip.AddrPortFrom(stackIP, echoPort).String())
	echoRoundTrip(t, c, 1000)
	other := net.HardwareAddr{0x02, 0x99, 0x99, 0x99, 0x99, 0x99}
	seg := tcpSeg{src: kernelIP, dst: stackIP, srcPort: 42000, dstPort: echoPort, seq: 1, flags: header.TCPFlagSyn}
	frames := [][]byte{
		ethernet(other, p.kernelMAC, header.IPv4ProtocolNumber, ipv4Packet(kernelIP, stackIP, uint8(header.TCPProtocolNumber), 1, seg.bytes())),
	}
	p.sendFrames(t, frames)
	time.Sleep(100 * time.Millisecond)
	echoRoundTrip(t, c, 64<<10)
}

// TestStackCloseOverTAP checks that closing a stack that served the kernel
// removes the device and leaves no goroutine behind.
func TestStackCloseOverTAP(t *testing.T) {
	kerneltest.RequireRoot(t)
	ignore := goleak.IgnoreCurrent()
	p := newPeer(t)
	c := p.kernelDial(t, "tcp", netip.AddrPortFrom(stackIP, echoPort).String())
	echoRoundTrip(t, c, 64<<10)
	p.s.Close()
	if out, err := p.ns.Run("ip", "link", "show", "dev", p.dev); err == nil {
		t.Fatalf("device still there after Stack.Close: %s", out)
	}
	c.Close()
	goleak.VerifyNone(t, ignore)
}

// BenchmarkKernelEcho measures a kernel TCP client echoing 1 MiB through the
// stack over TAP (bytes/s counts one direction).
func BenchmarkKernelEcho(b *testing.B) {
	for _, size := range []int{1 << 20, 10 << 20} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			p := newPeer(b)
			c := p.kernelDial(b, "tcp", netip.AddrPortFrom(stackIP, echoPort).String())
			msg := make([]byte, size)
			got := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				go c.Write(msg)
				if _, err := io.ReadFull(c, got); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
