//go:build linux

package tap

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/refs"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/tickwire/tickwire/internal/kerneltest"
)

func TestMain(m *testing.M) {
	refs.SetLeakMode(refs.LeaksPanic)
	code := m.Run()
	refs.DoLeakCheck()
	os.Exit(code)
}

// newNetnsTAP creates a namespace and a TAP device inside it.
func newNetnsTAP(t *testing.T, cfg Config) (*kerneltest.Netns, *Endpoint) {
	t.Helper()
	ns := kerneltest.NewNetns(t, "twl")
	// No IPv6 on devices created in the namespace: no router solicitations
	// or MLD reports among the frames the tests look at.
	ns.DisableIPv6(t)
	var ep *Endpoint
	if err := ns.Do(func() error {
		var err error
		ep, err = New(cfg)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ep.Close)
	return ns, ep
}

// sink is a NetworkDispatcher that hands inbound frames to a channel.
type sink chan []byte

func (s sink) DeliverNetworkPacket(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	v := pkt.ToView() // the whole frame, Ethernet header included
	b := append([]byte(nil), v.AsSlice()...)
	v.Release()
	select {
	case s <- b:
	default:
	}
}

func (sink) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

// arpFrame builds an ARP packet from us.
func arpFrame(op header.ARPOp, srcMAC net.HardwareAddr, srcIP, dstIP netip.Addr) []byte {
	b := make([]byte, header.ARPSize)
	a := header.ARP(b)
	a.SetIPv4OverEthernet()
	a.SetOp(op)
	copy(a.HardwareAddressSender(), srcMAC)
	copy(a.ProtocolAddressSender(), srcIP.AsSlice())
	copy(a.ProtocolAddressTarget(), dstIP.AsSlice())
	return b
}

func writeFrame(t *testing.T, ep *Endpoint, dst tcpip.LinkAddress, proto tcpip.NetworkProtocolNumber, payload []byte) {
	t.Helper()
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{
		ReserveHeaderBytes: int(ep.MaxHeaderLength()),
		Payload:            buffer.MakeWithData(payload),
	})
	defer pkt.DecRef()
	pkt.NetworkProtocolNumber = proto
	pkt.EgressRoute.LocalLinkAddress = ep.LinkAddress()
	pkt.EgressRoute.RemoteLinkAddress = dst
	ep.AddHeader(pkt)
	var pkts stack.PacketBufferList
	pkts.PushBack(pkt.IncRef())
	n, err := ep.WritePackets(pkts)
	pkts.DecRef()
	if n != 1 || err != nil {
		t.Fatalf("WritePackets: %d %v", n, err)
	}
}

