package tickwire_test

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
)

// TestTCPInfo checks TCPConn.Info after an echo exchange: a measured RTT,
// at least the initial window of 10 segments, byte counts equal to what
// was written and read, segment counts, and no allocation.
func TestTCPInfo(t *testing.T) {
	p := newPairOpts(t, wireSized, nil) // it counts segments
	p.serveEcho(t)
	c := p.dialEcho(t).(*tickwire.TCPConn)
	if info := c.Info(); info.State != "ESTABLISHED" || info.BytesSent != 0 || info.CongestionWindow < 10 {
		t.Fatalf("Info of a new connection = %+v", info)
	}
	msg := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB: two send buffers
	c.SetDeadline(time.Now().Add(10 * time.Second))
	go c.Write(msg)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("echo differs")
	}
	info := c.Info()
	t.Logf("%+v", info)
	if info.BytesSent != uint64(len(msg)) || info.BytesReceived != uint64(len(msg)) {
		t.Errorf("BytesSent, BytesReceived = %d, %d; want %d both", info.BytesSent, info.BytesReceived, len(msg))
	}
	if info.RTT <= 0 || info.RTO <= 0 {
		t.Errorf("RTT %v, RTO %v; want both > 0", info.RTT, info.RTO)
	}
	// A retransmission timeout (a loaded machine can hold a segment past
	// the 200 ms RTO) rightly shrinks the window.
	if info.CongestionWindow < 10 && info.Timeouts == 0 {
		t.Errorf("CongestionWindow = %d with no timeout, want >= 10", info.CongestionWindow)
	}
	// 64 KiB in segments of at most 1408 bytes each way, and their ACKs.
	if min := uint64(len(msg) / 1408); info.SegmentsSent < min || info.SegmentsReceived < min {
		t.Errorf("SegmentsSent, SegmentsReceived = %d, %d; want >= %d", info.SegmentsSent, info.SegmentsReceived, min)
	}
	if info.State != "ESTABLISHED" || info.ReceiveQueued != 0 || info.Recovery {
		t.Errorf("State %q, ReceiveQueued %d, Recovery %v", info.State, info.ReceiveQueued, info.Recovery)
	}
	// 2,000 runs: AllocsPerRun counts both stacks' timers too (see
	// TestMulticastSend).
	if n := testing.AllocsPerRun(2000, func() { _ = c.Info() }); n != 0 {
		t.Errorf("Info allocates %v times, want 0", n)
	}
	c.Close()
	if info := c.Info(); info.State == "ESTABLISHED" || info.BytesSent != uint64(len(msg)) {
		t.Errorf("Info after Close = %+v", info)
	}
}

// TestTCPInfoHandler checks that bytes handed to an OnReceive handler
// count as received.
func TestTCPInfoHandler(t *testing.T) {
	p := newPair(t, nil)
	got := make(chan *tickwire.TCPConn, 1)
	ln, err := p.b.ServeTCP(echoPort, func(c *tickwire.TCPConn, b []byte, err error) {
		if err != nil {
			c.Close()
			return
		}
		if c.Info().BytesReceived == 5 {
			got <- c
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c := p.dialEcho(t)
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	select {
	case sc := <-got:
		if info := sc.Info(); info.BytesReceived != 5 || info.BytesSent != 0 {
			t.Errorf("server Info = %+v", info)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler never saw 5 bytes received")
	}
}
