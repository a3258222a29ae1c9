package tickwire_test

import (
	"net"
	"slices"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
)

// UDP round-trip benchmarks: 64-byte datagram and its echo, through
// tickwire's handler API and through the kernel's loopback in the same run.
// Each reports the mean (ns/op) and, as p50-ns and p99-ns, percentiles of
// the individual round trips.
//
//	go test -run '^$' -bench 'UDPRTT' -count 5 .

// rttRecorder times the round trips of one benchmark run.
type rttRecorder struct {
	d []time.Duration
}

func (r *rttRecorder) time(b *testing.B, roundTrip func()) {
	r.d = make([]time.Duration, 0, max(b.N, 1))
	b.ReportAllocs()
	b.SetBytes(64)
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		roundTrip()
		r.d = append(r.d, time.Since(t0))
	}
	b.StopTimer()
	if len(r.d) == 0 {
		return
	}
	slices.Sort(r.d)
	b.ReportMetric(float64(r.d[len(r.d)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(r.d[len(r.d)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkUDPRTTServeUDP: the server echoes from an OnReceive handler,
// the client uses Write and Read of its connected socket.
func BenchmarkUDPRTTServeUDP(b *testing.B) {
	p := newPair(b, staticARP)
	udpEchoHandler(b, p, echoPort)
	c := dialUDP(b, p, echoPort)
	benchConnRTT(b, c)
}

// BenchmarkUDPRTTServeUDPLatency is BenchmarkUDPRTTServeUDP with both
// stacks in latency mode (Config.Latency, no busy-poll).
func BenchmarkUDPRTTServeUDPLatency(b *testing.B) {
	p := newPair(b, func(c *tickwire.Config) {
		staticARP(c)
		c.Latency = true
	})
	udpEchoHandler(b, p, echoPort)
	c := dialUDP(b, p, echoPort)
	benchConnRTT(b, c)
}

// BenchmarkUDPRTTReadFrom: the server is a goroutine looping on
// ReadFromUDPAddrPort and WriteToUDPAddrPort.
func BenchmarkUDPRTTReadFrom(b *testing.B) {
	p := newPair(b, staticARP)
	udpEchoServer(b, p, echoPort)
	c := dialUDP(b, p, echoPort)
	benchConnRTT(b, c)
}

// BenchmarkUDPRTTKernel: the same over the kernel's loopback with Go's net
// package (a goroutine echoing with ReadFromUDPAddrPort).
func BenchmarkUDPRTTKernel(b *testing.B) {
	srv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	echoUDP(b, srv)
	c, err := net.DialUDP("udp", nil, srv.LocalAddr().(*net.UDPAddr))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	benchConnRTT(b, c)
}

func benchConnRTT(b *testing.B, c net.Conn) {
	c.SetReadDeadline(time.Now().Add(10 * time.Minute))
	msg := make([]byte, 64)
	buf := make([]byte, 2048)
	var r rttRecorder
	r.time(b, func() {
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
		if n, err := c.Read(buf); err != nil || n != 64 {
			b.Fatalf("read %d, %v", n, err)
		}
	})
}
