package rxclock

import (
	"testing"
	"time"
)

// TestNowFollowsRealTime: Now stays within 1 ms of time.Now, across
// refreshes.
func TestNowFollowsRealTime(t *testing.T) {
	for i := range 30 {
		before := time.Now().UnixNano()
		got := Now()
		after := time.Now().UnixNano()
		if got < before-int64(time.Millisecond) || got > after+int64(time.Millisecond) {
			t.Fatalf("reading %d: Now %d, time.Now between %d and %d", i, got, before, after)
		}
		time.Sleep(10 * time.Millisecond) // three refreshes over the loop
	}
}

func TestNowDoesNotAllocate(t *testing.T) {
	if n := testing.AllocsPerRun(1000, func() { Now() }); n != 0 {
		t.Errorf("%v allocations per Now, want 0", n)
	}
}

func BenchmarkNow(b *testing.B) {
	for b.Loop() {
		Now()
	}
}

func BenchmarkTimeNow(b *testing.B) {
	for b.Loop() {
		_ = time.Now().UnixNano()
	}
}
