package tickwire_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	glog "gvisor.dev/gvisor/pkg/log"

	"github.com/tickwire/tickwire"
)

// logBuffer is an io.Writer safe for the logger's goroutines and the test's.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newLogger() (*slog.Logger, *logBuffer) {
	b := new(logBuffer)
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// TestLoggerRefusedAccept checks that an accept reset by MaxConnections
// reaches Config.Logger with the limit and the peer.
func TestLoggerRefusedAccept(t *testing.T) {
	logger, out := newLogger()
	p := newPair(t, func(c *tickwire.Config) {
		if c.Addr == addrB { // the server
			c.MaxConnections, c.Logger = 1, logger
		}
	})
	ln, err := p.b.ListenTCP(7)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *tickwire.TCPConn, 2)
	go func() {
		for {
			c, err := ln.AcceptTCP()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	first, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, 7))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	defer func() { (<-accepted).Close() }()
	// The handshake completes before the accept refuses it: the dial
	// succeeds, or fails with the reset when it arrives first.
	if second, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, 7)); err == nil {
		defer second.Close()
	} else if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "connection reset") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	got := out.String()
	for _, want := range []string{"level=WARN", "tickwire: connection reset", "limit=MaxConnections", "peer=10.0.0.1:"} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
}

// TestLoggerNetstackLog checks that netstack's own log reaches the Logger
// of a live Stack, and stops reaching it at Close.
func TestLoggerNetstackLog(t *testing.T) {
	logger, out := newLogger()
	p := newPair(t, func(c *tickwire.Config) { c.Logger = logger })
	glog.Warningf("tickwire-test %d", 1)
	if got := out.String(); !strings.Contains(got, "netstack: tickwire-test 1") || !strings.Contains(got, "level=WARN") {
		t.Fatalf("netstack's warning did not reach the Logger:\n%s", got)
	}
	p.a.Close()
	p.b.Close()
	glog.Warningf("tickwire-test %d", 2)
	if got := out.String(); strings.Contains(got, "tickwire-test 2") {
		t.Fatalf("netstack's log reached the Logger of a closed Stack:\n%s", got)
	}
}

// TestLoggerRateLimit checks the budget of 10 records a second: the rest
// are counted in Stats.LogSuppressed and reported on the next record.
func TestLoggerRateLimit(t *testing.T) {
	logger, out := newLogger()
	p := newPair(t, func(c *tickwire.Config) { c.Logger = logger })
	// Wait for the start of a second, so that the burst stays in one.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	for i := range 25 {
		glog.Warningf("burst %d", i)
	}
	if n := strings.Count(out.String(), "netstack: burst"); n != 10 {
		t.Fatalf("%d records passed in one second, want 10:\n%s", n, out.String())
	}
	// The budget and the count are the Logger's, which both stacks share.
	if a, b := p.a.Stats().LogSuppressed, p.b.Stats().LogSuppressed; a != 15 || b != 15 {
		t.Errorf("LogSuppressed = %d and %d, want 15 on both", a, b)
	}
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	glog.Warningf("after")
	if got := out.String(); !strings.Contains(got, "netstack: after") || !strings.Contains(got, "suppressed=15") {
		t.Errorf("the next record does not carry the suppressed count:\n%s", got)
	}
}
