//go:build linux

package main

// The demo runs on a TAP device, which only Linux has. The kernel has no
// RoCE of its own here (no rxe), so the kernel-side peer is this test: a
// kernel UDP socket on port 4791 in the namespace, sending hand-built
// InfiniBand transport packets and checking the answers.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tickwire/tickwire/internal/kerneltest"
	"github.com/tickwire/tickwire/rdma"
	"golang.org/x/sys/unix"
)

// proc is a running rdmademo.
type proc struct {
	cmd    *exec.Cmd
	lines  chan string
	out    strings.Builder
	stderr bytes.Buffer
}

// start runs bin in ns and waits for its "ready" line.
func start(t *testing.T, ns *kerneltest.Netns, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: ns.Command(context.Background(), bin, args...), lines: make(chan string, 128)}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.cmd.Wait()
				t.Fatalf("rdmademo exited before ready:\n%s\n%s", p.out.String(), p.stderr.String())
			}
			p.out.WriteString(l + "\n")
			if l == "ready" {
				return p
			}
		case <-timeout:
			t.Fatalf("rdmademo not ready:\n%s\n%s", p.out.String(), p.stderr.String())
		}
	}
}

// info is the JSON line before "ready".
type info struct {
	QPN, PSN, RKey, Addr, Len, MTU uint64
}

func (p *proc) info(t *testing.T) info {
	t.Helper()
	lines := strings.Split(p.out.String(), "\n")
	var in info
	for _, l := range lines {
		if strings.HasPrefix(l, "{") {
			if err := json.Unmarshal([]byte(l), &in); err != nil {
				t.Fatalf("JSON line %q: %v", l, err)
			}
			return in
		}
	}
	t.Fatalf("no JSON line in %q", p.out.String())
	return in
}

// wait waits for the process to exit, optionally signalling it first, and
// returns its whole output; it must exit 0.
func (p *proc) wait(t *testing.T, sig syscall.Signal) string {
	t.Helper()
	if sig != 0 {
		if err := p.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
	}
	for l := range p.lines {
		p.out.WriteString(l + "\n")
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("rdmademo: %v\n%s\n%s", err, p.out.String(), p.stderr.String())
	}
	return p.out.String()
}

func buildDemo(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "rdmademo")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// kernelPeer is the test's RoCE peer: a kernel UDP socket on port 4791.
type kernelPeer struct {
	t          *testing.T
	c          *net.UDPConn // receives the demo's answers
	raw        int          // sends: a raw socket (IPPROTO_RAW, the IPv4 header ours)
	id         uint16       // the IPv4 identification of the last datagram sent
	self, demo netip.AddrPort
}

// ipHeader returns the IPv4 and UDP headers of a datagram of n UDP payload
// bytes from src to dst with identification id and DF, as a NIC numbers
// its datagrams and covers the number with the ICRC (Linux numbers an
// unconnected UDP socket's DF datagrams too, which is why the peer sends
// through a raw socket: the ICRC must be computed over the identification
// the datagram carries). The IPv4 checksum is left 0 for the kernel to
// fill in, the UDP checksum 0 (none), as RoCEv2 NICs send.
func ipHeader(src, dst netip.AddrPort, n int, id uint16) []byte {
	h := make([]byte, 20+8)
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:], uint16(28+n))
	binary.BigEndian.PutUint16(h[4:], id)
	binary.BigEndian.PutUint16(h[6:], 0x4000)
	h[8], h[9] = 64, 17
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(h[12:], s[:])
	copy(h[16:], d[:])
	binary.BigEndian.PutUint16(h[20:], src.Port())
	binary.BigEndian.PutUint16(h[22:], dst.Port())
	binary.BigEndian.PutUint16(h[24:], uint16(8+n))
	return h
}

// send sends transport (BTH to the end of the padded payload) with its
// ICRC, flipped when bad.
func (k *kernelPeer) send(transport []byte, bad bool) {
	k.t.Helper()
	k.id += 0x101 // never 0, which the kernel would replace
	h := ipHeader(k.self, k.demo, len(transport)+4, k.id)
	crc := rdma.ICRC(h[:20], append(h[20:], transport...))
	if bad {
		crc ^= 1
	}
	b := binary.LittleEndian.AppendUint32(append(h, transport...), crc)
	if err := unix.Sendto(k.raw, b, 0, &unix.SockaddrInet4{Addr: k.demo.Addr().As4()}); err != nil {
		k.t.Fatal(err)
	}
}

