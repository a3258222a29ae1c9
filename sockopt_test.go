package tickwire_test

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// connPair returns a connection dialed from A and the one B accepted for it.
func (p *pair) connPair(t testing.TB) (client, server *tickwire.TCPConn) {
	t.Helper()
	ln, err := p.b.ListenTCP(0)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c := p.dialTo(t, ln.Addr().(*net.TCPAddr).Port).(*tickwire.TCPConn)
	t.Cleanup(func() { c.Close() })
	s, err := ln.AcceptContext(ctxTimeout(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return c, s
}

// port returns c's local port.
func port(c net.Conn) uint16 { return uint16(c.LocalAddr().(*net.TCPAddr).Port) }

func TestKeepAliveOptions(t *testing.T) {
	p := newPair(t, nil)
	c, _ := p.connPair(t)
	o := tickwire.ConnOptionsOf(c)
	if !o.Keepalive || o.KeepaliveIdle != tickwire.DefaultKeepaliveIdle || o.UserTimeout != 55*time.Second {
		t.Fatalf("defaults: %+v", o)
	}
	if err := c.SetKeepAlive(false); err != nil {
		t.Fatal(err)
	}
	if o := tickwire.ConnOptionsOf(c); o.Keepalive || o.UserTimeout != 0 || o.KeepaliveIdle != tickwire.DefaultKeepaliveIdle {
		t.Errorf("SetKeepAlive(false): %+v", o)
	}
	if err := c.SetKeepAlivePeriod(7 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.SetKeepAlive(true); err != nil {
		t.Fatal(err)
	}
	if o := tickwire.ConnOptionsOf(c); !o.Keepalive || o.KeepaliveIdle != 7*time.Second || o.UserTimeout != 7*time.Second+5*5*time.Second {
		t.Errorf("SetKeepAlivePeriod(7s), SetKeepAlive(true): %+v", o)
	}
	if err := c.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: 2 * time.Second, Interval: time.Second, Count: 3}); err != nil {
		t.Fatal(err)
	}
	if o := tickwire.ConnOptionsOf(c); !o.Keepalive || o.KeepaliveIdle != 2*time.Second || o.KeepaliveInterval != time.Second ||
		o.KeepaliveCount != 3 || o.UserTimeout != 5*time.Second {
		t.Errorf("SetKeepAliveConfig: %+v", o)
	}
	// Negative: unchanged; zero: Config's.
	if err := c.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: -1, Interval: 0, Count: -1}); err != nil {
		t.Fatal(err)
	}
	if o := tickwire.ConnOptionsOf(c); o.KeepaliveIdle != 2*time.Second || o.KeepaliveInterval != tickwire.DefaultKeepaliveInterval || o.KeepaliveCount != 3 {
		t.Errorf("SetKeepAliveConfig(-1, 0, -1): %+v", o)
	}
	for _, bad := range []net.KeepAliveConfig{
		{Enable: true, Idle: time.Millisecond},
		{Enable: true, Interval: 40000 * time.Second},
		{Enable: true, Count: 128},
	} {
		if err := c.SetKeepAliveConfig(bad); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("SetKeepAliveConfig(%+v) = %v, want EINVAL", bad, err)
		}
	}

	// The Dialer's fields, as net.Dialer's.
	ln, err := p.b.ListenTCP(0)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	for _, tc := range []struct {
		d    tickwire.Dialer
		want func(tickwire.ConnOptions) bool
	}{
		{tickwire.Dialer{KeepAlive: -1}, func(o tickwire.ConnOptions) bool { return !o.Keepalive && o.UserTimeout == 0 }},
		{tickwire.Dialer{KeepAlive: 3 * time.Second}, func(o tickwire.ConnOptions) bool {
			return o.Keepalive && o.KeepaliveIdle == 3*time.Second && o.KeepaliveInterval == tickwire.DefaultKeepaliveInterval
		}},
		{tickwire.Dialer{KeepAlive: -1, KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: time.Second, Interval: time.Second, Count: 2}},
			func(o tickwire.ConnOptions) bool { return o.Keepalive && o.UserTimeout == 3*time.Second }},
	} {
		d := tc.d
		d.Stack = p.a
		c, err := d.DialContext(ctxTimeout(t, 10*time.Second), "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if o := tickwire.ConnOptionsOf(c); !tc.want(o) {
			t.Errorf("Dialer{KeepAlive: %v, KeepAliveConfig: %+v}: %+v", tc.d.KeepAlive, tc.d.KeepAliveConfig, o)
		}
		c.Close()
	}
}

