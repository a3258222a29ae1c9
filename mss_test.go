package tickwire_test

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
)

// wireMSS sends 1 MiB from A to B and reports what the wire saw: the MSS
// options of A's SYN and B's SYN-ACK, whether any SYN offered timestamps,
// and the largest TCP payload A sent (with how many segments had it).
type wireMSS struct {
	synMSS, synAckMSS int
	timestamps        bool
	maxPayload, atMax int
	foreign           int // frames neither ARP nor IPv4 carrying ICMP, UDP or TCP
}

func measureMSS(t *testing.T, tweakA, tweakB func(*tickwire.Config)) wireMSS {
	t.Helper()
	p := newPairOpts(t, wireSized, func(c *tickwire.Config) {
		if c.Addr == addrA && tweakA != nil {
			tweakA(c)
		}
		if c.Addr == addrB && tweakB != nil {
			tweakB(c)
		}
	})
	var fromA, fromB capture
	p.pa.SetSniffer(fromA.record)
	p.pb.SetSniffer(fromB.record)

	ln, err := p.b.ListenTCP(5001)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		_, err = io.Copy(io.Discard, c)
		done <- err
	}()
	c, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, 5001))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(randomBytes(1<<20, 3)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	p.pa.SetSniffer(nil)
	p.pb.SetSniffer(nil)

	var m wireMSS
	for _, f := range append(fromA.snapshot(), fromB.snapshot()...) {
		if !speaksOnly(f) {
			m.foreign++
		}
	}
	for _, f := range fromA.snapshot() {
		seg, n, ok := tcpSegment(f)
		if !ok {
			continue
		}
		if seg.Flags()&header.TCPFlagSyn != 0 {
			opts := header.ParseSynOptions(seg.Options(), false)
			m.synMSS = int(opts.MSS)
			m.timestamps = m.timestamps || opts.TS
		}
		switch {
		case n > m.maxPayload:
			m.maxPayload, m.atMax = n, 1
		case n == m.maxPayload:
			m.atMax++
		}
	}
	for _, f := range fromB.snapshot() {
		if seg, _, ok := tcpSegment(f); ok && seg.Flags()&header.TCPFlagSyn != 0 {
			opts := header.ParseSynOptions(seg.Options(), true)
			m.synAckMSS = int(opts.MSS)
			m.timestamps = m.timestamps || opts.TS
		}
	}
	return m
}

// TestMSSOnTheWire checks the SYN and SYN-ACK MSS options and the payload of
// full segments on the wire.
func TestMSSOnTheWire(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		m := measureMSS(t, nil, nil)
		if m.synMSS != 1408 || m.synAckMSS != 1408 {
			t.Errorf("MSS options: SYN %d, SYN-ACK %d; want 1408 both", m.synMSS, m.synAckMSS)
		}
		if m.timestamps {
			t.Error("a SYN on the wire offers TCP timestamps")
		}
		if m.foreign != 0 {
			t.Errorf("%d frames of other protocols on the wire (IGMP? IPv6?)", m.foreign)
		}
		if m.maxPayload != 1408 || m.atMax < 100 {
			t.Errorf("largest payload %d bytes in %d segments; want 1408 in most of 1 MiB", m.maxPayload, m.atMax)
		}
	})
	t.Run("peer offers 1460", func(t *testing.T) {
		// B advertises 1460, as a Linux host on a 1500-byte link does; A
		// clamps it and still sends 1408-byte segments.
		m := measureMSS(t, nil, func(c *tickwire.Config) { c.MSS = 1460 })
		if m.synAckMSS != 1460 {
			t.Errorf("SYN-ACK MSS %d, want 1460", m.synAckMSS)
		}
		if m.maxPayload != 1408 {
			t.Errorf("largest payload %d, want 1408", m.maxPayload)
		}
	})
	t.Run("SACK", func(t *testing.T) {
		// netstack reserves 36 bytes of SACK option space per segment.
		m := measureMSS(t, func(c *tickwire.Config) { c.SACK = true }, func(c *tickwire.Config) { c.SACK = true })
		if m.synMSS != 1408 || m.maxPayload != 1408-36 {
			t.Errorf("SYN MSS %d, largest payload %d; want 1408 and %d", m.synMSS, m.maxPayload, 1408-36)
		}
	})
}

