package cputime_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/tickwire/tickwire/internal/cputime"
)

// TestProcessAdvances checks that burning CPU moves the clock forward, and
// by no more than the wall-clock time times the number of CPUs.
func TestProcessAdvances(t *testing.T) {
	start := cputime.Process()
	if start == 0 {
		t.Skip("cputime: no CPU clock on " + runtime.GOOS)
	}
	wall := time.Now()
	x := uint64(1)
	for time.Since(wall) < 50*time.Millisecond {
		for i := 0; i < 1000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	elapsed := time.Since(wall)
	used := time.Duration(cputime.Process() - start)
	if used <= 0 || used > elapsed*time.Duration(runtime.NumCPU())+100*time.Millisecond {
		t.Fatalf("CPU time moved %v in %v of wall time (x=%d)", used, elapsed, x)
	}
}
