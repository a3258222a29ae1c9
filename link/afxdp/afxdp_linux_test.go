//go:build linux && (amd64 || arm64)

package afxdp_test

// The stack on AF_XDP with the kernel as its peer: a veth pair between two
// namespaces that each test creates, the stack on one end (ns "own", where
// the kernel keeps an address of its own on the same interface), the
// kernel on the other (ns "peer"). Needs root; skips otherwise.

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"gvisor.dev/gvisor/pkg/refs"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/internal/kerneltest"
	"github.com/tickwire/tickwire/link/afxdp"
)

func TestMain(m *testing.M) {
	refs.SetLeakMode(refs.LeaksPanic)
	code := m.Run()
	refs.DoLeakCheck()
	os.Exit(code)
}

var (
	peerIP  = netip.MustParseAddr("10.202.0.1") // the kernel peer
	stackIP = netip.MustParseAddr("10.202.0.2") // tickwire, on AF_XDP
	hostIP  = netip.MustParseAddr("10.202.0.3") // the kernel on the stack's interface
)

const echoPort = 7

// vethPair is a veth pair with the kernel peer's end in peer and the end
// AF_XDP binds in own.
type vethPair struct {
	own, peer       *kerneltest.Netns
	ownDev, peerDev string
}

// newVeth makes the namespaces and the pair, addresses the kernel's ends
// and turns off what would send the AF_XDP end frames that are not wire
// frames (partial checksums, GSO super-frames): see the package doc.
func newVeth(t testing.TB) *vethPair {
	t.Helper()
	return newVethQueues(t, 1)
}

// newVethQueues is newVeth with queues queues on each end.
func newVethQueues(t testing.TB, queues int) *vethPair {
	t.Helper()
	kerneltest.RequireRoot(t)
	kerneltest.RequireTool(t, "ethtool")
	v := &vethPair{own: kerneltest.NewNetns(t, "twx"), peer: kerneltest.NewNetns(t, "twx")}
	v.own.DisableIPv6(t)
	v.peer.DisableIPv6(t)
	v.ownDev, v.peerDev = kerneltest.Name("twx"), kerneltest.Name("twx")
	kerneltest.VethQueues(t, v.own, v.ownDev, v.peer, v.peerDev, queues)
	v.peer.MustRun(t, "ip", "addr", "add", netip.PrefixFrom(peerIP, 24).String(), "dev", v.peerDev)
	v.own.MustRun(t, "ip", "addr", "add", netip.PrefixFrom(hostIP, 24).String(), "dev", v.ownDev)
	v.peer.MustRun(t, "ethtool", "-K", v.peerDev, "tx", "off", "tso", "off", "gso", "off")
	return v
}

// open runs afxdp.New in the stack's namespace.
func (v *vethPair) open(cfg afxdp.Config) (*afxdp.Endpoint, error) {
	var ep *afxdp.Endpoint
	err := v.own.Do(func() (err error) {
		ep, err = afxdp.New(v.ownDev, cfg)
		return err
	})
	return ep, err
}

