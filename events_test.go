package tickwire_test

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
)

// logRecorder is a slog.Handler that keeps the records it is given.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecorder) WithGroup(string) slog.Handler            { return h }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}

// records returns the attributes (and "level") of the records whose
// message starts with prefix.
func (h *logRecorder) matching(prefix string) []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]string
	for _, r := range h.records {
		if !strings.HasPrefix(r.Message, prefix) {
			continue
		}
		attrs := map[string]string{"level": r.Level.String()}
		r.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value.String()
			return true
		})
		out = append(out, attrs)
	}
	return out
}

// wait waits up to 5 s for the records whose message starts with prefix
// to count (their "count" attributes summed) n events, and returns them.
func (h *logRecorder) wait(t *testing.T, prefix string, n uint64) []map[string]string {
	t.Helper()
	var got []map[string]string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		got = h.matching(prefix)
		var sum uint64
		for _, attrs := range got {
			c, _ := strconv.ParseUint(attrs["count"], 10, 64)
			sum += c
		}
		if sum >= n {
			return got
		}
	}
	t.Fatalf("records %q: %v, want %d events counted", prefix, got, n)
	return nil
}

// TestEventARPFailed checks that an ARP resolution given up reaches the
// Logger as a summary naming the address.
func TestEventARPFailed(t *testing.T) {
	h := new(logRecorder)
	p := newPair(t, func(c *tickwire.Config) {
		if c.Addr == addrA {
			c.Logger = slog.New(h)
			c.ARPTimeout = 30 * time.Millisecond
		}
	})
	_, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), netip.MustParseAddrPort("10.0.0.9:7"))
	if !errors.Is(err, syscall.EHOSTUNREACH) {
		t.Fatalf("dial to nobody: %v, want EHOSTUNREACH", err)
	}
	got := h.wait(t, "tickwire: ARP resolution failed", 1)
	if attrs := got[0]; len(got) != 1 || attrs["level"] != "WARN" || attrs["count"] != "1" || attrs["addrs"] != "[10.0.0.9]" {
		t.Errorf("records %v, want one with level WARN, count 1, addrs [10.0.0.9]", got)
	}
}

// TestEventIdleClosed checks that connections reset by IdleTimeout reach
// the Logger, summarised.
func TestEventIdleClosed(t *testing.T) {
	h := new(logRecorder)
	p := newPair(t, func(c *tickwire.Config) {
		if c.Addr == addrB {
			c.Logger = slog.New(h)
			c.IdleTimeout = 100 * time.Millisecond
		}
	})
	p.serveEcho(t)
	for range 3 {
		p.dialEcho(t)
	}
	// The sweeps may split the 3 over two periods, hence two records.
	got := h.wait(t, "tickwire: connections reset: idle", 3)
	if len(got) > 2 || got[0]["level"] != "INFO" {
		t.Errorf("records %v, want one or two at level INFO", got)
	}
}