func TestDeviceStateAndFramesBothWays(t *testing.T) {
	host := netip.MustParsePrefix("10.201.7.1/24")
	mine := netip.MustParseAddr("10.201.7.2")
	name := kerneltest.Name("twl")
	ns, ep := newNetnsTAP(t, Config{Name: name, MTU: 1400, Host: host})
	if !ep.Created() || ep.Name() != name || ep.MTU() != 1400 || len(ep.MAC()) != 6 {
		t.Fatalf("created %v name %q mtu %d mac %v", ep.Created(), ep.Name(), ep.MTU(), ep.MAC())
	}
	if ep.LinkAddress() != tcpip.LinkAddress(ep.MAC()) || ep.MaxHeaderLength() != header.EthernetMinimumSize {
		t.Fatalf("link address %v header %d", ep.LinkAddress(), ep.MaxHeaderLength())
	}

	link := string(ns.MustRun(t, "ip", "-o", "link", "show", "dev", name))
	if !strings.Contains(link, "mtu 1400") || !strings.Contains(link, ",UP") || !strings.Contains(link, "qdisc noqueue") {
		t.Fatalf("device state: %s", link)
	}
	addr := string(ns.MustRun(t, "ip", "-o", "-4", "addr", "show", "dev", name))
	if !strings.Contains(addr, "inet 10.201.7.1/24") {
		t.Fatalf("device address: %s", addr)
	}

	frames := make(sink, 64)
	ep.Attach(frames)
	defer ep.Attach(nil)

	// Kernel to us: a ping to our address makes the kernel ask who has it.
	go ns.Run("ping", "-c", "1", "-W", "1", mine.String())
	deadline := time.After(5 * time.Second)
	var kernelMAC tcpip.LinkAddress
	for kernelMAC == "" {
		select {
		case f := <-frames:
			eth := header.Ethernet(f)
			if eth.Type() != header.ARPProtocolNumber {
				continue
			}
			a := header.ARP(f[header.EthernetMinimumSize:])
			if a.Op() == header.ARPRequest && netip.AddrFrom4([4]byte(a.ProtocolAddressTarget())) == mine {
				kernelMAC = eth.SourceAddress()
			}
		case <-deadline:
			t.Fatal("no ARP request from the kernel through the TAP")
		}
	}

	// Us to kernel: ask for the host's address; the kernel answers.
	writeFrame(t, ep, header.EthernetBroadcastAddress, header.ARPProtocolNumber,
		arpFrame(header.ARPRequest, ep.MAC(), mine, host.Addr()))
	for answered := false; !answered; {
		select {
		case f := <-frames:
			if header.Ethernet(f).Type() != header.ARPProtocolNumber {
				continue
			}
			a := header.ARP(f[header.EthernetMinimumSize:])
			answered = a.Op() == header.ARPReply && tcpip.LinkAddress(a.HardwareAddressSender()) == kernelMAC &&
				header.Ethernet(f).DestinationAddress() == ep.LinkAddress()
		case <-deadline:
			t.Fatal("the kernel did not answer our ARP request")
		}
	}
	if st := ep.Stats(); st.TxFrames != 1 || st.RxFrames < 2 || st.TxDropped != 0 {
		t.Fatalf("stats %+v", st)
	}

	// A frame for another MAC is dropped and counted; the next one for us
	// still arrives.
	other := append(net.HardwareAddr{0x02}, ep.MAC()[1:]...)
	other[5] ^= 0xff
	sendRaw(t, ns, name, ethernetFrame(other, net.HardwareAddr(kernelMAC), arpFrame(header.ARPReply, ep.MAC(), mine, host.Addr())))
	sendRaw(t, ns, name, ethernetFrame(ep.MAC(), net.HardwareAddr(kernelMAC), arpFrame(header.ARPReply, ep.MAC(), mine, host.Addr())))
	select {
	case f := <-frames:
		if header.Ethernet(f).DestinationAddress() != ep.LinkAddress() {
			t.Fatalf("frame for %v delivered", header.Ethernet(f).DestinationAddress())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("link stopped receiving after a frame for another host")
	}
	if st := ep.Stats(); st.RxOtherHost != 1 {
		t.Fatalf("stats %+v, want one frame for another host", st)
	}
}

func ethernetFrame(dst, src net.HardwareAddr, payload []byte) []byte {
	f := make([]byte, header.EthernetMinimumSize+len(payload))
	header.Ethernet(f).Encode(&header.EthernetFields{SrcAddr: tcpip.LinkAddress(src), DstAddr: tcpip.LinkAddress(dst), Type: header.ARPProtocolNumber})
	copy(f[header.EthernetMinimumSize:], payload)
	return f
}

// sendRaw transmits a frame from the kernel side of dev.
func sendRaw(t *testing.T, ns *kerneltest.Netns, dev string, frame []byte) {
	t.Helper()
	if err := ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		return unix.Sendto(fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6})
	}); err != nil {
		t.Fatal(err)
	}
}

