package tickwire_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/pipe"
)

func latencyMode(c *tickwire.Config) { c.Latency = true }

// TestSuiteInLatencyMode runs this package's whole test suite again with
// TICKWIRE_LATENCY=1, which turns Config.Latency on in every stack the tests
// build with newStack: the foundation's tests must pass in both modes.
func TestSuiteInLatencyMode(t *testing.T) {
	if suiteLatency {
		t.Skip("already in latency mode")
	}
	if testing.Short() {
		t.Skip("runs the suite a second time")
	}
	for _, busyPoll := range []string{"0s", "20us"} {
		t.Run("busypoll="+busyPoll, func(t *testing.T) {
			// The child's timeout is well inside go test's default 10m, so
			// that a hang in it shows its goroutines here.
			cmd := exec.Command(os.Args[0], "-test.count=1", "-test.timeout=4m", "-test.skip=^TestSuiteInLatencyMode$")
			cmd.Env = append(os.Environ(), "TICKWIRE_LATENCY=1", "TICKWIRE_BUSYPOLL="+busyPoll)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("suite in latency mode: %v\n%s", err, out)
			}
		})
	}
}

func TestLatencyConfig(t *testing.T) {
	p := newPair(t, func(c *tickwire.Config) { c.BusyPoll = time.Millisecond })
	if got := p.a.Config().BusyPoll; got != 0 && !p.a.Config().Latency {
		t.Errorf("BusyPoll outside latency mode = %v, want 0", got)
	}
	q := newPair(t, func(c *tickwire.Config) { c.Latency, c.BusyPoll = true, 20*time.Microsecond })
	if got := q.a.Config().BusyPoll; got != 20*time.Microsecond {
		t.Errorf("BusyPoll in latency mode = %v, want 20us", got)
	}
	a, _ := pipe.New(pipe.Options{})
	_, err := tickwire.New(tickwire.Config{Link: a, Addr: addrA, Latency: true, BusyPoll: -time.Microsecond})
	var ce *tickwire.ConfigError
	if !errors.As(err, &ce) || ce.Field != "BusyPoll" {
		t.Errorf("negative BusyPoll: %v, want a ConfigError for BusyPoll", err)
	}
}

// TestLatencyModeProcessesSynchronously checks, through Stats, that latency
// mode runs TCP on the delivering goroutines and that the stock mode does not.
func TestLatencyModeProcessesSynchronously(t *testing.T) {
	for _, latency := range []bool{false, true} {
		if !latency && suiteLatency {
			continue
		}
		p := newPair(t, func(c *tickwire.Config) { c.Latency = latency })
		ln, err := p.b.ListenTCP(7)
		if err != nil {
			t.Fatal(err)
		}
		echoServer(ln)
		c, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, 7))
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		for range 200 {
			if _, err := c.Write(buf); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(c, buf); err != nil {
				t.Fatal(err)
			}
		}
		c.Close()
		ln.Close()
		sa, sb := p.a.Stats(), p.b.Stats()
		if latency && (sa.LatencySyncRuns == 0 || sb.LatencySyncRuns == 0) {
			t.Errorf("latency mode: sync runs A %d B %d, want both > 0", sa.LatencySyncRuns, sb.LatencySyncRuns)
		}
		if !latency && sa.LatencySyncRuns+sb.LatencySyncRuns != 0 {
			t.Errorf("stock mode: %d sync runs, want 0", sa.LatencySyncRuns+sb.LatencySyncRuns)
		}
	}
}

// TestLatencyReadOneACK: in latency mode, a segment processed while a Read
// runs is answered by one ACK after the read, carrying both the
// acknowledgement and the window the read reopened, not by one from the
// processing and a window update from the read.
func TestLatencyReadOneACK(t *testing.T) {
	p := newPair(t, func(c *tickwire.Config) { c.Latency = true })
	c, s := p.connPair(t)
	const total = 8 << 20
	want := seededPattern(5, total)
	werr := make(chan error, 1)
	go func() {
		_, err := s.Write(want)
		werr <- err
	}()
	before := c.Info()
	got := make([]byte, total)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the stream arrived changed")
	}
	info := c.Info()
	in, out := info.SegmentsReceived-before.SegmentsReceived, info.SegmentsSent-before.SegmentsSent
	// A segment processed as a Read lets go of the endpoint (data that
	// arrived while the Read copied) is acknowledged when that Read
	// returns, and the next Read may announce its window: some may, not
	// most. Under the race detector copies are slow enough for up to two
	// thirds of them to (1.11-1.66 segments sent per segment received in
	// 9 runs); without Read-settled ACKs every segment cost two.
	limit := in + in/2
	if raceEnabled {
		limit = in + in*7/8
	}
	if out > limit {
		t.Errorf("the reader sent %d segments for %d received; want about one each", out, in)
	}
}

// echoHandler echoes every byte and closes the connection at the end.
func echoHandler(c *tickwire.TCPConn, data []byte, err error) {
	if err != nil {
		c.Close()
		return
	}
	c.Write(data)
}

