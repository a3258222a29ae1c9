package twin_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/hwoffload"
	"github.com/tickwire/tickwire/hwoffload/twin"
	"github.com/tickwire/tickwire/link/pipe"
)

// hostPair runs a twin whose host path is one end of a link/pipe, its
// IP_ADDR 10.9.0.2/24, and a tickwire.Stack at 10.9.0.1 on the other end.
func hostPair(t *testing.T) (*hwoffload.Device, *tickwire.Stack) {
	t.Helper()
	a, b := pipe.New(pipe.Options{})
	peer, err := tickwire.New(tickwire.Config{Link: b, MAC: b.MAC(), Addr: netip.MustParsePrefix("10.9.0.1/24")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	_, dev := startConfig(t, twin.Config{Link: a, RingLog2: 8})
	if err := dev.Configure(hwoffload.Config{Addr: netip.MustParsePrefix("10.9.0.2/24"), MAC: a.MAC()}); err != nil {
		t.Fatal(err)
	}
	if err := dev.Run(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	return dev, peer
}

// echo copies what c reads back to it until EOF.
func echo(c net.Conn) {
	io.Copy(c, c)
	c.Close()
}

// TestHostTCPListen: a peer connects to a LISTEN port of the twin, and what
// it sends comes back through the RX and TX buffers, 200 KiB (the 32 KiB
// buffers wrap several times).
func TestHostTCPListen(t *testing.T) {
	dev, peer := hostPair(t)
	ctx := ctxT(t)
	ln, err := dev.Listen(ctx, 7000)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if dev.Read32(hwoffload.RegListenPorts+7000/32*4)&(1<<(7000%32)) == 0 {
		t.Error("LISTEN port bit not set")
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go echo(c)
		}
	}()
	c, err := peer.DialTCP(ctx, netip.MustParseAddrPort("10.9.0.2:7000"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip(t, c, 200<<10)
	if n := len(dev.ARPTable()); n == 0 {
		// the table is published every 10 ms: wait for it
		for ctx.Err() == nil && len(dev.ARPTable()) == 0 {
		}
	}
	tab := dev.ARPTable()
	if len(tab) != 1 || tab[0].Addr != netip.MustParseAddr("10.9.0.1") || !tab[0].Resolved {
		t.Errorf("ARP table %+v, ARP_COUNT %d; want 10.9.0.1 resolved", tab, dev.Read32(hwoffload.RegARPCount))
	}
}

// roundTrip writes n bytes to c and reads them back, concurrently.
func roundTrip(t *testing.T, c net.Conn, n int) {
	t.Helper()
	msg := make([]byte, n)
	for i := range msg {
		msg[i] = byte(i*7 + i/251)
	}
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(msg)
		werr <- err
	}()
	got := make([]byte, n)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("echoed bytes differ")
	}
}

// TestHostTCPOpen: OPEN to a peer's echo server, the same round trip, then
// CLOSE frees the session.
func TestHostTCPOpen(t *testing.T) {
	dev, peer := hostPair(t)
	ctx := ctxT(t)
	pln, err := peer.ListenTCP(9000)
	if err != nil {
		t.Fatal(err)
	}
	defer pln.Close()
	go func() {
		for {
			c, err := pln.Accept()
			if err != nil {
				return
			}
			go echo(c)
		}
	}()
	c, err := dev.Dial(ctx, netip.MustParseAddrPort("10.9.0.1:9000"))
	if err != nil {
		t.Fatal(err)
	}
	if st := dev.Read32(hwoffload.SessReg(c.Session(), hwoffload.SessState)); st != hwoffload.SessEstablished {
		t.Errorf("session state %d", st)
	}
	roundTrip(t, c, 100<<10)
	c.Close()
	for dev.Read32(hwoffload.SessReg(c.Session(), hwoffload.SessState)) != hwoffload.SessFree {
		if ctx.Err() != nil {
			t.Fatal("session not freed after CLOSE")
		}
	}
	if _, err := dev.Dial(ctx, netip.MustParseAddrPort("10.9.0.1:9001")); !errors.As(err, new(*hwoffload.HostError)) {
		t.Errorf("OPEN to a closed port: %v, want a HostError", err)
	}
}

// TestHostUDP: UDP_BIND, a peer's datagrams arrive with their sender, and
// UDP_SEND answers them.
func TestHostUDP(t *testing.T) {
	dev, peer := hostPair(t)
	ctx := ctxT(t)
	pc, err := dev.ListenUDP(ctx, 5000)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if dev.Read32(hwoffload.RegUDPPorts+5000/32*4)&(1<<(5000%32)) == 0 {
		t.Error("UDP port bit not set")
	}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(buf[:n], from)
		}
	}()
	u, err := peer.DialUDP(netip.MustParseAddrPort("10.9.0.2:5000"))
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	buf := make([]byte, 2048)
	for i := range 100 {
		msg := bytes.Repeat([]byte{byte(i)}, 1+i*14)
		if _, err := u.Write(msg); err != nil {
			t.Fatal(err)
		}
		n, err := u.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf[:n], msg) {
			t.Fatalf("datagram %d: got %d bytes, want %d", i, n, len(msg))
		}
	}
	_ = context.Background
}

