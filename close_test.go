package tickwire_test

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestCloseStopsEverything closes a pair with a listener blocked in Accept,
// a connection blocked in Read and a UDP socket blocked in ReadFrom: every
// call returns, later calls fail with net.ErrClosed, and no goroutine is
// left.
func TestCloseStopsEverything(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	p := newPair(t, nil)
	ln, err := p.b.ListenTCP(7)
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	c, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, 7))
	if err != nil {
		t.Fatal(err)
	}
	srv := <-accepted
	pc, err := p.a.ListenUDP(9)
	if err != nil {
		t.Fatal(err)
	}

	errs := make(chan error, 3)
	go func() { _, err := ln.Accept(); errs <- err }()
	go func() { _, err := c.Read(make([]byte, 10)); errs <- err }()
	go func() { _, _, err := pc.ReadFrom(make([]byte, 10)); errs <- err }()
	time.Sleep(20 * time.Millisecond) // let them block

	p.a.Close()
	p.b.Close()
	for range 3 {
		select {
		case err := <-errs:
			if err == nil {
				t.Error("a blocked call returned no error after Close")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a blocked call did not return after Close")
		}
	}
	c.Close()
	srv.Close()
	pc.Close()
	ln.Close()
	if _, err := p.a.DialTCP(ctxTimeout(t, time.Second), addrPort(addrB, 7)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("dial after Close: %v, want net.ErrClosed", err)
	}
	if _, err := p.a.ListenTCP(8); !errors.Is(err, net.ErrClosed) {
		t.Errorf("listen after Close: %v, want net.ErrClosed", err)
	}
	if _, err := p.a.ListenUDP(8); !errors.Is(err, net.ErrClosed) {
		t.Errorf("ListenUDP after Close: %v, want net.ErrClosed", err)
	}
}

// TestConnSemantics checks io.EOF at the peer's FIN, deadlines, and
// net.ErrClosed after Close.
func TestConnSemantics(t *testing.T) {
	p := newPair(t, nil)
	ln, err := p.b.ListenTCP(7)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	c, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, 7))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv := <-accepted

	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past deadline: %v, want a timeout", err)
	}
	c.SetReadDeadline(time.Time{})

	if _, err := srv.Write([]byte("bye")); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "bye" {
		t.Fatalf("ReadAll = %q, %v; want \"bye\" then io.EOF", got, err)
	}
	c.Close()
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write after Close: %v, want net.ErrClosed", err)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("read after Close: %v, want net.ErrClosed", err)
	}
	if err := c.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("second Close: %v, want net.ErrClosed", err)
	}
	if la, ra := c.LocalAddr().String(), c.RemoteAddr().String(); ra != "10.0.0.2:7" || la[:9] != "10.0.0.1:" {
		t.Errorf("addresses %s -> %s", la, ra)
	}
}

// TestUDPSemantics checks UDP deadlines, truncation and Close.
func TestUDPSemantics(t *testing.T) {
	p := newPair(t, nil)
	pc, err := p.b.ListenUDP(0)
	if err != nil {
		t.Fatal(err)
	}
	port := pc.LocalAddr().(*net.UDPAddr).Port
	if port == 0 || pc.LocalAddr().(*net.UDPAddr).IP.String() != "10.0.0.2" {
		t.Fatalf("local address %v", pc.LocalAddr())
	}
	pc.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	var ne net.Error
	if _, _, err := pc.ReadFrom(make([]byte, 10)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("ReadFrom past deadline: %v", err)
	}
	pc.SetReadDeadline(time.Time{})
	c, err := p.a.DialUDP(addrPort(addrB, uint16(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("0123456789"))
	buf := make([]byte, 4)
	n, from, err := pc.ReadFrom(buf)
	if err != nil || n != 4 || string(buf) != "0123" || from.(*net.UDPAddr).IP.String() != "10.0.0.1" {
		t.Fatalf("truncated read: %d %q from %v, %v", n, buf[:n], from, err)
	}
	// The allocation-free pair, as on *net.UDPConn.
	apc := pc
	local := c.LocalAddr().(*net.UDPAddr).AddrPort()
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	if _, err := apc.WriteToUDPAddrPort([]byte("back"), local); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "back" {
		t.Fatalf("reply: %q, %v", buf[:n], err)
	}
	c.Write([]byte("again"))
	if n, from, err := apc.ReadFromUDPAddrPort(buf); err != nil || n != 4 || from != local {
		t.Fatalf("ReadFromUDPAddrPort: %d from %v, %v; want 4 from %v", n, from, err, local)
	}
	if _, err := pc.WriteTo([]byte("x"), &net.UDPAddr{IP: net.ParseIP("fd00::1"), Port: 1}); err == nil {
		t.Error("WriteTo an IPv6 address succeeded")
	}
	pc.Close()
	if _, _, err := pc.ReadFrom(buf); !errors.Is(err, net.ErrClosed) {
		t.Errorf("ReadFrom after Close: %v, want net.ErrClosed", err)
	}
}
