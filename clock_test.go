package tickwire

import (
	"testing"
	"time"

	"github.com/tickwire/tickwire/internal/netstackunsafe"
	"gvisor.dev/gvisor/pkg/tcpip"
)

// TestMonoClock checks the cheap monotonic clock against netstack's own
// arithmetic: the value built in place equals MonotonicTime{}.Add of the
// same nanoseconds, and readings advance with real time.
func TestMonoClock(t *testing.T) {
	if !netstackunsafe.MonotonicAvailable() {
		t.Fatal("tcpip.MonotonicTime is no longer one int64: the stack runs on the slower standard clock")
	}
	c := newClock(nil)
	if _, ok := c.(monoClock); !ok {
		t.Fatalf("newClock returned %T, want monoClock", c)
	}
	a := c.NowMonotonic()
	if want := (tcpip.MonotonicTime{}).Add(time.Duration(a.Milliseconds()) * time.Millisecond); a.Sub(want) >= time.Millisecond || a.Sub(want) < 0 {
		t.Errorf("reading %v is not %v plus less than 1 ms", a, want)
	}
	time.Sleep(2 * time.Millisecond)
	b := c.NowMonotonic()
	if d := b.Sub(a); d < 2*time.Millisecond {
		t.Errorf("clock advanced %v over a 2 ms sleep", d)
	}
	if got := c.Now(); time.Since(got) < 0 || time.Since(got) > time.Minute {
		t.Errorf("Now() = %v, not the wall clock", got)
	}
}
