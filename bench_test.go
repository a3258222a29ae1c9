package tickwire_test

import (
	"io"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
)

// BenchmarkTCPPingPong64 measures a 64-byte request and its 64-byte echo on
// one connection between two stacks over link/pipe.
func BenchmarkTCPPingPong64(b *testing.B) {
	p := newPair(b, nil)
	p.serveEcho(b)
	c := p.dialEcho(b)
	msg := make([]byte, 64)
	buf := make([]byte, 64)
	b.ReportAllocs()
	b.SetBytes(64)
	for b.Loop() {
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTCPPingPong64Latency is BenchmarkTCPPingPong64 in latency mode,
// net.Conn on both sides.
func BenchmarkTCPPingPong64Latency(b *testing.B) {
	p := newPair(b, latencyMode)
	p.serveEcho(b)
	c := p.dialEcho(b)
	msg := make([]byte, 64)
	buf := make([]byte, 64)
	b.ReportAllocs()
	b.SetBytes(64)
	for b.Loop() {
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTCPPingPong64Handler measures the handler API in latency mode: a
// ServeTCP echo handler, and a client that writes and takes the echo in its
// OnReceive handler.
func BenchmarkTCPPingPong64Handler(b *testing.B) {
	p := newPair(b, latencyMode)
	ln, err := p.b.ServeTCP(7, echoHandler)
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	c, err := p.a.DialTCP(ctxTimeout(b, 5*time.Second), addrPort(addrB, 7))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var received atomic.Int64
	c.OnReceive(func(_ *tickwire.TCPConn, data []byte, _ error) { received.Add(int64(len(data))) })
	msg := make([]byte, 64)
	var want int64
	b.ReportAllocs()
	b.SetBytes(64)
	for b.Loop() {
		want += int64(len(msg))
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
		for received.Load() < want {
			runtime.Gosched()
		}
	}
}

// BenchmarkTCPBulk measures one-way throughput in 64 KiB writes.
func BenchmarkTCPBulk(b *testing.B) {
	p := newPair(b, nil)
	ln, err := p.b.ListenTCP(9)
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(io.Discard, c)
	}()
	c, err := p.a.DialTCP(ctxTimeout(b, 5*time.Second), addrPort(addrB, 9))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	chunk := make([]byte, 64<<10)
	b.ReportAllocs()
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		if _, err := c.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUDPPingPong64 measures a 64-byte datagram and its echo.
func BenchmarkUDPPingPong64(b *testing.B) {
	p := newPair(b, nil)
	srv, err := p.b.ListenUDP(7)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := srv.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			srv.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	c, err := p.a.DialUDP(addrPort(addrB, 7))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	msg := make([]byte, 64)
	buf := make([]byte, 2048)
	b.ReportAllocs()
	b.SetBytes(64)
	for b.Loop() {
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Read(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTCPPingPongDoesNotAllocate asserts that a 64-byte request and its echo
// between two stacks over link/pipe allocate nothing in steady state, on
// either side and in netstack in between.
func TestTCPPingPongDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items; run without -race")
	}
	p := newPair(t, nil)
	p.serveEcho(t)
	c := p.dialEcho(t)
	msg := make([]byte, 64)
	buf := make([]byte, 64)
	roundTrip := func() {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		_ = c.(*tickwire.TCPConn).RxTime()
	}
	for range 100 {
		roundTrip() // warm the pools
	}
	if allocs := testing.AllocsPerRun(2000, roundTrip); allocs != 0 {
		t.Errorf("%.0f allocations per round trip, want 0", allocs)
	}
}
