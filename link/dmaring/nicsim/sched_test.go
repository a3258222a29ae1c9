package nicsim

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"
)

func TestQueueMaskHas(t *testing.T) {
	m := QueueMask(1<<0 | 1<<5 | 1<<63)
	for q, want := range map[int]bool{-1: false, 0: true, 1: false, 5: true, 63: true, 64: false, 1000: false} {
		if got := m.Has(q); got != want {
			t.Errorf("%#x.Has(%d) = %v, want %v", uint64(m), q, got, want)
		}
	}
}

func TestRoundRobinOrder(t *testing.T) {
	tests := []struct {
		name  string
		ready []QueueMask // one call each
		want  []int
	}{
		{"zero value starts at 0", []QueueMask{0b111, 0b111, 0b111, 0b111, 0b111}, []int{0, 1, 2, 0, 1}},
		{"skips idle queues", []QueueMask{0b1011, 0b1011, 0b1011, 0b1011}, []int{0, 1, 3, 0}},
		{"one queue", []QueueMask{0b100, 0b100, 0b100}, []int{2, 2, 2}},
		{"new work joins in turn", []QueueMask{0b001, 0b001, 0b101, 0b101, 0b111}, []int{0, 0, 2, 0, 1}},
		{"wraps at 64", []QueueMask{1<<63 | 1<<1, 1<<63 | 1<<1, 1<<63 | 1<<1}, []int{1, 63, 1}},
		{"queue 63 then 0", []QueueMask{1 << 63, 1<<63 | 1, 1<<63 | 1}, []int{63, 0, 63}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rr RoundRobin
			for i, ready := range tt.ready {
				q, retry := rr.Next(ready, int64(i))
				if q != tt.want[i] || retry != 0 {
					t.Fatalf("call %d: Next(%#b) = %d, %d; want %d, 0", i, uint64(ready), q, retry, tt.want[i])
				}
			}
		})
	}
	var rr RoundRobin
	if q, retry := rr.Next(0, 5); q != -1 || retry != Never {
		t.Errorf("Next(0) = %d, %d; want -1, Never", q, retry)
	}
}

// TestRoundRobinFair checks that queues that always have work get the same
// number of turns, and that a queue with work waits for at most one turn of
// every other queue with work.
func TestRoundRobinFair(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		ready := QueueMask(rng.Uint64())
		if ready == 0 {
			continue
		}
		n := bits.OnesCount64(uint64(ready))
		var rr RoundRobin
		var served [MaxSchedQueues]int
		lastTurn := make(map[int]int)
		for turn := range 3 * n {
			q, _ := rr.Next(ready, 0)
			if !ready.Has(q) {
				t.Fatalf("ready %#x: Next = %d, not a ready queue", uint64(ready), q)
			}
			if prev, ok := lastTurn[q]; ok && turn-prev != n {
				t.Fatalf("ready %#x: queue %d served at turns %d and %d, want %d apart", uint64(ready), q, prev, turn, n)
			}
			lastTurn[q] = turn
			served[q]++
		}
		for q := range MaxSchedQueues {
			if ready.Has(q) && served[q] != 3 {
				t.Fatalf("ready %#x: queue %d served %d times in %d turns, want 3", uint64(ready), q, served[q], 3*n)
			}
		}
	}
}

func TestFrameTime(t *testing.T) {
	tests := []struct {
		rate LinkRate
		len  int
		want time.Duration
	}{
		{Rate10G, 60, 68},     // 84 bytes = 672 bits = 67.2 ns
		{Rate10G, 14, 68},     // padded to 60
		{Rate10G, -5, 68},     // nonsense lengths count as the minimum frame
		{Rate10G, 1514, 1231}, // 1538 bytes = 12304 bits = 1230.4 ns
		{Rate1G, 1514, 12304},
		{Rate100G, 60, 7},        // 6.72 ns
		{Rate25G, 1514, 493},     // 492.16 ns
		{Rate10G, 9014, 7231},    // jumbo: 9038 bytes = 72304 bits
		{LinkRate(1), 60, 672e9}, // 672 s at 1 bit/s
		{0, 1514, 0},
		{-1, 1514, 0},
		{Rate10G, maxWireBytes, 922337204}, // the longest frame FrameTime computes: 1152921504 bytes on the wire
		{Rate10G, maxWireBytes + 1, math.MaxInt64},
		{Rate10G, math.MaxInt32, math.MaxInt64},
		{LinkRate(math.MaxInt64), 1514, 1},
	}
	for _, tt := range tests {
		if got := tt.rate.FrameTime(tt.len); got != tt.want {
			t.Errorf("LinkRate(%d).FrameTime(%d) = %d ns, want %d ns", tt.rate, tt.len, got, tt.want)
		}
	}
}

