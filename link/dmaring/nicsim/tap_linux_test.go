//go:build linux

package nicsim_test

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/internal/kerneltest"
	"github.com/tickwire/tickwire/link/dmaring"
	"github.com/tickwire/tickwire/link/dmaring/nicsim"
	"github.com/tickwire/tickwire/link/tap"
)

var (
	tapKernel = netip.MustParseAddr("10.207.0.1")
	tapStack  = netip.MustParseAddr("10.207.0.2")
)

// TestKernelThroughDevice: the Linux kernel, in a namespace, talks to a
// tickwire stack whose link is a dmaring endpoint served by a software NIC
// on a TAP device: ping, TCP echo of 1 MiB and UDP echo.
func TestKernelThroughDevice(t *testing.T) {
	kerneltest.RequireRoot(t)
	ping := kerneltest.RequireTool(t, "ping")
	ns := kerneltest.NewNetns(t, "twd")
	ns.DisableIPv6(t)
	ep, err := dmaring.New(dmaring.Config{Queues: 2})
	if err != nil {
		t.Fatal(err)
	}
	var w *nicsim.TapWire
	if err := ns.Do(func() (err error) {
		w, err = nicsim.NewTapWire(tap.Config{Name: kerneltest.Name("twd"), MAC: ep.MAC(), Host: netip.PrefixFrom(tapKernel, 24)})
		return err
	}); err != nil {
		ep.Close()
		t.Fatal(err)
	}
	dev, err := nicsim.New(nicsim.Config{Region: ep.Region(), Wakeups: ep.Wakeups(), Wire: w})
	if err != nil {
		w.Close()
		ep.Close()
		t.Fatal(err)
	}
	s, err := tickwire.New(tickwire.Config{Link: ep, MAC: ep.MAC(), Addr: netip.PrefixFrom(tapStack, 24)})
	if err != nil {
		dev.Close()
		ep.Close()
		t.Fatal(err)
	}
	defer dev.Close()
	defer s.Close()

	out := ns.MustRun(t, ping, "-c", "3", "-i", "0.2", "-W", "5", tapStack.String())
	if !strings.Contains(string(out), " 0% packet loss") {
		t.Fatalf("ping: %s", out)
	}

	ln, err := s.ListenTCP(7)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	var c net.Conn
	if err := ns.Do(func() (err error) {
		c, err = net.DialTimeout("tcp", netip.AddrPortFrom(tapStack, 7).String(), 10*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	want := make([]byte, 1<<20)
	rand.Read(want)
	go c.Write(want)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("TCP echo: %v (endpoint %+v, device %+v)", err, ep.Stats(), dev.Stats())
	}
	if !bytes.Equal(got, want) {
		t.Fatal("TCP echo differs")
	}

	srv, err := s.ServeUDP(7, func(c *tickwire.UDPConn, payload []byte, from netip.AddrPort) {
		c.WriteToUDPAddrPort(payload, from)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var u *net.UDPConn
	if err := ns.Do(func() (err error) {
		u, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(tapStack, 7)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	u.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 2048)
	for _, size := range []int{1, 64, 1472} {
		msg := make([]byte, size)
		rand.Read(msg)
		if _, err := u.Write(msg); err != nil {
			t.Fatal(err)
		}
		n, err := u.Read(buf)
		if err != nil || !bytes.Equal(buf[:n], msg) {
			t.Fatalf("UDP echo of %d bytes: %d, %v", size, n, err)
		}
	}
	st := ep.Stats()
	if st.RxBadTCPChecksum+st.RxBadUDPChecksum+st.RxBadIPv4Checksum+st.RxBadICMPChecksum != 0 || dev.Stats().Errors != 0 {
		t.Fatalf("checksum drops or device errors: endpoint %+v device %+v", st, dev.Stats())
	}
	t.Logf("endpoint %+v", st)
}
