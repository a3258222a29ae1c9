package nicsim

import (
	"math"
	"math/bits"
	"time"
)

// QueueMask is a set of TX queues: bit q stands for queue q. A scheduler
// therefore serves at most MaxSchedQueues queues; a device with more TX
// queues than that needs a wider interface.
type QueueMask uint64

// MaxSchedQueues is the number of queues a QueueMask can name.
const MaxSchedQueues = 64

// Has reports whether q is in m. It is false for q outside
// [0, MaxSchedQueues).
func (m QueueMask) Has(q int) bool {
	return q >= 0 && q < MaxSchedQueues && m&(1<<uint(q)) != 0
}

// Never is the retry time a TxScheduler returns when nothing it could serve
// will become eligible by the passing of time alone: the device should ask
// again when new work arrives.
const Never int64 = math.MaxInt64

// TxScheduler decides which TX queue the device transmits from next, as the
// transmit scheduler of each Corundum port does.
//
// The device calls Next whenever the link is free and at least one queue has
// a frame: ready holds the enabled queues with a descriptor to send, now is
// the device clock in nanoseconds. Next returns either a queue of ready, and
// the device sends exactly one frame from it before asking again (if it
// cannot, say the descriptor is bad, it just asks again); or -1 when no queue
// of ready may send at now, with retry, the earliest device time after now at
// which one may, or Never. The device then waits until retry or until ready
// changes, whichever comes first.
//
// Next is called from the device's TX goroutine only, so an implementation
// may keep state without locking. It must not allocate: it runs once per
// frame.
type TxScheduler interface {
	Next(ready QueueMask, now int64) (queue int, retry int64)
}

// RoundRobin is the default TxScheduler: it serves the queues of ready in
// turn, one frame each, starting after the queue it served last, so every
// queue with work gets an equal share of frames. It never makes a ready queue
// wait. The zero value is ready to use and starts at queue 0; it is not safe
// for concurrent use.
type RoundRobin struct {
	// next is the queue the search for a ready queue starts at: the one
	// after the queue served last.
	next int
}

var _ TxScheduler = (*RoundRobin)(nil)

// Next implements TxScheduler.Next.
func (r *RoundRobin) Next(ready QueueMask, now int64) (queue int, retry int64) {
	if ready == 0 {
		return -1, Never
	}
	// Rotate ready right so that queue next sits in bit 0, then take the
	// lowest set bit: the first ready queue from next on, wrapping around.
	rot := bits.RotateLeft64(uint64(ready), -r.next)
	q := (r.next + bits.TrailingZeros64(rot)) % MaxSchedQueues
	r.next = (q + 1) % MaxSchedQueues
	return q, 0
}

// Ethernet overheads on the wire besides the frame the host sees.
const (
	// WireOverhead is what every frame costs on the wire besides its
	// bytes: 7 bytes preamble, 1 start-of-frame delimiter, 4 FCS and the
	// 12-byte minimum inter-frame gap.
	WireOverhead = 7 + 1 + 4 + 12
	// MinFrameLen is the shortest frame without FCS; a MAC pads shorter
	// ones to it.
	MinFrameLen = 60
)

// LinkRate is a link's bit rate in bits per second.
type LinkRate int64

// Common link rates.
const (
	Rate1G   LinkRate = 1e9
	Rate10G  LinkRate = 10e9
	Rate25G  LinkRate = 25e9
	Rate100G LinkRate = 100e9
)

// FrameTime returns how long a frame of frameLen bytes (Ethernet header and
// payload, without FCS, as the host writes it into a TX buffer) occupies the
// link: frameLen padded to MinFrameLen, plus WireOverhead, at r bits per
// second, rounded up to a whole nanosecond. A 60-byte frame at 10 Gbit/s
// takes 67.2 ns, reported as 68 ns; a 1514-byte one 1230.4 ns, reported as
// 1231 ns. A rate of zero or less means an infinitely fast link: 0.
func (r LinkRate) FrameTime(frameLen int) time.Duration {
	if r <= 0 {
		return 0
	}
	n := int64(max(frameLen, MinFrameLen))
	if n > maxWireBytes {
		return time.Duration(math.MaxInt64)
	}
	x := (n + WireOverhead) * 8 * 1e9 // bits times ns per second
	t := x / int64(r)
	if x%int64(r) != 0 {
		t++
	}
	return time.Duration(t)
}

// maxWireBytes is the longest frame whose FrameTime arithmetic stays within
// int64; longer ones report the largest Duration.
const maxWireBytes = math.MaxInt64/8_000_000_000 - WireOverhead