// newStack opens an endpoint and a stack on it serving TCP and UDP echo.
func newStack(t testing.TB, v *vethPair) (*tickwire.Stack, *afxdp.Endpoint) {
	t.Helper()
	ep, err := v.open(afxdp.Config{Addr: stackIP})
	if err != nil {
		t.Fatal(err)
	}
	s, err := tickwire.New(tickwire.Config{Link: ep, MAC: ep.MAC(), Addr: netip.PrefixFrom(stackIP, 24), Gateway: peerIP})
	if err != nil {
		ep.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	kerneltest.ServeEcho(t, s, echoPort)
	return s, ep
}

// dial opens a kernel socket in ns.
func dial(t testing.TB, ns *kerneltest.Netns, network, addr string) net.Conn {
	t.Helper()
	var c net.Conn
	if err := ns.Do(func() (err error) {
		c, err = net.DialTimeout(network, addr, 10*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// echo sends size random bytes through c and checks the same come back.
func echo(t testing.TB, c net.Conn, size int) {
	t.Helper()
	msg := make([]byte, size)
	rand.Read(msg)
	c.SetDeadline(time.Now().Add(60 * time.Second))
	defer c.SetDeadline(time.Time{})
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(msg)
		werr <- err
	}()
	got := make([]byte, size)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("echo read: %v", err)
	}
	if err := <-werr; err != nil {
		t.Fatalf("echo write: %v", err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("echoed bytes differ")
	}
}

// xdpAttached returns the interface's "ip link" line's xdp part, "" when
// no program is attached.
func xdpAttached(t testing.TB, ns *kerneltest.Netns, dev string) string {
	t.Helper()
	out := string(ns.MustRun(t, "ip", "-d", "link", "show", "dev", dev))
	if i := strings.Index(out, "prog/xdp"); i >= 0 {
		return strings.Fields(out[i:])[0]
	}
	return ""
}

func TestStackOverXDP(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	v := newVeth(t)
	s, ep := newStack(t, v)
	t.Logf("attach mode %v, zero-copy %v", ep.AttachMode(), ep.ZeroCopy())

	// First: the stack resolves the kernel (ARP from the stack).
	t.Run("UDP from the stack", func(t *testing.T) {
		var pc net.PacketConn
		if err := v.peer.Do(func() (err error) {
			pc, err = net.ListenPacket("udp4", netip.AddrPortFrom(peerIP, 0).String())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		to := netip.MustParseAddrPort(pc.LocalAddr().String())
		c, err := s.DialUDP(to)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("from the stack")); err != nil {
			t.Fatal(err)
		}
		pc.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 100)
		n, from, err := pc.ReadFrom(buf)
		if err != nil || string(buf[:n]) != "from the stack" || from.(*net.UDPAddr).IP.String() != stackIP.String() {
			t.Fatalf("got %q from %v, %v", buf[:n], from, err)
		}
	})
	t.Run("ping", func(t *testing.T) {
		v.peer.MustRun(t, "ping", "-c", "3", "-i", "0.2", "-W", "5", stackIP.String())
	})
	t.Run("TCP echo 1 MiB", func(t *testing.T) {
		c := dial(t, v.peer, "tcp", netip.AddrPortFrom(stackIP, echoPort).String())
		echo(t, c, 1<<20)
	})
	t.Run("UDP echo from the kernel", func(t *testing.T) {
		c := dial(t, v.peer, "udp", netip.AddrPortFrom(stackIP, echoPort).String())
		echo(t, c, 1000)
	})
	t.Run("TCP from the stack", func(t *testing.T) {
		var ln net.Listener
		if err := v.peer.Do(func() (err error) {
			ln, err = net.Listen("tcp4", netip.AddrPortFrom(peerIP, 0).String())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			c, err := ln.Accept()
			if err == nil {
				io.Copy(c, c)
				c.Close()
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := s.DialTCP(ctx, netip.MustParseAddrPort(ln.Addr().String()))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		echo(t, c, 64<<10)
	})
	t.Run("ARP both ways", func(t *testing.T) {
		// The stack resolved the kernel for its first datagram; now the
		// kernel forgets the stack and resolves it again.
		before := s.Stats()
		if before.ARPRequestsTx == 0 || before.ARPRepliesRx == 0 {
			t.Errorf("stack sent %d ARP requests and got %d replies, want both > 0", before.ARPRequestsTx, before.ARPRepliesRx)
		}
		v.peer.MustRun(t, "ip", "neigh", "flush", "dev", v.peerDev)
		v.peer.MustRun(t, "ping", "-c", "1", "-W", "5", stackIP.String())
		after := s.Stats()
		if after.ARPRequestsRx == before.ARPRequestsRx || after.ARPRepliesTx == before.ARPRepliesTx {
			t.Errorf("ARP requests received %d -> %d, replies sent %d -> %d: want both to grow",
				before.ARPRequestsRx, after.ARPRequestsRx, before.ARPRepliesTx, after.ARPRepliesTx)
		}
		out := string(v.peer.MustRun(t, "ip", "neigh", "show", stackIP.String(), "dev", v.peerDev))
		if !strings.Contains(out, ep.MAC().String()) {
			t.Fatalf("kernel's neighbour entry for %v: %q, want MAC %v", stackIP, out, ep.MAC())
		}
	})
	t.Run("host traffic still reaches the kernel", func(t *testing.T) {
		v.peer.MustRun(t, "ping", "-c", "2", "-i", "0.2", "-W", "5", hostIP.String())
		// TCP to the kernel on the same interface: the kernel answers
		// (RST from a closed port is an answer).
		var ln net.Listener
		if err := v.own.Do(func() (err error) {
			ln, err = net.Listen("tcp4", netip.AddrPortFrom(hostIP, 0).String())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			c, err := ln.Accept()
			if err == nil {
				io.Copy(c, c)
				c.Close()
			}
		}()
		c := dial(t, v.peer, "tcp", ln.Addr().String())
		echo(t, c, 64<<10)
	})
	st := ep.Stats()
	t.Logf("endpoint stats: %+v", st)
	if st.RxFrames == 0 || st.TxFrames == 0 || st.RxInvalid != 0 || st.TxDropped != 0 {
		t.Errorf("stats: %+v", st)
	}
	if a := xdpAttached(t, v.own, v.ownDev); a == "" {
		t.Error("no XDP program attached while the endpoint is open")
	}
	s.Close()
	if a := xdpAttached(t, v.own, v.ownDev); a != "" {
		t.Errorf("XDP program still attached after Close: %s", a)
	}
	goleak.VerifyNone(t, ignore)
}

var _ = errors.Is

// TestEndpointTwoQueuesSpreadTX: an endpoint on both queues of a two-queue
// veth serves 16 kernel connections; its sends are spread over the two
// sockets by the connections' hashes, and the per-queue counters add up to
// the endpoint's.
func TestEndpointTwoQueuesSpreadTX(t *testing.T) {
	v := newVethQueues(t, 2)
	ep, err := v.open(afxdp.Config{Addr: stackIP, Queues: 2})
	if err != nil {
		t.Fatal(err)
	}
	s, err := tickwire.New(tickwire.Config{Link: ep, MAC: ep.MAC(), Addr: netip.PrefixFrom(stackIP, 24), Gateway: peerIP,
		MaxConnectionsPerSource: 64})
	if err != nil {
		ep.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	kerneltest.ServeEcho(t, s, echoPort)
	if ep.Queues() != 2 {
		t.Fatalf("Queues() = %d, want 2", ep.Queues())
	}
	addr := netip.AddrPortFrom(stackIP, echoPort).String()
	for range 16 {
		echo(t, dial(t, v.peer, "tcp4", addr), 4096)
	}
	total := ep.Stats()
	var sum afxdp.Stats
	for i := range 2 {
		q := ep.QueueStats(i)
		if q.TxFrames == 0 {
			t.Errorf("queue %d sent nothing: %+v", i, q)
		}
		sum.TxFrames += q.TxFrames
		sum.RxFrames += q.RxFrames
	}
	if sum.TxFrames != total.TxFrames || sum.RxFrames != total.RxFrames {
		t.Errorf("per-queue sums %d sent, %d received; the endpoint's %d, %d", sum.TxFrames, sum.RxFrames, total.TxFrames, total.RxFrames)
	}
	if q := ep.QueueStats(2); q != (afxdp.Stats{}) {
		t.Errorf("QueueStats(2) = %+v, want zero", q)
	}
}
