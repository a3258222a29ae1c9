//go:build linux && (amd64 || arm64)

package afxdp_test

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/tickwire/tickwire/internal/kerneltest"
	"github.com/tickwire/tickwire/link/afxdp"
	"github.com/tickwire/tickwire/link/frame"
)

// capturePair is a veth pair in one namespace: a Source on capDev, an
// AF_PACKET socket writing raw frames into sendDev.
type capturePair struct {
	ns      *kerneltest.Netns
	capDev  string
	sendFD  int
	sendSA  unix.SockaddrLinklayer
	srcMAC  net.HardwareAddr
	dstPort uint16
}

func newCapturePair(t *testing.T) *capturePair {
	t.Helper()
	kerneltest.RequireRoot(t)
	c := &capturePair{ns: kerneltest.NewNetns(t, "twc"), capDev: kerneltest.Name("twc"), dstPort: 9129}
	c.ns.DisableIPv6(t)
	sendDev := kerneltest.Name("twc")
	kerneltest.Veth(t, c.ns, c.capDev, c.ns, sendDev)
	if err := c.ns.Do(func() error {
		ifi, err := net.InterfaceByName(sendDev)
		if err != nil {
			return err
		}
		c.sendSA.Ifindex, c.srcMAC = ifi.Index, ifi.HardwareAddr
		c.sendFD, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(c.sendFD) })
	return c
}