// recv returns the next packet from the demo, its ICRC checked.
func (k *kernelPeer) recv() rdma.Packet {
	k.t.Helper()
	b := make([]byte, 4096)
	k.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, from, err := k.c.ReadFromUDPAddrPort(b)
	if err != nil {
		k.t.Fatalf("no answer from the demo: %v", err)
	}
	b = b[:n]
	var p rdma.Packet
	if err := rdma.Parse(b, &p); err != nil {
		k.t.Fatalf("answer % x: %v", b, err)
	}
	h := ipHeader(from, k.self, n, 0) // tickwire sends identification 0 on a DF datagram
	if want := rdma.ICRC(h[:20], append(h[20:], b[:n-4]...)); p.ICRC != want {
		k.t.Fatalf("answer's ICRC %#x, want %#x", p.ICRC, want)
	}
	return p
}

// packet builds a request packet.
func packet(op rdma.Opcode, qpn, psn uint32, ackReq bool, reth []uint64, payload []byte) []byte {
	pad := (4 - len(payload)%4) % 4
	b := make([]byte, op.HeaderLen(), op.HeaderLen()+len(payload)+pad)
	rdma.BTH(b).Encode(&rdma.BTHFields{Opcode: op, PKey: rdma.DefaultPKey, DestQP: qpn, AckReq: ackReq, PSN: psn, PadCount: pad})
	if reth != nil {
		rdma.RETH(b[rdma.BTHSize:]).Encode(reth[0], uint32(reth[1]), uint32(reth[2]))
	}
	b = append(b, payload...)
	return append(b, make([]byte, pad)...)
}

func (k *kernelPeer) expectAck(what string, syn uint8, psn uint32) {
	k.t.Helper()
	p := k.recv()
	if p.BTH.Opcode() != rdma.OpAcknowledge || p.AETH.Syndrome()&0xe0 != syn&0xe0 || (syn&0x60 == rdma.SyndromeNAK && p.AETH.Syndrome() != syn) || p.BTH.PSN() != psn {
		k.t.Fatalf("%s: got %v PSN %d syndrome %#x, want syndrome %#x PSN %d", what, p.BTH.Opcode(), p.BTH.PSN(), p.AETH.Syndrome(), syn, psn)
	}
}

