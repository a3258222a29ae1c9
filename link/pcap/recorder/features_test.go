package recorder

import (
	"io"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/link/ethernet"

	"github.com/tickwire/tickwire/link"
)

// featureLink is a link with every optional feature of package link.
type featureLink struct {
	*ethernet.Endpoint
	busyPoll time.Duration
	locked   bool
	notifyN  int
	notifyFn func()
}

func (l *featureLink) SetLockOSThread(lock bool) { l.locked = lock }

func (l *featureLink) SetBusyPoll(d time.Duration) { l.busyPoll = d }

func (l *featureLink) RxChecksumDrops() (ipv4, tcp, udp, icmp uint64) { return 1, 2, 3, 4 }

func (l *featureLink) TxBacklog() int { return 7 }

func (l *featureLink) DeliversInline() bool { return true }

func (l *featureLink) TxQueueLen() int { return 64 }

func (l *featureLink) NotifyTxBacklog(n int, fn func()) bool {
	l.notifyN, l.notifyFn = n, fn
	return true
}

// TestForwardsLinkFeatures checks that the recorder passes every optional
// link feature on to the link it wraps, and is harmless over a link without
// them.
func TestForwardsLinkFeatures(t *testing.T) {
	inner := &featureLink{Endpoint: ethernet.New(channel.New(16, 1500, macA))}
	rec, err := New(inner, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	var l any = rec
	bp, ok := l.(link.BusyPoller)
	if !ok {
		t.Fatal("the recorder is not a link.BusyPoller")
	}
	bp.SetBusyPoll(20 * time.Microsecond)
	if inner.busyPoll != 20*time.Microsecond {
		t.Errorf("SetBusyPoll reached the wrapped link as %v, want 20us", inner.busyPoll)
	}
	cd, ok := l.(link.ChecksumDropCounter)
	if !ok {
		t.Fatal("the recorder is not a link.ChecksumDropCounter")
	}
	if a, b, c, d := cd.RxChecksumDrops(); a != 1 || b != 2 || c != 3 || d != 4 {
		t.Errorf("RxChecksumDrops = %d %d %d %d, want the wrapped link's 1 2 3 4", a, b, c, d)
	}
	tl, ok := l.(link.ThreadLocker)
	if !ok {
		t.Fatal("the recorder is not a link.ThreadLocker")
	}
	tl.SetLockOSThread(true)
	if !inner.locked {
		t.Error("SetLockOSThread(true) did not reach the wrapped link")
	}
	tb, ok := l.(link.TxBacklogger)
	if !ok {
		t.Fatal("the recorder is not a link.TxBacklogger")
	}
	if n := tb.TxBacklog(); n != 7 {
		t.Errorf("TxBacklog = %d, want the wrapped link's 7", n)
	}
	il, ok := l.(link.InlineDeliverer)
	if !ok {
		t.Fatal("the recorder is not a link.InlineDeliverer")
	}
	if !il.DeliversInline() {
		t.Error("DeliversInline = false, want the wrapped link's true")
	}
	if n := tb.TxQueueLen(); n != 64 {
		t.Errorf("TxQueueLen = %d, want the wrapped link's 64", n)
	}
	called := false
	if !tb.NotifyTxBacklog(3, func() { called = true }) || inner.notifyN != 3 || inner.notifyFn == nil {
		t.Error("NotifyTxBacklog did not reach the wrapped link")
	} else if inner.notifyFn(); !called {
		t.Error("the wrapped link's notification did not call the function given")
	}

	plain, err := New(ethernet.New(channel.New(16, 1500, macA)), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	plain.SetBusyPoll(time.Millisecond) // nothing to pass it to
	plain.SetLockOSThread(true)
	if plain.DeliversInline() {
		t.Error("DeliversInline over a plain link = true, want false")
	}
	if a, b, c, d := plain.RxChecksumDrops(); a+b+c+d != 0 {
		t.Errorf("RxChecksumDrops over a plain link = %d %d %d %d, want zeros", a, b, c, d)
	}
	if n := plain.TxBacklog(); n != 0 {
		t.Errorf("TxBacklog over a plain link = %d, want 0", n)
	}
	if n := plain.TxQueueLen(); n != 0 {
		t.Errorf("TxQueueLen over a plain link = %d, want 0", n)
	}
	if plain.NotifyTxBacklog(0, func() { t.Error("notified over a plain link") }) {
		t.Error("NotifyTxBacklog over a plain link = true, want false (no backlog to wait for)")
	}
}