func (c *capturePair) open(t *testing.T, cfg afxdp.Config) *afxdp.Source {
	t.Helper()
	var src *afxdp.Source
	if err := c.ns.Do(func() (err error) {
		src, err = afxdp.NewSource(c.capDev, cfg)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

// udpFrame is an Ethernet/IPv4/UDP frame to port (checksums are not
// checked on this path).
func (c *capturePair) udpFrame(port uint16, seq int) []byte {
	b := make([]byte, 14+20+8+8)
	copy(b, []byte{0x02, 0, 0, 0, 0, 9})
	copy(b[6:], c.srcMAC)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	ip[8], ip[9] = 64, unix.IPPROTO_UDP
	copy(ip[12:], []byte{10, 31, 0, 1, 10, 32, 0, 10})
	binary.BigEndian.PutUint16(ip[20:], 40000)
	binary.BigEndian.PutUint16(ip[22:], port)
	binary.BigEndian.PutUint16(ip[24:], 16)
	binary.BigEndian.PutUint64(ip[28:], uint64(seq))
	return b
}

func (c *capturePair) send(t *testing.T, b []byte) {
	t.Helper()
	if err := unix.Sendto(c.sendFD, b, 0, &c.sendSA); err != nil {
		t.Fatal(err)
	}
}

// TestSourceFilterAndAllocs: only frames to the filter's port are
// captured, each exactly and stamped, and reading one allocates nothing.
func TestSourceFilterAndAllocs(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	c := newCapturePair(t)
	src := c.open(t, afxdp.Config{Filter: afxdp.Filter{Port: c.dstPort}, ReadTimeout: 10 * time.Second})
	src.SetBusyPoll(100 * time.Microsecond) // the spinning path allocates nothing either
	const n = 200
	for i := range n {
		c.send(t, c.udpFrame(c.dstPort+1, i)) // not ours: passed to the kernel
		c.send(t, c.udpFrame(c.dstPort, i))
	}
	batch := frame.NewBatch(1, 2048)
	wants := make([][]byte, n)
	for i := range wants {
		wants[i] = c.udpFrame(c.dstPort, i)
	}
	start := time.Now().UnixNano()
	seq := 0
	read := func() {
		k, err := src.ReadFrames(batch)
		if err != nil || k != 1 {
			t.Fatalf("ReadFrames = %d, %v", k, err)
		}
		f := &batch[0]
		want := wants[seq]
		if string(f.Data()) != string(want) || f.Time < start || f.LinkType != frame.LinkTypeEthernet {
			t.Fatalf("frame %d: % x at %d, want % x after %d", seq, f.Data(), f.Time, want, start)
		}
		seq++
	}
	read()
	if allocs := testing.AllocsPerRun(n-2, read); allocs != 0 {
		t.Errorf("ReadFrames: %v allocations per frame", allocs)
	}
	st := src.Stats()
	if st.RxFrames != uint64(seq) || st.KernelDrops != 0 {
		t.Errorf("stats %+v after %d frames", st, seq)
	}
	src.Close()
	goleak.VerifyNone(t, ignore)
}

// TestSourceTimeoutAndClose: ReadFrames gives ErrTimeout on a quiet link
// and stays usable; Close wakes a blocked ReadFrames with io.EOF.
func TestSourceTimeoutAndClose(t *testing.T) {
	c := newCapturePair(t)
	src := c.open(t, afxdp.Config{Filter: afxdp.Filter{Port: c.dstPort}, ReadTimeout: 20 * time.Millisecond})
	batch := frame.NewBatch(4, 2048)
	if n, err := src.ReadFrames(batch); n != 0 || !errors.Is(err, afxdp.ErrTimeout) {
		t.Fatalf("quiet link: %d, %v", n, err)
	}
	src.SetBusyPoll(5 * time.Millisecond) // spins, then blocks until the timeout
	if n, err := src.ReadFrames(batch); n != 0 || !errors.Is(err, afxdp.ErrTimeout) {
		t.Fatalf("quiet link, busy-polling: %d, %v", n, err)
	}
	var te interface{ Timeout() bool }
	if !errors.As(afxdp.ErrTimeout, &te) || !te.Timeout() {
		t.Error("ErrTimeout has no Timeout() true")
	}
	// A second interface: one program per interface, one socket per queue.
	c2 := newCapturePair(t)
	blocking := c2.open(t, afxdp.Config{Filter: afxdp.Filter{Port: c.dstPort}})
	done := make(chan error, 1)
	go func() {
		_, err := blocking.ReadFrames(batch)
		done <- err
	}()
	blocking.Close()
	select {
	case err := <-done:
		if err != io.EOF {
			t.Fatalf("ReadFrames after Close: %v, want io.EOF", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not wake ReadFrames")
	}
}

// TestSourceFilters runs each form of filter through the verifier and the
// wire: a frame it selects is captured, one it does not is not.
func TestSourceFilters(t *testing.T) {
	c := newCapturePair(t)
	host := netip.MustParseAddr("10.31.0.1") // udpFrame's source
	for _, f := range []afxdp.Filter{
		{Port: c.dstPort},
		{Host: host},
		{Host: host, Port: c.dstPort},
		{Host: netip.MustParseAddr("10.32.0.10"), Port: 40000}, // destination host, source port
	} {
		t.Run(f.String(), func(t *testing.T) {
			src := c.open(t, afxdp.Config{Filter: f, ReadTimeout: 10 * time.Second})
			other := c.udpFrame(c.dstPort+1, 1)
			copy(other[14+12:], []byte{10, 99, 0, 1, 10, 99, 0, 2})
			binary.BigEndian.PutUint16(other[14+20:], 1234)
			c.send(t, other)
			want := c.udpFrame(c.dstPort, 2)
			c.send(t, want)
			batch := frame.NewBatch(4, 2048)
			n, err := src.ReadFrames(batch)
			if err != nil || n != 1 || string(batch[0].Data()) != string(want) {
				t.Fatalf("ReadFrames = %d, %v; first % x", n, err, batch[0].Data())
			}
			src.Close()
		})
	}
}

// TestSourcePromiscuous: the interface is promiscuous while the source is
// open and back as it was after Close.
func TestSourcePromiscuous(t *testing.T) {
	c := newCapturePair(t)
	promisc := func() bool {
		// A membership shows in the counter, not in the PROMISC flag.
		out := string(c.ns.MustRun(t, "ip", "-d", "link", "show", "dev", c.capDev))
		return !strings.Contains(out, "promiscuity 0")
	}
	if promisc() {
		t.Fatal("promiscuous before the source opened")
	}
	src := c.open(t, afxdp.Config{Filter: afxdp.Filter{Port: c.dstPort}, Promiscuous: true})
	if !promisc() {
		t.Error("not promiscuous while the source is open")
	}
	src.Close()
	if promisc() {
		t.Error("still promiscuous after Close")
	}
}

// TestSourceTwoQueues captures on both receive queues of a two-queue veth:
// every frame of many flows arrives once, whichever queue took it.
func TestSourceTwoQueues(t *testing.T) {
	kerneltest.RequireRoot(t)
	c := &capturePair{ns: kerneltest.NewNetns(t, "twc"), capDev: kerneltest.Name("twc"), dstPort: 9129}
	c.ns.DisableIPv6(t)
	sendDev := kerneltest.Name("twc")
	c.ns.MustRun(t, "ip", "link", "add", c.capDev, "numtxqueues", "2", "numrxqueues", "2", "type", "veth",
		"peer", "name", sendDev, "numtxqueues", "2", "numrxqueues", "2")
	c.ns.MustRun(t, "ip", "link", "set", c.capDev, "up")
	c.ns.MustRun(t, "ip", "link", "set", sendDev, "up")
	if err := c.ns.Do(func() error {
		ifi, err := net.InterfaceByName(sendDev)
		if err != nil {
			return err
		}
		c.sendSA.Ifindex, c.srcMAC = ifi.Index, ifi.HardwareAddr
		c.sendFD, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(c.sendFD)
	src := c.open(t, afxdp.Config{Filter: afxdp.Filter{Port: c.dstPort}, Queues: 2, ReadTimeout: 10 * time.Second})
	const n = 256
	seen := make(map[uint64]bool)
	for i := range n {
		f := c.udpFrame(c.dstPort, i)
		binary.BigEndian.PutUint16(f[14+20:], uint16(30000+i)) // a flow each
		c.send(t, f)
	}
	batch := frame.NewBatch(16, 2048)
	for len(seen) < n {
		k, err := src.ReadFrames(batch)
		if err != nil {
			t.Fatalf("after %d frames: %v; %+v", len(seen), err, src.Stats())
		}
		for _, f := range batch[:k] {
			seq := binary.BigEndian.Uint64(f.Data()[14+28:])
			if seen[seq] {
				t.Fatalf("frame %d twice", seq)
			}
			seen[seq] = true
		}
	}
	t.Logf("stats %+v", src.Stats())
}