// TestKeepAliveProbes: a connection with a 50 ms keepalive sends probes to
// a silent peer; one with Config's 30 s sends none meanwhile.
func TestKeepAliveProbes(t *testing.T) {
	p := newPair(t, nil)
	fast, _ := p.connPair(t)
	slow, _ := p.connPair(t)
	if err := fast.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: 50 * time.Millisecond, Interval: 50 * time.Millisecond, Count: 5}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var frames capture
	p.pa.SetSniffer(frames.record)
	defer p.pa.SetSniffer(nil)
	probes := func(c net.Conn) int {
		n := 0
		for _, f := range frames.snapshot() {
			if seg, payload, ok := tcpSegment(f); ok && seg.SourcePort() == port(c) && payload == 0 && seg.Flags() == header.TCPFlagAck {
				n++
			}
		}
		return n
	}
	for probes(fast) < 3 {
		if time.Since(start) > 20*time.Second {
			t.Fatalf("%d keepalive probes in 20 s with a 50 ms keepalive", probes(fast))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if el := time.Since(start); el < 100*time.Millisecond {
		t.Errorf("3 probes %v after the last data: sooner than idle + 2 intervals (150 ms)", el)
	}
	if n := probes(slow); n != 0 {
		t.Errorf("the connection with Config's 30 s keepalive sent %d probes", n)
	}
	// The peer answers the probes: the connection lives on.
	if info := fast.Info(); info.State != "ESTABLISHED" {
		t.Errorf("state after probes: %s", info.State)
	}
}

// TestNoDelay writes bursts of five single bytes: with Nagle's algorithm
// off (the default) each leaves in a segment of its own; with it on, the
// bytes written while the first is unacknowledged wait and leave together.
func TestNoDelay(t *testing.T) {
	p := newPair(t, nil)
	const rounds, burst = 20, 5
	segments := func(noDelay bool) int {
		c, s := p.connPair(t)
		if err := c.SetNoDelay(noDelay); err != nil {
			t.Fatal(err)
		}
		if got := tickwire.ConnOptionsOf(c).Delay; got == noDelay {
			t.Fatalf("SetNoDelay(%v): Nagle on = %v", noDelay, got)
		}
		var frames capture
		p.pa.SetSniffer(frames.record)
		defer p.pa.SetSniffer(nil)
		buf := make([]byte, burst)
		for range rounds {
			for range burst {
				if _, err := c.Write([]byte{'x'}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := io.ReadFull(s, buf); err != nil {
				t.Fatal(err)
			}
		}
		n := 0
		for _, f := range frames.snapshot() {
			if seg, payload, ok := tcpSegment(f); ok && seg.SourcePort() == port(c) && payload > 0 {
				n++
			}
		}
		return n
	}
	on, off := segments(false), segments(true)
	t.Logf("%d bursts of %d one-byte writes: %d segments with Nagle, %d without", rounds, burst, on, off)
	// Measured: 96 to 100 without, 21 to 51 with (a loaded machine lets
	// more ACKs in between the writes of a burst).
	if off < rounds*burst*3/4 || on > off*3/4 {
		t.Errorf("%d bursts of %d one-byte writes: %d segments with Nagle, %d without: want about %d without and under 3/4 of that with",
			rounds, burst, on, off, rounds*burst)
	}
}

// TestTOS checks the type-of-service byte on the wire.
func TestTOS(t *testing.T) {
	p := newPair(t, nil)
	c, s := p.connPair(t)
	var frames capture
	p.pa.SetSniffer(frames.record)
	defer p.pa.SetSniffer(nil)
	tosOf := func(msg string) []uint8 {
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(s, make([]byte, len(msg))); err != nil {
			t.Fatal(err)
		}
		var tos []uint8
		for _, f := range frames.snapshot() {
			if seg, payload, ok := tcpSegment(f); ok && seg.SourcePort() == port(c) && payload == len(msg) && string(seg.Payload()) == msg {
				v, _ := header.IPv4(f[header.EthernetMinimumSize:]).TOS()
				tos = append(tos, v)
			}
		}
		return tos
	}
	if got := tosOf("plain"); len(got) != 1 || got[0] != 0 {
		t.Errorf("default TOS on the wire: %v, want [0]", got)
	}
	if err := c.SetTOS(46 << 2); err != nil { // DSCP EF
		t.Fatal(err)
	}
	if got := tosOf("expedited"); len(got) != 1 || got[0] != 0xb8 {
		t.Errorf("TOS on the wire after SetTOS(0xb8): %#x, want [0xb8]", got)
	}
	if err := c.SetTOS(256); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("SetTOS(256) = %v, want EINVAL", err)
	}
}

// TestBuffers: SetReadBuffer changes how much a connection whose program
// does not read takes in, SetWriteBuffer how much a blocked Write queues.
func TestBuffers(t *testing.T) {
	p := newPair(t, nil)
	// queued fills a receiver that does not read, and returns what it
	// took in and what the sender's Write queued before blocking.
	queued := func(rcv, snd int) (received, written int) {
		c, s := p.connPair(t)
		if rcv != 0 {
			if err := s.SetReadBuffer(rcv); err != nil {
				t.Fatal(err)
			}
		}
		if snd != 0 {
			if err := c.SetWriteBuffer(snd); err != nil {
				t.Fatal(err)
			}
		}
		c.SetWriteDeadline(time.Now().Add(500 * time.Millisecond))
		n, err := c.Write(make([]byte, 1<<20))
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Write of 1 MiB to a peer that does not read: %d, %v", n, err)
		}
		var last int
		settled(func() bool {
			q := s.Info().ReceiveQueued
			stable := q == last && q > 0
			last = q
			return stable
		})
		return s.Info().ReceiveQueued, n
	}
	r1, w1 := queued(0, 0)
	r2, _ := queued(64<<10, 0)
	_, w3 := queued(0, 8<<10)
	t.Logf("received: %d with the default buffer, %d with 64 KiB; written: %d with the default send buffer, %d with 8 KiB", r1, r2, w1, w3)
	if r2 < r1+8<<10 {
		t.Errorf("a peer with a 64 KiB receive buffer took %d bytes, with 32 KiB %d: want more", r2, r1)
	}
	if w3 > w1-4<<10 {
		t.Errorf("a Write with an 8 KiB send buffer queued %d bytes, with 32 KiB %d: want fewer", w3, w1)
	}
	c, _ := p.connPair(t)
	if o := tickwire.ConnOptionsOf(c); o.SendBuffer != 32<<10 {
		t.Errorf("default send buffer %d", o.SendBuffer)
	}
	c.SetWriteBuffer(100 << 10)
	c.SetReadBuffer(200 << 10)
	if o := tickwire.ConnOptionsOf(c); o.SendBuffer != 100<<10 || o.ReceiveBuffer != 200<<10 {
		t.Errorf("after SetWriteBuffer(100 KiB), SetReadBuffer(200 KiB): %d, %d", o.SendBuffer, o.ReceiveBuffer)
	}
	for _, n := range []int{100, 5 << 20} {
		if err := c.SetReadBuffer(n); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("SetReadBuffer(%d) = %v, want EINVAL", n, err)
		}
		if err := c.SetWriteBuffer(n); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("SetWriteBuffer(%d) = %v, want EINVAL", n, err)
		}
	}
}

