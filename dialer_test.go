package tickwire_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
)

// TestDialerHTTP runs net/http over tickwire: an http.Server on a tickwire
// listener, an http.Client whose Transport dials with Dialer.DialContext.
func TestDialerHTTP(t *testing.T) {
	p := newPair(t, nil)
	ln, err := p.b.ListenTCP(80)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from "+r.Host+r.URL.Path)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	d := &tickwire.Dialer{Stack: p.a, Timeout: 10 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	for range 2 { // the second request reuses the connection
		resp, err := client.Get("http://10.0.0.2/quote")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || string(body) != "hello from 10.0.0.2/quote" {
			t.Fatalf("GET: %v %q %v", resp.Status, body, err)
		}
	}
	if st := p.b.Stats(); st.ConnsAccepted != 1 {
		t.Errorf("server accepted %d connections for two requests, want 1 (keep-alive)", st.ConnsAccepted)
	}
}

func TestDialerAddresses(t *testing.T) {
	p := newPair(t, nil)
	d := &tickwire.Dialer{Stack: p.a}
	ctx := ctxTimeout(t, 10*time.Second)
	for _, tc := range []struct {
		network, address string
		check            func(error) bool
	}{
		{"tcp", "exchange.example:7", func(err error) bool { var ae *net.AddrError; return errors.As(err, &ae) }},
		{"tcp", "10.0.0.2", func(err error) bool { var ae *net.AddrError; return errors.As(err, &ae) }},
		{"tcp", "10.0.0.2:http", func(err error) bool { var ae *net.AddrError; return errors.As(err, &ae) }},
		{"tcp", "[2001:db8::1]:7", func(err error) bool { var ae *net.AddrError; return errors.As(err, &ae) }},
		{"tcp6", "10.0.0.2:7", func(err error) bool { return errors.Is(err, syscall.EAFNOSUPPORT) }},
		{"ip4", "10.0.0.2:7", func(err error) bool { var ue net.UnknownNetworkError; return errors.As(err, &ue) }},
	} {
		c, err := d.DialContext(ctx, tc.network, tc.address)
		if err == nil {
			c.Close()
			t.Errorf("DialContext(%q, %q) succeeded", tc.network, tc.address)
			continue
		}
		var oe *net.OpError
		if !errors.As(err, &oe) || !tc.check(err) {
			t.Errorf("DialContext(%q, %q): %v (%T)", tc.network, tc.address, err, err)
		}
	}
	if _, err := (&tickwire.Dialer{}).Dial("tcp", "10.0.0.2:7"); err == nil {
		t.Error("a Dialer without a Stack dialed")
	}

	// An IPv4-mapped IPv6 literal is IPv4; "tcp4" and "udp" work.
	p.serveEcho(t)
	for _, network := range []string{"tcp", "tcp4"} {
		c, err := d.DialContext(ctx, network, "[::ffff:10.0.0.2]:7")
		if err != nil {
			t.Fatalf("%s: %v", network, err)
		}
		if _, ok := c.(*tickwire.TCPConn); !ok {
			t.Errorf("%s: got a %T, want *tickwire.TCPConn", network, c)
		}
		ping(t, c, "hi")
		c.Close()
	}
	pc, err := p.b.ServeUDP(9, func(c *tickwire.UDPConn, payload []byte, from netip.AddrPort) {
		c.WriteToUDPAddrPort(payload, from)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	c, err := d.DialContext(ctx, "udp4", "10.0.0.2:9")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*tickwire.UDPConn); !ok {
		t.Errorf("udp4: got a %T, want *tickwire.UDPConn", c)
	}
	ping(t, c, "datagram")
}

func TestDialerLocalAddr(t *testing.T) {
	p := newPair(t, nil)
	ln, err := p.b.ListenTCP(7)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := &tickwire.Dialer{Stack: p.a, LocalAddr: &net.TCPAddr{Port: 40001}}
	c, err := d.DialContext(ctxTimeout(t, 10*time.Second), "tcp", "10.0.0.2:7")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := ln.AcceptContext(ctxTimeout(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if got := sc.RemoteAddr().(*net.TCPAddr); got.Port != 40001 {
		t.Errorf("server sees %v, want port 40001", got)
	}
	for _, la := range []net.Addr{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 9), Port: 1}, &net.UDPAddr{Port: 1}} {
		d := &tickwire.Dialer{Stack: p.a, LocalAddr: la}
		if c, err := d.Dial("tcp", "10.0.0.2:7"); err == nil {
			c.Close()
			t.Errorf("LocalAddr %v (%T) accepted", la, la)
		}
	}
}

// TestDialerTimeout dials an address nobody answers: the Dialer's Timeout
// (shorter than Config.ARPTimeout) fails the dial with a timeout error.
func TestDialerTimeout(t *testing.T) {
	p := newPair(t, func(c *tickwire.Config) { c.ARPTimeout = time.Minute })
	d := &tickwire.Dialer{Stack: p.a, Timeout: 50 * time.Millisecond}
	start := time.Now()
	c, err := d.Dial("tcp", "10.0.0.9:7")
	if err == nil {
		c.Close()
		t.Fatal("dial to nobody succeeded")
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want a net.Error timeout wrapping context.DeadlineExceeded", err)
	}
	if el := time.Since(start); el < 50*time.Millisecond || el > 30*time.Second {
		t.Errorf("dial took %v", el)
	}
	if n := p.a.Stats().ConnsOpen; n != 0 {
		t.Errorf("ConnsOpen = %d after a failed dial", n)
	}
}

func TestAcceptDeadline(t *testing.T) {
	p := newPair(t, nil)
	ln, err := p.b.ListenTCP(7)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	ln.SetDeadline(time.Now().Add(20 * time.Millisecond))
	_, err = ln.Accept()
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Accept past the deadline: %v, want a net.Error timeout wrapping os.ErrDeadlineExceeded", err)
	}

	// A deadline moved into the past wakes a blocked Accept.
	errc := make(chan error, 1)
	ln.SetDeadline(time.Time{})
	go func() {
		_, err := ln.Accept()
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond) // usually lets Accept block first; either order must work
	ln.SetDeadline(time.Now())
	select {
	case err := <-errc:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Accept: %v, want os.ErrDeadlineExceeded", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Accept still blocked after its deadline passed")
	}

	// No deadline: Accept takes the next connection.
	ln.SetDeadline(time.Time{})
	c := p.dialTo(t, 7)
	sc, err := ln.Accept()
	if err != nil {
		t.Fatalf("Accept without a deadline: %v", err)
	}
	sc.Close()
	c.Close()
}