// TestInitialCongestionWindow pins netstack's initial window of 10 segments,
// the figure tickwire documents, so that an upgrade cannot change it
// silently.
func TestInitialCongestionWindow(t *testing.T) {
	if tcp.InitialCwnd != 10 {
		t.Fatalf("tcp.InitialCwnd = %d, want 10", tcp.InitialCwnd)
	}
}

// TestConnOptions checks the per-connection options on both ends: Nagle off,
// 32 KiB buffers, Reno (MSS is checked on the wire), and a fresh connection's congestion window
// of 10 segments; and that the Config switches reach the connection.
func TestConnOptions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tweak func(*tickwire.Config)
		want  tickwire.ConnOptions
	}{
		{"defaults", nil, tickwire.ConnOptions{Delay: false, SendBuffer: 32 << 10, ReceiveBuffer: 32 << 10, Congestion: "reno", SndCwnd: 10,
			Keepalive: true, KeepaliveIdle: 30 * time.Second, KeepaliveInterval: 5 * time.Second, KeepaliveCount: 5, UserTimeout: 55 * time.Second}},
		{"tuned", func(c *tickwire.Config) {
			c.DisableNoDelay, c.SendBuffer, c.ReceiveBuffer, c.Congestion, c.MSS = true, 64<<10, 128<<10, "cubic", 1000
			c.KeepaliveIdle, c.KeepaliveInterval, c.KeepaliveCount = time.Second, 100*time.Millisecond, 2
		}, tickwire.ConnOptions{Delay: true, SendBuffer: 64 << 10, ReceiveBuffer: 128 << 10, Congestion: "cubic", SndCwnd: 10,
			Keepalive: true, KeepaliveIdle: time.Second, KeepaliveInterval: 100 * time.Millisecond, KeepaliveCount: 2, UserTimeout: 1200 * time.Millisecond}},
		// Keepalive off: the parameters, unused, are tickwire's defaults,
		// which SetKeepAlive(true) would turn on.
		{"keepalive off", func(c *tickwire.Config) { c.KeepaliveIdle = -1 }, tickwire.ConnOptions{
			SendBuffer: 32 << 10, ReceiveBuffer: 32 << 10, Congestion: "reno", SndCwnd: 10,
			KeepaliveIdle: 30 * time.Second, KeepaliveInterval: 5 * time.Second, KeepaliveCount: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, tc.tweak)
			ln, err := p.b.ListenTCP(7)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			accepted := make(chan net.Conn, 1)
			go func() {
				if c, err := ln.Accept(); err == nil {
					accepted <- c
				}
			}()
			c, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, 7))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			srv := <-accepted
			defer srv.Close()
			for side, conn := range map[string]net.Conn{"dialed": c, "accepted": srv} {
				if got := tickwire.ConnOptionsOf(conn); got != tc.want {
					t.Errorf("%s: %+v, want %+v", side, got, tc.want)
				}
			}
		})
	}
}

// speaksOnly reports whether a frame is ARP or IPv4 carrying ICMP, UDP or
// TCP: all a tickwire stack may send.
func speaksOnly(frame []byte) bool {
	switch header.Ethernet(frame).Type() {
	case header.ARPProtocolNumber:
		return true
	case header.IPv4ProtocolNumber:
		switch header.IPv4(frame[header.EthernetMinimumSize:]).Protocol() {
		case uint8(header.ICMPv4ProtocolNumber), uint8(header.UDPProtocolNumber), uint8(header.TCPProtocolNumber):
			return true
		}
	}
	return false
}
