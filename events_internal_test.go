package tickwire

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip"
)

// recordHandler is a slog.Handler that keeps the records it is given.
type recordHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}

// TestEventReport checks the watcher's summaries: one record per kind
// whose counter moved, with the movement as "count", and nothing for the
// others.
func TestEventReport(t *testing.T) {
	h := new(recordHandler)
	log := &eventLog{l: slog.New(h)}
	w := &eventWatch{}
	w.prev.TCPSYNCookiesTx, w.prev.TCPSYNCookiesBad = 10, 1
	w.prev.DropUDPBufferFull = 7
	cur := w.prev
	cur.TCPSYNCookiesTx, cur.TCPSYNCookiesBad = 5010, 3 // a SYN flood
	cur.ARPTimeouts = 2
	cur.linkErrors = 4
	addrs := []netip.Addr{netip.MustParseAddr("10.0.0.9"), netip.MustParseAddr("10.0.0.10")}
	w.report(log, &cur, addrs)
	got := map[string]map[string]string{}
	for _, r := range h.records {
		attrs := map[string]string{}
		r.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value.String()
			return true
		})
		if got[r.Message] != nil {
			t.Errorf("two records %q", r.Message)
		}
		got[r.Message] = attrs
	}
	if len(got) != 3 {
		t.Errorf("%d records, want 3: %v", len(got), got)
	}
	want := map[string]map[string]string{
		"tickwire: SYN queue full: answering with SYN cookies": {"count": "5000", "cookies_completed": "0", "cookies_invalid": "2"},
		"tickwire: ARP resolution failed":                      {"count": "2", "addrs": "[10.0.0.9 10.0.0.10]"},
		"tickwire: link write errors":                          {"count": "4"},
	}
	for msg, attrs := range want {
		for k, v := range attrs {
			if got[msg][k] != v {
				t.Errorf("%q: %s = %q, want %q", msg, k, got[msg][k], v)
			}
		}
	}
}

// TestARPFailedBound checks that the ARP table keeps at most
// maxFailedListed failed addresses between two reports.
func TestARPFailedBound(t *testing.T) {
	tab := newARPTable(4)
	tab.mu.Lock()
	for i := range 20 {
		tab.noteFailedLocked(tcpip.AddrFrom4([4]byte{10, 0, 0, byte(i)}))
	}
	tab.mu.Unlock()
	if got := tab.takeFailed(nil); len(got) != maxFailedListed || got[0] != netip.MustParseAddr("10.0.0.0") {
		t.Errorf("takeFailed = %v, want the first %d", got, maxFailedListed)
	}
	if got := tab.takeFailed(nil); len(got) != 0 {
		t.Errorf("takeFailed again = %v, want none", got)
	}
}
