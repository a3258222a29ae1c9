package tickwire_test

import (
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/pcap/recorder"
	"github.com/tickwire/tickwire/link/pipe"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// bracket fails the test unless before <= rx <= after.
func bracket(t *testing.T, what string, before, rx, after time.Time) {
	t.Helper()
	if rx.IsZero() || rx.Before(before) || rx.After(after) {
		t.Errorf("%s: RxTime %v, want between %v and %v", what, rx, before, after)
	}
}

// TestUDPRxTime: a datagram over link/pipe carries the time the peer sent
// it, to a handler and to a read.
func TestUDPRxTime(t *testing.T) {
	p := newPair(t, staticARP)
	got := make(chan time.Time, 1)
	srv, err := p.b.ServeUDP(echoPort, func(c *tickwire.UDPConn, _ []byte, _ netip.AddrPort) {
		got <- c.RxTime()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := dialUDP(t, p, echoPort)
	if !srv.RxTime().IsZero() {
		t.Errorf("RxTime before any datagram: %v, want the zero Time", srv.RxTime())
	}
	before := time.Now()
	if _, err := c.Write([]byte("tick")); err != nil {
		t.Fatal(err)
	}
	select {
	case rx := <-got:
		bracket(t, "handler", before, rx, time.Now())
	case <-time.After(5 * time.Second):
		t.Fatal("no datagram")
	}

	rd, err := p.b.ListenUDP(echoPort + 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	before = time.Now()
	other, err := p.a.DialUDP(addrPort(addrB, echoPort+1))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Write([]byte("tock")); err != nil {
		t.Fatal(err)
	}
	rd.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := rd.ReadFromUDPAddrPort(make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	bracket(t, "ReadFromUDPAddrPort", before, rd.RxTime(), time.Now())
}

// TestTCPRxTime: bytes over link/pipe carry the time the peer sent their
// segment, to a handler and to a Read, in stock and latency mode.
func TestTCPRxTime(t *testing.T) {
	for _, latency := range []bool{false, true} {
		t.Run(map[bool]string{false: "stock", true: "latency"}[latency], func(t *testing.T) {
			p := newPair(t, func(c *tickwire.Config) { c.Latency = latency })
			got := make(chan time.Time, 4)
			ln, err := p.b.ServeTCP(echoPort, func(c *tickwire.TCPConn, data []byte, err error) {
				if err == nil {
					got <- c.RxTime()
					c.Write(data)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			c, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, echoPort))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			before := time.Now()
			if _, err := c.Write([]byte("order")); err != nil {
				t.Fatal(err)
			}
			select {
			case rx := <-got:
				bracket(t, "handler", before, rx, time.Now())
			case <-time.After(5 * time.Second):
				t.Fatal("no bytes")
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadFull(c, make([]byte, 5)); err != nil {
				t.Fatal(err)
			}
			bracket(t, "Read", before, c.RxTime(), time.Now())
		})
	}
}

// TestReplayRxTime: a frame replayed from a capture carries its capture
// time, exactly, not the time it was replayed.
func TestReplayRxTime(t *testing.T) {
	pa, pb := pipe.New(pipe.Options{})
	defer pa.Close()
	rec, err := recorder.New(pb, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newStack(tickwire.Config{Link: rec, MAC: pb.MAC(), Addr: addrB})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := make(chan time.Time, 1)
	srv, err := s.ServeUDP(echoPort, func(c *tickwire.UDPConn, _ []byte, _ netip.AddrPort) { got <- c.RxTime() })
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	captured := time.Date(2001, 9, 9, 1, 46, 40, 123456789, time.UTC)
	src := netip.MustParseAddrPort("10.0.0.1:5000")
	frame := ethernet(pb.MAC(), pa.MAC(), uint16(header.IPv4ProtocolNumber),
		ipv4Packet(src.Addr(), addrB.Addr(), uint8(header.UDPProtocolNumber), udpDatagram(src, addrPort(addrB, echoPort), []byte("md"))))
	if err := rec.InjectFrameAt(frame, captured.UnixNano()); err != nil {
		t.Fatal(err)
	}
	select {
	case rx := <-got:
		if !rx.Equal(captured) {
			t.Errorf("RxTime %v, want the capture time %v", rx, captured)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no datagram")
	}
}