func TestAcceptContext(t *testing.T) {
	p := newPair(t, nil)
	ln, err := p.b.ListenTCP(7)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := ln.AcceptContext(ctx)
		errc <- err
	}()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("AcceptContext after cancel: %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("AcceptContext still blocked after cancel")
	}

	tctx, tcancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer tcancel()
	_, err = ln.AcceptContext(tctx)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("AcceptContext past its deadline: %v, want a timeout", err)
	}

	c := p.dialTo(t, 7)
	defer c.Close()
	sc, err := ln.AcceptContext(ctxTimeout(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	sc.Close()
}

// dialTo connects A to port of B with a Dialer.
func (p *pair) dialTo(t testing.TB, port int) net.Conn {
	t.Helper()
	d := &tickwire.Dialer{Stack: p.a, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", net.JoinHostPort(addrB.Addr().String(), strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestServeTCPIgnoresDeadline: a deadline set on a ServeTCP listener does
// not stop its own accepting.
func TestServeTCPIgnoresDeadline(t *testing.T) {
	p := newPair(t, nil)
	ln, err := p.b.ServeTCP(7, echoHandler)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ln.SetDeadline(time.Now())
	for range 2 {
		c := p.dialTo(t, 7)
		ping(t, c, "still served")
		c.Close()
	}
}
