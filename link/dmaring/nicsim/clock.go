package nicsim

import (
	"encoding/binary"
	"sync/atomic"
	"time"
)

var le = binary.LittleEndian

// Clock is the device's PTP-like clock: it starts at the host's real time
// and then advances with the monotonic clock, so a step of the host's
// real-time clock does not move it. Now is Unix nanoseconds.
type Clock struct {
	start     time.Time // carries a monotonic reading
	startUnix int64
	offset    atomic.Int64 // nanoseconds added by Step
}

// NewClock returns a clock reading the host's real time now.
func NewClock() *Clock {
	t := time.Now()
	return &Clock{start: t, startUnix: t.UnixNano()}
}

// Now returns the clock's time in Unix nanoseconds.
func (c *Clock) Now() int64 { return c.startUnix + int64(time.Since(c.start)) + c.offset.Load() }

// Step sets the clock to t (Unix ns), as a PTP servo steps a clock; it then
// advances from there.
func (c *Clock) Step(t int64) {
	c.offset.Store(t - c.startUnix - int64(time.Since(c.start)))
}