// TestUDPTOS checks the type-of-service byte of UDP datagrams on the wire.
func TestUDPTOS(t *testing.T) {
	p := newPair(t, nil)
	srv, err := p.b.ListenUDP(9)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, err := p.a.DialUDP(addrPort(addrB, 9))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var frames capture
	p.pa.SetSniffer(frames.record)
	defer p.pa.SetSniffer(nil)
	if err := c.SetTOS(46<<2 | 1); err != nil { // DSCP EF, an ECN bit dropped
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	settled(func() bool { // the first datagram may wait for ARP
		c.Write([]byte("quote"))
		srv.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, _, err := srv.ReadFromUDPAddrPort(buf)
		return err == nil
	})
	found := 0
	for _, f := range frames.snapshot() {
		ip := header.IPv4(f[header.EthernetMinimumSize:])
		if header.Ethernet(f).Type() != header.IPv4ProtocolNumber || ip.Protocol() != uint8(header.UDPProtocolNumber) {
			continue
		}
		found++
		if tos, _ := ip.TOS(); tos != 0xb8 {
			t.Errorf("UDP datagram with TOS %#x, want 0xb8", tos)
		}
	}
	if found == 0 {
		t.Fatal("no UDP datagram on the wire")
	}
	if err := c.SetTOS(-1); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("SetTOS(-1) = %v, want EINVAL", err)
	}
}