// TestOnReceiveEcho moves 1 MiB through a ServeTCP echo handler, byte-exact,
// in both modes, and checks the handler's last call after the client's FIN.
func TestOnReceiveEcho(t *testing.T) {
	for _, latency := range []bool{false, true} {
		t.Run(map[bool]string{false: "stock", true: "latency"}[latency], func(t *testing.T) {
			p := newPair(t, func(c *tickwire.Config) { c.Latency = latency })
			var lastErr atomic.Value
			done := make(chan struct{})
			ln, err := p.b.ServeTCP(7, func(c *tickwire.TCPConn, data []byte, err error) {
				if err != nil {
					lastErr.Store(err)
					c.Close()
					close(done)
					return
				}
				if _, werr := c.Write(data); werr != nil {
					t.Errorf("handler write: %v", werr)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			c, err := p.a.DialTCP(ctxTimeout(t, 10*time.Second), addrPort(addrB, 7))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// Chunks of 8 KiB, each echo read before the next write, keep
			// the handler's writes within the 32 KiB send buffer.
			msg := make([]byte, 1<<20)
			rand.Read(msg)
			got := make([]byte, len(msg))
			const chunk = 8 << 10
			for off := 0; off < len(msg); off += chunk {
				if _, err := c.Write(msg[off : off+chunk]); err != nil {
					t.Fatal(err)
				}
				if _, err := io.ReadFull(c, got[off:off+chunk]); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(got, msg) {
				t.Fatal("echo differs from what was sent")
			}
			c.CloseWrite()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("handler not called with the end of stream")
			}
			if err, _ := lastErr.Load().(error); err != io.EOF {
				t.Errorf("handler's last call with %v, want io.EOF", err)
			}
			if st := p.b.Stats(); latency && (st.LatencyInlineRuns == 0 || st.LatencyACKsMerged == 0) {
				t.Errorf("latency mode: %d inline handler runs, %d ACKs merged into answers; want both > 0", st.LatencyInlineRuns, st.LatencyACKsMerged)
			}
		})
	}
}

// TestHandlerWriteDoesNotWait checks that a handler's Write on a full send
// buffer returns ErrSendBufferFull instead of stalling the delivering goroutine.
func TestHandlerWriteDoesNotWait(t *testing.T) {
	p := newPair(t, nil)
	result := make(chan error, 1)
	big := make([]byte, 1<<20) // far more than the 32 KiB send buffer and the peer's window
	ln, err := p.b.ServeTCP(7, func(c *tickwire.TCPConn, data []byte, err error) {
		if err != nil {
			return
		}
		_, werr := c.Write(big)
		select {
		case result <- werr:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, 7))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("go")); err != nil { // the client never reads
		t.Fatal(err)
	}
	select {
	case err := <-result:
		if !errors.Is(err, tickwire.ErrSendBufferFull) {
			t.Errorf("handler Write on a full buffer: %v, want ErrSendBufferFull", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handler Write waited for room")
	}
}

func TestOnReceiveErrors(t *testing.T) {
	p := newPair(t, nil)
	ln, err := p.b.ListenTCP(7)
	if err != nil {
		t.Fatal(err)
	}
	echoServer(ln)
	c, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, 7))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.OnReceive(nil); err == nil {
		t.Error("OnReceive(nil) succeeded")
	}
	if err := c.OnReceive(echoHandler); err != nil {
		t.Fatal(err)
	}
	if err := c.OnReceive(echoHandler); !errors.Is(err, tickwire.ErrHandlerSet) {
		t.Errorf("second OnReceive: %v, want ErrHandlerSet", err)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, tickwire.ErrHandlerSet) {
		t.Errorf("Read after OnReceive: %v, want ErrHandlerSet", err)
	}
	c.Close()
	nc2, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, 7))
	if err != nil {
		t.Fatal(err)
	}
	nc2.Close()
	if err := nc2.OnReceive(echoHandler); !errors.Is(err, net.ErrClosed) {
		t.Errorf("OnReceive after Close: %v, want net.ErrClosed", err)
	}
}

// TestLatencyRoundTripDoesNotAllocate asserts 0 allocations per 64-byte round
// trip on tickwire's handler API in latency mode: a client whose OnReceive
// handler takes the echo, a ServeTCP echo handler, both over link/pipe; and
// the same with the client on net.Conn's Write and Read.
func TestLatencyRoundTripDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items; run without -race")
	}
	p := newPair(t, latencyMode)
	ln, err := p.b.ServeTCP(7, echoHandler)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dial := func() *tickwire.TCPConn {
		c, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, 7))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	msg := make([]byte, 64)

	conn := dial()
	buf := make([]byte, 64)
	connRoundTrip := func() {
		if _, err := conn.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(conn, buf); err != nil {
			t.Fatal(err)
		}
	}

	fast := dial()
	var received atomic.Int64
	if err := fast.OnReceive(func(_ *tickwire.TCPConn, data []byte, err error) {
		received.Add(int64(len(data)))
	}); err != nil {
		t.Fatal(err)
	}
	var want int64
	fastRoundTrip := func() {
		want += int64(len(msg))
		if _, err := fast.Write(msg); err != nil {
			t.Fatal(err)
		}
		for received.Load() < want { // usually there already: the echo came back inline
			runtime.Gosched()
		}
	}
	for name, rt := range map[string]func(){"net.Conn client": connRoundTrip, "OnReceive client": fastRoundTrip} {
		for range 200 {
			rt() // warm the pools
		}
		if allocs := testing.AllocsPerRun(2000, rt); allocs != 0 {
			t.Errorf("%s: %.2f allocations per round trip, want 0", name, allocs)
		}
	}
}