func TestWriteDoesNotAllocate(t *testing.T) {
	_, ep := newNetnsTAP(t, Config{Name: kerneltest.Name("twl")})
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{
		ReserveHeaderBytes: int(ep.MaxHeaderLength()),
		Payload:            buffer.MakeWithData(make([]byte, 1000)),
	})
	defer pkt.DecRef()
	pkt.NetworkProtocolNumber = header.IPv4ProtocolNumber
	pkt.EgressRoute.LocalLinkAddress = ep.LinkAddress()
	pkt.EgressRoute.RemoteLinkAddress = header.EthernetBroadcastAddress
	ep.AddHeader(pkt)
	var pkts stack.PacketBufferList
	pkts.PushBack(pkt)
	allocs := testing.AllocsPerRun(200, func() {
		if n, err := ep.WritePackets(pkts); n != 1 || err != nil {
			t.Fatal(n, err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per written frame, want 0", allocs)
	}
	if st := ep.Stats(); st.TxFrames != 201 {
		t.Fatalf("stats %+v", st)
	}
	ep.Close()
	if _, err := ep.WritePackets(pkts); err == nil {
		t.Fatal("write after Close accepted")
	}
}

func TestCloseRemovesCreatedDeviceOnly(t *testing.T) {
	kerneltest.RequireRoot(t)
	ns := kerneltest.NewNetns(t, "twl")

	// Created by New: gone after Close.
	name := kerneltest.Name("twl")
	var ep *Endpoint
	if err := ns.Do(func() (err error) { ep, err = New(Config{Name: name}); return }); err != nil {
		t.Fatal(err)
	}
	ns.MustRun(t, "ip", "link", "show", "dev", name)
	ep.Close()
	ep.Close() // idempotent
	if out, err := ns.Run("ip", "link", "show", "dev", name); err == nil {
		t.Fatalf("device %s still there after Close: %s", name, out)
	}

	// Persistent device made beforehand: opened, then left in place.
	name = kerneltest.Name("twl")
	ns.MustRun(t, "ip", "tuntap", "add", "dev", name, "mode", "tap")
	if err := ns.Do(func() (err error) { ep, err = New(Config{Name: name, MTU: 9000}); return }); err != nil {
		t.Fatal(err)
	}
	if ep.Created() {
		t.Fatal("existing device reported as created")
	}
	if !txChecksumOffload(t, ns, name) {
		t.Fatal("checksum offload not on while the endpoint is open")
	}
	ep.Close()
	if out := ns.MustRun(t, "ip", "-o", "link", "show", "dev", name); !strings.Contains(string(out), "mtu 9000") {
		t.Fatalf("existing device: %s", out)
	}
	// Its next reader may not read virtio-net headers: no partial checksums.
	if txChecksumOffload(t, ns, name) {
		t.Fatal("existing device left with checksum offload on")
	}
}

// txChecksumOffload asks the kernel (ethtool's ETHTOOL_GTXCSUM) whether it
// leaves transmit checksums of frames sent out of dev to the device.
func txChecksumOffload(t *testing.T, ns *kerneltest.Netns, dev string) bool {
	t.Helper()
	const ethtoolGTXCSUM = 0x16
	var on bool
	if err := ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		value := [2]uint32{ethtoolGTXCSUM, 0} // struct ethtool_value
		var ifr struct {
			name [unix.IFNAMSIZ]byte
			data unsafe.Pointer
			_    [16]byte // the rest of the ifreq union
		}
		copy(ifr.name[:], dev)
		ifr.data = unsafe.Pointer(&value)
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); errno != 0 {
			return fmt.Errorf("SIOCETHTOOL: %w", errno)
		}
		on = value[1] != 0
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return on
}

func TestConfigErrors(t *testing.T) {
	cases := map[string]Config{
		"Name": {Name: "a-name-longer-than-15"},
		"MTU":  {Name: "twl0", MTU: 67},
		"MAC":  {Name: "twl0", MAC: net.HardwareAddr{1, 0, 0, 0, 0, 1}},
		"Host": {Name: "twl0", Host: netip.MustParsePrefix("fd00::1/64")},
	}
	for field, cfg := range cases {
		_, err := New(cfg)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != field {
			t.Errorf("%s: error %v, want a ConfigError for the field", field, err)
		}
	}
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "Config.Name") {
		t.Errorf("empty config: %v", err)
	}
}

// TestCloseJoinsDispatcher checks that detaching and closing leaves no
// goroutine behind.
func TestCloseJoinsDispatcher(t *testing.T) {
	kerneltest.RequireRoot(t)
	ignore := goleak.IgnoreCurrent()
	_, ep := newNetnsTAP(t, Config{Name: kerneltest.Name("twl")})
	frames := make(sink, 1)
	ep.Attach(frames)
	if !ep.IsAttached() {
		t.Fatal("not attached")
	}
	ep.Attach(nil) // what the stack does when it removes the link
	ep.Wait()
	ep.Close() // joins the reader
	goleak.VerifyNone(t, ignore)
}

// signal is a dispatcher that allocates nothing: it only says a frame came.
type signal chan struct{}

func (s signal) DeliverNetworkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {
	s <- struct{}{}
}

func (signal) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

// kernelSender opens a packet socket on the kernel side of dev. Made inside
// the namespace, it stays there and can be used from any thread.
func kernelSender(tb testing.TB, ns *kerneltest.Netns, dev string) func(frame []byte) {
	tb.Helper()
	var fd int
	var sa unix.SockaddrLinklayer
	if err := ns.Do(func() error {
		var err error
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		sa = unix.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6}
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { unix.Close(fd) })
	return func(frame []byte) {
		if err := unix.Sendto(fd, frame, 0, &sa); err != nil {
			tb.Fatal(err)
		}
	}
}

