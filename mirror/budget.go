package mirror

import (
	"fmt"
	"sync/atomic"
)

// Budget bounds the flow directions and reassembly buffers of several
// Assemblers together: one per receive queue of a multi-queue source, each
// run by its own goroutine, with RSS keeping a flow on one queue. It is the
// only state they share, two atomic counters touched when a direction is
// tracked or a buffer allocated, never per segment in steady state.
//
// An Assembler with a Budget (Config.Budget) still has its own MaxFlows and
// MaxBufferTotal, which size its table and bound its share: give each the
// Budget's figures to let any one queue use all of it, as skewed hashing
// may require (its table then costs about 200 bytes per flow direction per
// queue). When the Budget's flows are all held, an Assembler needing a new
// flow direction reuses or evicts one of its own (Stats.Evictions), or,
// holding none, leaves the segment untracked (Stats.FlowsRefused). When its
// buffers are all taken, an Assembler takes one back from its own
// directions as it does at its own MaxBufferTotal (Stats.BufferTotalSkips);
// holding none, it skips the hole in front of the segment instead.
// Directions that ended stay counted until their Assembler reuses their
// slot; an Assembler with a Budget keeps at most budgetFree free buffers
// for reuse, so that little of the Budget is idle in one queue.
//
// Safe for concurrent use.
type Budget struct {
	maxFlows int64
	maxBytes int64
	flows    atomic.Int64 // flow directions tracked by the Assemblers sharing it
	bytes    atomic.Int64 // bytes of reassembly buffers they have allocated
}

// budgetFree bounds the free list of an Assembler with a Budget.
const budgetFree = 4

// NewBudget returns a Budget of maxFlows flow directions (1 to
// MaxMaxFlows) and maxBufferTotal bytes of reassembly buffers (at most
// MaxMaxBufferTotal, and at least the BufferPerFlow of the Assemblers that
// share it: New checks).
func NewBudget(maxFlows int, maxBufferTotal int64) (*Budget, error) {
	if maxFlows <= 0 || maxFlows > MaxMaxFlows {
		return nil, fmt.Errorf("%w: Budget of %d flows outside 1..%d", ErrConfig, maxFlows, MaxMaxFlows)
	}
	if maxBufferTotal <= 0 || maxBufferTotal > MaxMaxBufferTotal {
		return nil, fmt.Errorf("%w: Budget of %d buffer bytes outside 1..%d", ErrConfig, maxBufferTotal, int64(MaxMaxBufferTotal))
	}
	return &Budget{maxFlows: int64(maxFlows), maxBytes: maxBufferTotal}, nil
}

// MaxFlows returns the bound on flow directions.
func (b *Budget) MaxFlows() int { return int(b.maxFlows) }

// MaxBufferTotal returns the bound on reassembly buffer bytes.
func (b *Budget) MaxBufferTotal() int64 { return b.maxBytes }

// Flows returns the flow directions tracked now by the Assemblers sharing
// b, ended ones still in their tables included.
func (b *Budget) Flows() int { return int(b.flows.Load()) }

// BufferBytes returns the bytes of reassembly buffers allocated now by the
// Assemblers sharing b, free ones kept for reuse included.
func (b *Budget) BufferBytes() int64 { return b.bytes.Load() }

// take adds n to c if the sum stays within limit, reporting whether it did.
// The methods below call it only for a Budget that is not nil: a nil
// Budget (no Config.Budget) always allows.
func take(c *atomic.Int64, n, limit int64) bool {
	for {
		v := c.Load()
		if v+n > limit {
			return false
		}
		if c.CompareAndSwap(v, v+n) {
			return true
		}
	}
}

func (b *Budget) takeFlow() bool { return b == nil || take(&b.flows, 1, b.maxFlows) }

func (b *Budget) releaseFlows(n int) {
	if b != nil {
		b.flows.Add(-int64(n))
	}
}

func (b *Budget) takeBuffer(size int) bool {
	return b == nil || take(&b.bytes, int64(size), b.maxBytes)
}

func (b *Budget) releaseBuffers(n, size int) {
	if b != nil {
		b.bytes.Add(-int64(n) * int64(size))
	}
}