// TestResponderAgainstKernelPeer runs the demo as a responder and plays
// its peer from a kernel UDP socket: WRITEs (one packet and three) are
// ACKed, a duplicate ACKed again, a packet with a bad ICRC dropped (the
// gap after it is NAKed from its PSN), a READ answered with what was
// written, a SEND ACKed while a receive buffer is left and RNR NAKed
// after, a write with a wrong rkey NAKed remote access error; on SIGTERM
// the region's sha256 is what the WRITEs made it and the counters say so.
func TestResponderAgainstKernelPeer(t *testing.T) {
	kerneltest.RequireRoot(t)
	ns := kerneltest.NewNetns(t, "twr")
	ns.DisableIPv6(t)
	bin := buildDemo(t)
	dev := kerneltest.Name("twr")
	const peerQPN, first = 0x99, 1000
	d := start(t, ns, bin, "-tap", dev, "-addr", "10.211.0.2/24", "-host", "10.211.0.1/24", "-mr-size", "8192",
		"-peer-qpn", fmt.Sprint(peerQPN), "-peer-psn", fmt.Sprint(first), "-path-mtu", "256", "-recv", "1")
	in := d.info(t)
	if in.Len != 8192 || in.MTU != 256 || in.QPN == 0 || in.Addr >= 1<<53 || in.PSN >= 1<<24 {
		t.Fatalf("JSON line %+v", in)
	}
	k := &kernelPeer{t: t, self: netip.MustParseAddrPort("10.211.0.1:4791"), demo: netip.MustParseAddrPort("10.211.0.2:4791")}
	if err := ns.Do(func() (err error) {
		if k.c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(k.self)); err != nil {
			return err
		}
		k.raw, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer k.c.Close()
	defer unix.Close(k.raw)
	qpn := uint32(in.QPN)
	region := make([]byte, 8192)
	w1 := bytes.Repeat([]byte("one packet "), 10)[:100]
	k.send(packet(rdma.OpWriteOnly, qpn, first, true, []uint64{in.Addr, in.RKey, 100}, w1), false)
	k.expectAck("WRITE_ONLY", rdma.SyndromeACK, first)
	copy(region, w1)

	w3 := make([]byte, 600)
	for i := range w3 {
		w3[i] = byte(i)
	}
	k.send(packet(rdma.OpWriteFirst, qpn, first+1, false, []uint64{in.Addr + 1000, in.RKey, 600}, w3[:256]), false)
	k.send(packet(rdma.OpWriteMiddle, qpn, first+2, false, nil, w3[256:512]), false)
	k.send(packet(rdma.OpWriteLast, qpn, first+3, true, nil, w3[512:]), false)
	k.expectAck("WRITE_FIRST/MIDDLE/LAST", rdma.SyndromeACK, first+3)
	copy(region[1000:], w3)

	k.send(packet(rdma.OpWriteOnly, qpn, first, true, []uint64{in.Addr, in.RKey, 100}, w1), false)
	k.expectAck("duplicate WRITE_ONLY", rdma.SyndromeACK, first+3)

	k.send(packet(rdma.OpWriteOnly, qpn, first+4, true, []uint64{in.Addr, in.RKey, 4}, []byte("BAD!")), true)
	k.send(packet(rdma.OpWriteOnly, qpn, first+6, true, []uint64{in.Addr, in.RKey, 4}, []byte("GAP!")), false)
	k.expectAck("out of sequence after a bad ICRC", rdma.SyndromeNAK|rdma.NAKSequenceError, first+4)

	k.send(packet(rdma.OpWriteOnly, qpn, first+4, true, []uint64{in.Addr, in.RKey, 4}, []byte("GOOD")), false)
	k.expectAck("WRITE_ONLY after the NAK", rdma.SyndromeACK, first+4)
	copy(region, "GOOD")

	k.send(packet(rdma.OpReadRequest, qpn, first+5, false, []uint64{in.Addr + 1000, in.RKey, 600}, nil), false)
	var got []byte
	for i, op := range []rdma.Opcode{rdma.OpReadResponseFirst, rdma.OpReadResponseMid, rdma.OpReadResponseLast} {
		p := k.recv()
		if p.BTH.Opcode() != op || p.BTH.PSN() != uint32(first+5+i) || p.BTH.DestQP() != peerQPN {
			t.Fatalf("READ response %d: %v PSN %d QP %#x", i, p.BTH.Opcode(), p.BTH.PSN(), p.BTH.DestQP())
		}
		got = append(got, p.Payload...)
	}
	if !bytes.Equal(got, w3) {
		t.Fatal("READ answered other bytes than were written")
	}

	k.send(packet(rdma.OpSendOnly, qpn, first+8, true, nil, []byte("to the buffer")), false)
	k.expectAck("SEND with a receive buffer", rdma.SyndromeACK, first+8)
	k.send(packet(rdma.OpSendOnly, qpn, first+9, true, nil, []byte("no buffer left")), false)
	k.expectAck("SEND without a receive buffer", rdma.SyndromeRNRNAK, first+9)

	k.send(packet(rdma.OpWriteOnly, qpn, first+9, true, []uint64{in.Addr, in.RKey + 1, 4}, []byte("EVIL")), false)
	k.expectAck("WRITE with a wrong rkey", rdma.SyndromeNAK|rdma.NAKRemoteAccessError, first+9)

	out := d.wait(t, syscall.SIGTERM)
	if want := fmt.Sprintf("sha256 %x\n", sha256.Sum256(region)); !strings.Contains(out, want) {
		t.Fatalf("output lacks %q:\n%s", want, out)
	}
	for _, want := range []string{"BadICRC=1", "Duplicates=1", "SeqNAKsSent=1", "RNRNAKsSent=1", "AccessNAKsSent=1", "stats:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if o, err := ns.Run("ip", "link", "show", "dev", dev); err == nil {
		t.Fatalf("device %s left behind: %s", dev, o)
	}
}

// TestRequesterDrivesResponder runs two demos on two TAP devices in one
// namespace, the kernel routing between them: the requester WRITEs a
// pattern over the responder's region and READs it back; the responder's
// sha256 on exit is the requester's.
func TestRequesterDrivesResponder(t *testing.T) {
	kerneltest.RequireRoot(t)
	ns := kerneltest.NewNetns(t, "twr")
	ns.DisableIPv6(t)
	ns.MustRun(t, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
	bin := buildDemo(t)
	devA, devB := kerneltest.Name("twr"), kerneltest.Name("twr")
	const size = 300000
	resp := start(t, ns, bin, "-tap", devA, "-addr", "10.211.0.2/24", "-host", "10.211.0.1/24", "-mr-size", fmt.Sprint(size),
		"-peer", "10.212.0.2", "-peer-qpn", "17", "-peer-psn", "777", "-psn", "4242")
	in := resp.info(t)
	req := start(t, ns, bin, "-requester", "-tap", devB, "-addr", "10.212.0.2/24", "-host", "10.212.0.1/24", "-psn", "777",
		"-peer", "10.211.0.2", "-peer-qpn", fmt.Sprint(in.QPN), "-peer-psn", fmt.Sprint(in.PSN),
		"-rkey", fmt.Sprint(in.RKey), "-raddr", fmt.Sprint(in.Addr), "-rlen", fmt.Sprint(in.Len))
	reqOut := req.wait(t, 0)
	respOut := resp.wait(t, syscall.SIGTERM)
	sum := func(out string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "sha256 ") {
				return l
			}
		}
		t.Fatalf("no sha256 line in:\n%s", out)
		return ""
	}
	if a, b := sum(reqOut), sum(respOut); a != b {
		t.Fatalf("requester wrote %s, responder holds %s", a, b)
	}
	zero := fmt.Sprintf("sha256 %x", sha256.Sum256(make([]byte, size)))
	if sum(respOut) == zero {
		t.Fatal("the region was not written")
	}
}