// TestReadDoesNotAllocate sends frames from the kernel side and checks that
// reading and delivering them allocates nothing in steady state.
func TestReadDoesNotAllocate(t *testing.T) {
	name := kerneltest.Name("twl")
	ns, ep := newNetnsTAP(t, Config{Name: name})
	send := kernelSender(t, ns, name)
	frame := ethernetFrame(ep.MAC(), net.HardwareAddr{2, 1, 1, 1, 1, 1}, make([]byte, 1000))
	got := make(signal, 1)
	ep.Attach(got)
	defer ep.Attach(nil)
	roundTrip := func() {
		send(frame)
		<-got
	}
	for range 50 {
		roundTrip() // fill the pools
	}
	// Packet buffers and views come from pools, which the race detector
	// randomly empties: allow that one allocation there.
	limit := 0.05
	if raceEnabled {
		limit = 1.5
	}
	if allocs := testing.AllocsPerRun(200, roundTrip); allocs > limit {
		t.Errorf("%v allocations per frame read and delivered, want at most %v", allocs, limit)
	}
}

// BenchmarkKernelToStack measures one frame from a kernel packet socket
// through the TAP to the stack's dispatcher: the one-way latency of the link
// including the kernel's send and the reader's wake-up.
func BenchmarkKernelToStack(b *testing.B) {
	kerneltest.RequireRoot(b)
	ns := kerneltest.NewNetns(b, "twl")
	ns.DisableIPv6(b)
	name := kerneltest.Name("twl")
	var ep *Endpoint
	if err := ns.Do(func() (err error) { ep, err = New(Config{Name: name}); return }); err != nil {
		b.Fatal(err)
	}
	defer ep.Close()
	send := kernelSender(b, ns, name)
	frame := ethernetFrame(ep.MAC(), net.HardwareAddr{2, 1, 1, 1, 1, 1}, make([]byte, 100))
	got := make(signal, 1)
	ep.Attach(got)
	defer ep.Attach(nil)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for range b.N {
		send(frame)
		<-got
	}
}

// BenchmarkWritePackets measures writing one frame to the device.
func BenchmarkWritePackets(b *testing.B) {
	kerneltest.RequireRoot(b)
	ns := kerneltest.NewNetns(b, "twl")
	var ep *Endpoint
	if err := ns.Do(func() (err error) { ep, err = New(Config{Name: kerneltest.Name("twl")}); return }); err != nil {
		b.Fatal(err)
	}
	defer ep.Close()
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{
		ReserveHeaderBytes: int(ep.MaxHeaderLength()),
		Payload:            buffer.MakeWithData(make([]byte, 1486)),
	})
	defer pkt.DecRef()
	pkt.NetworkProtocolNumber = header.IPv4ProtocolNumber
	pkt.EgressRoute.LocalLinkAddress = ep.LinkAddress()
	pkt.EgressRoute.RemoteLinkAddress = header.EthernetBroadcastAddress
	ep.AddHeader(pkt)
	var pkts stack.PacketBufferList
	pkts.PushBack(pkt)
	b.SetBytes(int64(pkt.Size()))
	b.ReportAllocs()
	for range b.N {
		ep.WritePackets(pkts)
	}
}

// tidSink is a dispatcher that sends the thread each frame was delivered
// on.
type tidSink chan int

func (s tidSink) DeliverNetworkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {
	s <- unix.Gettid()
}

func (tidSink) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

// TestLockOSThread: after SetLockOSThread(true), the reader delivers every
// frame on one thread, while goroutines blocking in system calls move the
// others around; after SetLockOSThread(false) it may move again.
func TestLockOSThread(t *testing.T) {
	name := kerneltest.Name("twl")
	ns, ep := newNetnsTAP(t, Config{Name: name})
	send := kernelSender(t, ns, name)
	frame := ethernetFrame(ep.MAC(), net.HardwareAddr{2, 1, 1, 1, 1, 1}, make([]byte, 100))
	got := make(tidSink, 1)
	ep.Attach(got)
	defer ep.Attach(nil)
	threads := func() int {
		tids := map[int]bool{}
		for i := range 300 {
			if i%10 == 0 {
				go time.Sleep(time.Millisecond) // churn
			}
			send(frame)
			select {
			case tid := <-got:
				tids[tid] = true
			case <-time.After(30 * time.Second):
				t.Fatal("no frame in 30 s")
			}
		}
		return len(tids)
	}
	ep.SetLockOSThread(true)
	send(frame) // the reader locks before the read after this frame's
	<-got
	locked := threads()
	ep.SetLockOSThread(false)
	unlocked := threads()
	t.Logf("300 frames delivered on %d threads locked, %d unlocked", locked, unlocked)
	if locked != 1 {
		t.Errorf("with SetLockOSThread(true), frames were delivered on %d threads, want 1", locked)
	}
}
