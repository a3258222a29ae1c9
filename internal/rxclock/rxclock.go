// Package rxclock stamps received frames: the real-time clock in Unix
// nanoseconds, as time.Now().UnixNano() would give it, for one reading of
// the monotonic clock. time.Now reads both clocks, and on a virtual machine
// whose clock source cannot be read from user space (kvm-clock without a
// stable TSC) each reading is a system call of 100 to 500 ns, paid per
// frame on the link's reader.
//
// The real-time clock is the monotonic one plus an offset that Now takes
// afresh from time.Now at least every 100 ms. Between refreshes a step of
// the real-time clock (settimeofday, a PTP or NTP step) is not seen; a
// slew is, at the next refresh, so a stamp is off by at most what the
// clocks drift apart in 100 ms (a slewing NTP or PTP daemon: at most 50 us).
package rxclock

import (
	"sync/atomic"
	"time"

	"github.com/tickwire/tickwire/internal/netstackunsafe"
)

// refresh is how long an offset is used.
const refresh = int64(100 * time.Millisecond)

var (
	offset   atomic.Int64 // real-time minus monotonic, ns
	takenAt  atomic.Int64 // monotonic time of the offset, ns; 0: never
	updating atomic.Bool  // one goroutine refreshes at a time
)

// Now returns the real-time clock in nanoseconds since the Unix epoch.
func Now() int64 {
	mono := netstackunsafe.Nanotime()
	if at := takenAt.Load(); at == 0 || mono-at > refresh {
		update(at == 0)
	}
	return mono + offset.Load()
}

// update takes a new offset from time.Now, unless another goroutine is at
// it (first: none was ever taken, so wait for it).
func update(first bool) {
	if !updating.CompareAndSwap(false, true) {
		if !first {
			return // the other goroutine's offset is as good
		}
		for takenAt.Load() == 0 {
			time.Sleep(time.Microsecond)
		}
		return
	}
	wall := time.Now().UnixNano()
	mono := netstackunsafe.Nanotime()
	offset.Store(wall - mono)
	takenAt.Store(mono)
	updating.Store(false)
}