// TestConfigAtRun: the network configuration is taken at RUN. With a
// LISTEN port and a UDP port open at 10.9.0.2 and a connection on the
// former, the host stops the engine, configures 10.9.0.3 and a new MAC,
// and runs it again: the connection is reset (the host's Read fails), the
// peer reaches both ports at 10.9.0.3 through the new MAC, and 10.9.0.2
// no longer answers.
func TestConfigAtRun(t *testing.T) {
	dev, peer := hostPair(t)
	ctx := ctxT(t)
	ln, err := dev.Listen(ctx, 7000)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	pc, err := dev.ListenUDP(ctx, 5000)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			pc.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	old, err := peer.DialTCP(ctx, netip.MustParseAddrPort("10.9.0.2:7000"))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	hc := <-accepted
	readErr := make(chan error, 1)
	go func() {
		_, err := hc.Read(make([]byte, 10))
		readErr <- err
	}()

	if err := dev.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	mac := net.HardwareAddr{0x02, 0, 0, 0, 0x33, 0x33}
	if err := dev.Configure(hwoffload.Config{Addr: netip.MustParsePrefix("10.9.0.3/24"), MAC: mac}); err != nil {
		t.Fatal(err)
	}
	if err := dev.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-readErr; err == nil || err == io.EOF {
		t.Errorf("Read on the connection made before the change: %v, want a reset", err)
	}
	hc.Close()
	go func() { // the connections made from now on
		for c := range accepted {
			go echo(c)
		}
	}()
	c, err := peer.DialTCP(ctx, netip.MustParseAddrPort("10.9.0.3:7000"))
	if err != nil {
		t.Fatalf("LISTEN port at the new address: %v", err)
	}
	defer c.Close()
	roundTrip(t, c, 10<<10)
	u, err := peer.DialUDP(netip.MustParseAddrPort("10.9.0.3:5000"))
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if _, err := u.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := u.Read(buf); err != nil || string(buf[:n]) != "ping" {
		t.Fatalf("UDP port at the new address: %q, %v", buf[:n], err)
	}
	for _, e := range peer.ARPTable() {
		if e.Addr == netip.MustParseAddr("10.9.0.3") && e.Resolved && e.MAC.String() != mac.String() {
			t.Errorf("peer resolved 10.9.0.3 to %v, want %v", e.MAC, mac)
		}
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if c, err := peer.DialTCP(short, netip.MustParseAddrPort("10.9.0.2:7000")); err == nil {
		c.Close()
		t.Error("the old address still accepts connections")
	}
	if err := dev.Err(); err != nil {
		t.Errorf("ERROR %v", err)
	}
}