// txFrame is a frame the host queues for transmission in a simulation.
type txFrame struct {
	queue  int
	arrive int64 // device time the doorbell rings
	length int   // bytes without FCS
}

// txRecord is a frame the simulated device sent.
type txRecord struct {
	txFrame
	start int64 // device time the first bit went out
	done  int64 // device time of the TX completion: the last bit left
}

// simulateTX plays a device that owns one link of the given rate and asks
// sched which queue to send from whenever the link is free. frames must be
// sorted by arrive. It returns the frames in the order they left, with their
// times, and fails t if sched breaks the TxScheduler contract.
func simulateTX(t *testing.T, sched TxScheduler, rate LinkRate, frames []txFrame) []txRecord {
	t.Helper()
	var queues [MaxSchedQueues][]txFrame
	var out []txRecord
	now, next := int64(0), 0
	for len(out) < len(frames) {
		for next < len(frames) && frames[next].arrive <= now {
			f := frames[next]
			queues[f.queue] = append(queues[f.queue], f)
			next++
		}
		var ready QueueMask
		for q := range queues {
			if len(queues[q]) > 0 {
				ready |= 1 << q
			}
		}
		if ready == 0 {
			now = frames[next].arrive
			continue
		}
		q, retry := sched.Next(ready, now)
		if q < 0 {
			wake := retry
			if next < len(frames) {
				wake = min(wake, frames[next].arrive)
			}
			if wake == Never {
				t.Fatalf("at %d: scheduler stalls with ready %#b and no retry time", now, uint64(ready))
			}
			if wake <= now {
				t.Fatalf("at %d: scheduler declines with retry %d, not after now", now, retry)
			}
			now = wake
			continue
		}
		if !ready.Has(q) {
			t.Fatalf("at %d: scheduler picks queue %d, not in ready %#b", now, q, uint64(ready))
		}
		f := queues[q][0]
		queues[q] = queues[q][1:]
		done := now + int64(rate.FrameTime(f.length))
		out = append(out, txRecord{txFrame: f, start: now, done: done})
		now = done
	}
	return out
}

func TestRoundRobinSimulation(t *testing.T) {
	// Three queues each get a burst of 100 frames at time 0; queue 2's
	// frames are full size, the others minimum size. Round-robin counts
	// frames, not bytes: the link alternates 0, 1, 2 until all are sent.
	var frames []txFrame
	for range 100 {
		for q := range 3 {
			length := 60
			if q == 2 {
				length = 1514
			}
			frames = append(frames, txFrame{queue: q, length: length})
		}
	}
	out := simulateTX(t, &RoundRobin{}, Rate10G, frames)
	var prevDone int64
	for i, r := range out {
		if r.queue != i%3 {
			t.Fatalf("frame %d left from queue %d, want %d", i, r.queue, i%3)
		}
		if i > 0 && r.start != prevDone {
			t.Fatalf("frame %d started at %d, want back to back at %d", i, r.start, prevDone)
		}
		prevDone = r.done
	}
	want := int64(100 * (2*Rate10G.FrameTime(60) + Rate10G.FrameTime(1514)))
	if prevDone != want {
		t.Errorf("last completion at %d ns, want %d ns", prevDone, want)
	}
}

func TestRoundRobinDoesNotAllocate(t *testing.T) {
	var s TxScheduler = &RoundRobin{}
	now := int64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		s.Next(0b1011, now)
		now += 997
	})
	if allocs != 0 {
		t.Errorf("RoundRobin.Next allocates %v times per call, want 0", allocs)
	}
}

func BenchmarkRoundRobin(b *testing.B) {
	var rr RoundRobin
	var s TxScheduler = &rr
	b.ReportAllocs()
	var sink int
	for b.Loop() {
		q, _ := s.Next(0xf0f0_0000_0000_0f0f, 0)
		sink += q
	}
	_ = sink
}
