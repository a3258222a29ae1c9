package tickwire_test

import (
	"context"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/pipe"
)

var (
	addrA = netip.MustParsePrefix("10.0.0.1/24")
	addrB = netip.MustParsePrefix("10.0.0.2/24")
)

// The suite's mode: TestSuiteInLatencyMode runs this package's tests again
// with TICKWIRE_LATENCY=1 (and TICKWIRE_BUSYPOLL, a duration), which
// newStack applies to the stacks the tests build. The library itself reads
// no environment variable.
var (
	suiteLatency     = os.Getenv("TICKWIRE_LATENCY") == "1"
	suiteBusyPoll, _ = time.ParseDuration(os.Getenv("TICKWIRE_BUSYPOLL"))
)

// newStack is tickwire.New in the suite's mode: latency mode on when the
// suite runs in it, with the suite's BusyPoll where cfg leaves it 0.
func newStack(cfg tickwire.Config) (*tickwire.Stack, error) {
	if suiteLatency {
		cfg.Latency = true
		if cfg.BusyPoll == 0 {
			cfg.BusyPoll = suiteBusyPoll
		}
	}
	return tickwire.New(cfg)
}

// pair is two stacks joined by a pipe: A on pa, B on pb.
type pair struct {
	a, b   *tickwire.Stack
	pa, pb *pipe.Endpoint
}

// newPair builds two stacks over a pipe, in the suite's mode (newStack); tweak, when not nil, edits each
// Config before New. Both stacks are closed at the end of the test.
func newPair(t testing.TB, tweak func(*tickwire.Config)) *pair {
	t.Helper()
	return newPairQueue(t, 0, tweak)
}

// newPairQueue is newPair with the pipe's queue of frames waiting behind a
// delivery in progress set to queueLen (0: the pipe's default, 1024). Tests
// that send thousands of frames back to back and count what the stack did
// with each make it hold them all: otherwise, while another goroutine
// delivers into the same end (slow under the race detector), the pipe
// drops what exceeds its queue and the stack never sees it.
func newPairQueue(t testing.TB, queueLen int, tweak func(*tickwire.Config)) *pair {
	t.Helper()
	return newPairOpts(t, pipe.Options{QueueLen: queueLen}, tweak)
}

// wireSized is the pipe of tests that count or inspect segments as a wire
// carries them, or inject frames and count what the stack's own checks
// did with them: without GSO, every segment is at most the MTU and the
// receiving stack verifies every checksum.
var wireSized = pipe.Options{NoGSO: true}

// newPairOpts is newPair over a pipe built with opts.
func newPairOpts(t testing.TB, opts pipe.Options, tweak func(*tickwire.Config)) *pair {
	t.Helper()
	pa, pb := pipe.New(opts)
	ca := tickwire.Config{Link: pa, MAC: pa.MAC(), Addr: addrA}
	cb := tickwire.Config{Link: pb, MAC: pb.MAC(), Addr: addrB}
	if tweak != nil {
		tweak(&ca)
		tweak(&cb)
	}
	a, err := newStack(ca)
	if err != nil {
		t.Fatalf("New(A): %v", err)
	}
	b, err := newStack(cb)
	if err != nil {
		a.Close()
		t.Fatalf("New(B): %v", err)
	}
	t.Cleanup(func() {
		a.Close()
		b.Close()
	})
	return &pair{a: a, b: b, pa: pa, pb: pb}
}

// delivered waits until the pipe has delivered (or dropped) every frame A's
// end accepted: Send queues a frame, instead of delivering it inline, while
// another goroutine delivers into B, and that goroutine delivers the queue
// after it, so counters read right after the Sends may not include them.
func (p *pair) delivered(t testing.TB) {
	t.Helper()
	if !waitFor(30*time.Second, func() bool { s := p.pa.Stats(); return s.Delivered+s.Dropped >= s.Sent }) {
		t.Fatalf("the pipe still holds frames: %+v", p.pa.Stats())
	}
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func addrPort(p netip.Prefix, port uint16) netip.AddrPort {
	return netip.AddrPortFrom(p.Addr(), port)
}

// echoPort is the port the test echo servers listen on.
const echoPort = 7

// serveEcho makes B serve TCP echo on echoPort until the end of the test.
func (p *pair) serveEcho(t testing.TB) {
	t.Helper()
	serveEchoOn(t, p.b)
}

// serveEchoOn makes s serve TCP echo on echoPort until the end of the test.
func serveEchoOn(t testing.TB, s *tickwire.Stack) {
	t.Helper()
	ln, err := s.ListenTCP(echoPort)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	echoServer(ln)
}

// dialEcho connects A to B's echo server; the connection is closed at the
// end of the test.
func (p *pair) dialEcho(t testing.TB) net.Conn {
	t.Helper()
	c, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, echoPort))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// settled waits, up to a second, for cond to hold: for counters that the
// goroutine which sent a frame increments after the frame, delivered
// inline, has already been answered.
func settled(cond func() bool) {
	for deadline := time.Now().Add(time.Second); !cond() && time.Now().Before(deadline); {
		time.Sleep(100 * time.Microsecond)
	}
}
