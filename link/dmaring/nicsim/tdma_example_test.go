package nicsim_test

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/tickwire/tickwire/link/dmaring/nicsim"
)

// A 30 µs schedule of three 10 µs slots, each active for its first 9 µs:
// queue 0 owns slot 0, queue 1 slot 1, and both share slot 2.
func ExampleTDMA() {
	schedule, err := nicsim.NewTDMA(nicsim.TDMAConfig{
		Start:        1_000_000, // device ns
		Period:       30 * time.Microsecond,
		SlotPeriod:   10 * time.Microsecond,
		ActivePeriod: 9 * time.Microsecond,
		Slots:        []nicsim.QueueMask{0b01, 0b10, 0b11},
	})
	if err != nil {
		panic(err)
	}
	for _, now := range []int64{999_000, 1_000_000, 1_009_500, 1_012_000, 1_025_000} {
		fmt.Printf("at %d: queues %02b\n", now, schedule.Enabled(now))
	}
	next, ok := schedule.NextStart(1, 1_000_000)
	fmt.Println("queue 1 next enabled at", next, ok)

	_, err = nicsim.NewTDMA(nicsim.TDMAConfig{Period: 30 * time.Microsecond, SlotPeriod: 40 * time.Microsecond, Slots: []nicsim.QueueMask{1}})
	fmt.Println(err)
	// Output:
	// at 999000: queues 00
	// at 1000000: queues 01
	// at 1009500: queues 00
	// at 1012000: queues 10
	// at 1025000: queues 11
	// queue 1 next enabled at 1010000 true
	// nicsim: invalid TDMA schedule: slot period 40µs is longer than the schedule period 30µs
}

// A device loop on a 10 Gbit/s link: frames wait for their queue's slot, and
// the link sends back to back while a slot is active.
func ExampleTDMAScheduler() {
	const rate = nicsim.Rate10G
	schedule, err := nicsim.NewTDMA(nicsim.TDMAConfig{
		Period:       20 * time.Microsecond,
		SlotPeriod:   10 * time.Microsecond,
		ActivePeriod: 10*time.Microsecond - rate.FrameTime(1514), // guard: one full frame
		Slots:        []nicsim.QueueMask{0b01, 0b10},
	})
	if err != nil {
		panic(err)
	}
	sched := nicsim.NewTDMAScheduler(schedule, nil) // round-robin inside a slot

	// Queue 1 has two frames and queue 0 one, all queued at time 5000.
	queued := [2][]int{{1514}, {1514, 60}}
	now := int64(5000)
	for len(queued[0])+len(queued[1]) > 0 {
		var ready nicsim.QueueMask
		for q := range queued {
			if len(queued[q]) > 0 {
				ready |= 1 << q
			}
		}
		q, retry := sched.Next(ready, now)
		if q < 0 {
			now = retry // a real device also wakes up for new work
			continue
		}
		length := queued[q][0]
		queued[q] = queued[q][1:]
		done := now + int64(rate.FrameTime(length))
		fmt.Printf("queue %d: %4d bytes from %5d to %5d ns\n", q, length, now, done)
		now = done
	}
	// Output:
	// queue 0: 1514 bytes from  5000 to  6231 ns
	// queue 1: 1514 bytes from 10000 to 11231 ns
	// queue 1:   60 bytes from 11231 to 11299 ns
}

// strictPriority is a TxScheduler that always serves the lowest-numbered
// ready queue, so queue 0 can starve the others.
type strictPriority struct{}

func (strictPriority) Next(ready nicsim.QueueMask, now int64) (int, int64) {
	if ready == 0 {
		return -1, nicsim.Never
	}
	return bits.TrailingZeros64(uint64(ready)), 0
}

// A user-supplied scheduler next to the default; either can also be the
// inner scheduler of NewTDMAScheduler.
func ExampleTxScheduler() {
	var s nicsim.TxScheduler = strictPriority{}
	q, _ := s.Next(0b1100, 0)
	fmt.Println("strict priority picks", q)

	rr := &nicsim.RoundRobin{}
	for range 3 {
		q, _ := rr.Next(0b1100, 0)
		fmt.Print("round-robin picks ", q, "\n")
	}
	// Output:
	// strict priority picks 2
	// round-robin picks 2
	// round-robin picks 3
	// round-robin picks 2
}

func ExampleLinkRate_FrameTime() {
	for _, n := range []int{60, 1514} {
		fmt.Printf("%d bytes: %v at 10G, %v at 100G\n", n, nicsim.Rate10G.FrameTime(n), nicsim.Rate100G.FrameTime(n))
	}
	// Output:
	// 60 bytes: 68ns at 10G, 7ns at 100G
	// 1514 bytes: 1.231µs at 10G, 124ns at 100G
}
