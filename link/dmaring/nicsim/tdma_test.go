package nicsim

import (
	"errors"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"
)

func mustTDMA(t testing.TB, c TDMAConfig) *TDMA {
	t.Helper()
	s, err := NewTDMA(c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewTDMAErrors(t *testing.T) {
	ok := TDMAConfig{Start: 100, Period: 40, SlotPeriod: 10, ActivePeriod: 8, Slots: []QueueMask{1, 2, 4, 8}}
	if _, err := NewTDMA(ok); err != nil {
		t.Fatalf("NewTDMA(%+v): %v", ok, err)
	}
	tests := []struct {
		name   string
		change func(*TDMAConfig)
	}{
		{"negative start", func(c *TDMAConfig) { c.Start = -1 }},
		{"zero period", func(c *TDMAConfig) { c.Period = 0 }},
		{"negative period", func(c *TDMAConfig) { c.Period = -40 }},
		{"zero slot period", func(c *TDMAConfig) { c.SlotPeriod = 0 }},
		{"negative slot period", func(c *TDMAConfig) { c.SlotPeriod = -10 }},
		{"slot longer than period", func(c *TDMAConfig) { c.SlotPeriod = 41; c.Slots = c.Slots[:1] }},
		{"negative active period", func(c *TDMAConfig) { c.ActivePeriod = -1 }},
		{"active longer than slot", func(c *TDMAConfig) { c.ActivePeriod = 11 }},
		{"no slots", func(c *TDMAConfig) { c.Slots = nil }},
		{"more slots than fit", func(c *TDMAConfig) { c.Slots = append(c.Slots, 16) }},
		{"more slots than fit, cut slot", func(c *TDMAConfig) { c.Period = 35; c.Slots = append(c.Slots, 16) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			c.Slots = append([]QueueMask(nil), ok.Slots...)
			tt.change(&c)
			s, err := NewTDMA(c)
			if !errors.Is(err, ErrTDMAConfig) || s != nil {
				t.Fatalf("NewTDMA(%+v) = %v, %v; want nil and an ErrTDMAConfig", c, s, err)
			}
			t.Log(err)
		})
	}
	// Edge cases that are valid.
	for _, c := range []TDMAConfig{
		{Period: 10, SlotPeriod: 10, Slots: []QueueMask{1}},                   // one slot filling the period
		{Period: 35, SlotPeriod: 10, Slots: []QueueMask{1, 2, 4, 8}},          // the last slot cut to 5
		{Period: 40, SlotPeriod: 10, ActivePeriod: 10, Slots: []QueueMask{0}}, // an empty slot and a gap
		{Start: math.MaxInt64, Period: math.MaxInt64, SlotPeriod: 1, Slots: []QueueMask{1}},
		{Period: math.MaxInt64, SlotPeriod: 2, Slots: []QueueMask{1, 2, 4}},
	} {
		if _, err := NewTDMA(c); err != nil {
			t.Errorf("NewTDMA(%+v): %v", c, err)
		}
	}
}

func TestTDMAConfig(t *testing.T) {
	in := TDMAConfig{Start: 5, Period: 40, SlotPeriod: 10, Slots: []QueueMask{1, 2}}
	s := mustTDMA(t, in)
	in.Slots[0] = 7
	got := s.Config()
	if got.Start != 5 || got.Period != 40 || got.SlotPeriod != 10 || got.ActivePeriod != 10 ||
		len(got.Slots) != 2 || got.Slots[0] != 1 || got.Slots[1] != 2 {
		t.Errorf("Config() = %+v, want ActivePeriod filled in and the slots as given", got)
	}
	got.Slots[1] = 7
	if s.Config().Slots[1] != 2 {
		t.Error("Config shares its slots with the caller")
	}
}

// TestTDMAEnabled walks a schedule of period 100 starting at 1000, with
// slots 30 long, each active for its first 20: slot 0 enables queue 0, slot
// 1 queues 1 and 2, slot 2 nothing, and slot 3 queue 0. Slot 3 starts at 90
// and is cut to 10 by the end of the period.
func TestTDMAEnabled(t *testing.T) {
	s := mustTDMA(t, TDMAConfig{
		Start: 1000, Period: 100, SlotPeriod: 30, ActivePeriod: 20,
		Slots: []QueueMask{0b001, 0b110, 0, 0b001},
	})
	tests := []struct {
		now  int64
		want QueueMask
	}{
		{-5, 0}, {0, 0}, {999, 0}, // before the start
		{1000, 0b001}, {1019, 0b001}, // slot 0, active
		{1020, 0}, {1029, 0}, // slot 0, guard
		{1030, 0b110}, {1049, 0b110}, {1050, 0}, // slot 1
		{1060, 0}, {1079, 0}, {1089, 0}, // slot 2, empty
		{1090, 0b001}, {1099, 0b001}, // slot 3, cut by the period: active 90 to 100
		{1100, 0b001}, {1120, 0}, {1130, 0b110}, // the next period
		{1000 + 100*1e6 + 35, 0b110}, // far later
		{math.MaxInt64, 0b001},       // (MaxInt64-1000) % 100 = 7: slot 0
	}
	for _, tt := range tests {
		if got := s.Enabled(tt.now); got != tt.want {
			t.Errorf("Enabled(%d) = %#b, want %#b", tt.now, uint64(got), uint64(tt.want))
		}
	}
}

func TestTDMANextStart(t *testing.T) {
	s := mustTDMA(t, TDMAConfig{
		Start: 1000, Period: 100, SlotPeriod: 30, ActivePeriod: 20,
		Slots: []QueueMask{0b001, 0b110, 0, 0b001},
	})
	tests := []struct {
		queue int
		now   int64
		want  int64
		ok    bool
	}{
		{0, 0, 1000, true},    // before the start: the first slot
		{1, 0, 1030, true},    // before the start: slot 1
		{0, 1005, 1005, true}, // enabled now
		{0, 1020, 1090, true}, // guard of slot 0: slot 3 is next
		{0, 1095, 1095, true}, // in slot 3
		{0, 1100, 1100, true}, // slot 0 of the next period
		{1, 1050, 1130, true}, // just after its window: the next period
		{2, 1049, 1049, true}, // last nanosecond of its window
		{2, 1029, 1030, true}, // one nanosecond before its window
		{3, 1000, 0, false},   // no slot enables queue 3
		{-1, 1000, 0, false},  // not a queue
		{MaxSchedQueues, 0, 0, false},
	}
	for _, tt := range tests {
		got, ok := s.NextStart(tt.queue, tt.now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("NextStart(%d, %d) = %d, %v; want %d, %v", tt.queue, tt.now, got, ok, tt.want, tt.ok)
		}
	}
	// Near the end of time there is no next period.
	late := mustTDMA(t, TDMAConfig{Start: math.MaxInt64 - 150, Period: 100, SlotPeriod: 10, Slots: []QueueMask{1}})
	if got, ok := late.NextStart(0, math.MaxInt64-30); ok {
		t.Errorf("NextStart past the last representable period = %d, want false", got)
	}
}

// TestTDMAMatchesScan checks Enabled and NextStart on random schedules
// against a walk over every nanosecond.
func TestTDMAMatchesScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		period := 1 + rng.Int64N(60)
		slot := 1 + rng.Int64N(period)
		active := rng.Int64N(slot + 1) // 0 means slot
		fit := (period + slot - 1) / slot
		slots := make([]QueueMask, 1+rng.Int64N(fit))
		for i := range slots {
			slots[i] = QueueMask(rng.Uint64() & 0b1111)
		}
		c := TDMAConfig{Start: rng.Int64N(50), Period: time.Duration(period), SlotPeriod: time.Duration(slot),
			ActivePeriod: time.Duration(active), Slots: slots}
		s := mustTDMA(t, c)
		if active == 0 {
			active = slot
		}
		// enabledAt is the definition, spelled out.
		enabledAt := func(now int64) QueueMask {
			if now < c.Start {
				return 0
			}
			off := (now - c.Start) % period
			i := off / slot
			if i >= int64(len(slots)) || off-i*slot >= active {
				return 0
			}
			return slots[i]
		}
		horizon := c.Start + 3*period
		for now := int64(0); now < horizon; now++ {
			if got, want := s.Enabled(now), enabledAt(now); got != want {
				t.Fatalf("%+v: Enabled(%d) = %#b, want %#b", c, now, uint64(got), uint64(want))
			}
		}
		for q := range 5 {
			for now := int64(0); now < c.Start+2*period; now++ {
				want, wantOK := int64(0), false
				for at := now; at < max(now, c.Start)+2*period+1; at++ {
					if enabledAt(at).Has(q) {
						want, wantOK = at, true
						break
					}
				}
				if got, ok := s.NextStart(q, now); got != want || ok != wantOK {
					t.Fatalf("%+v: NextStart(%d, %d) = %d, %v; want %d, %v", c, q, now, got, ok, want, wantOK)
				}
			}
		}
	}
}

// declineScheduler is a TxScheduler that never sends before a set time.
type declineScheduler struct{ until int64 }

func (d *declineScheduler) Next(ready QueueMask, now int64) (int, int64) {
	if now < d.until {
		return -1, d.until
	}
	return bits.TrailingZeros64(uint64(ready)), 0
}

func TestTDMASchedulerNext(t *testing.T) {
	schedule := mustTDMA(t, TDMAConfig{
		Start: 1000, Period: 100, SlotPeriod: 30, ActivePeriod: 20,
		Slots: []QueueMask{0b001, 0b110, 0, 0b001},
	})
	s := NewTDMAScheduler(schedule, nil)
	tests := []struct {
		ready QueueMask
		now   int64
		queue int
		retry int64
	}{
		{0b001, 500, -1, 1000},  // before the start
		{0b001, 1000, 0, 0},     // queue 0's slot
		{0b110, 1000, -1, 1030}, // queues 1 and 2 wait for slot 1
		{0b111, 1031, 1, 0},     // round-robin among the enabled ones
		{0b111, 1032, 2, 0},
		{0b111, 1033, 1, 0},
		{0b110, 1050, -1, 1130}, // guard band
		{0b111, 1050, -1, 1090}, // guard band, queue 0 comes first
		{0b1000, 1000, -1, Never},
		{0, 1000, -1, Never},
	}
	for _, tt := range tests {
		q, retry := s.Next(tt.ready, tt.now)
		if q != tt.queue || retry != tt.retry {
			t.Errorf("Next(%#b, %d) = %d, %d; want %d, %d", uint64(tt.ready), tt.now, q, retry, tt.queue, tt.retry)
		}
	}

	// An inner scheduler that holds back: the retry is its time or the next
	// slot of another ready queue, whichever is first.
	inner := &declineScheduler{until: 1015}
	s = NewTDMAScheduler(schedule, inner)
	if q, retry := s.Next(0b011, 1000); q != -1 || retry != 1015 {
		t.Errorf("inner declines until 1015: Next = %d, %d; want -1, 1015", q, retry)
	}
	inner.until = 1200
	if q, retry := s.Next(0b011, 1000); q != -1 || retry != 1030 {
		t.Errorf("inner declines until 1200: Next = %d, %d; want -1, 1030 (queue 1's slot)", q, retry)
	}
	if q, retry := s.Next(0b001, 1000); q != -1 || retry != 1200 {
		t.Errorf("inner declines until 1200, only queue 0 ready: Next = %d, %d; want -1, 1200", q, retry)
	}
}

// TestTDMAFramesWaitForTheirSlot is the TDMA check at scheduler
// level: a simulated device on a 10 Gbit/s link sends frames from four
// queues under a TDMA schedule, and the TX completion times show that a
// frame whose queue is disabled waits for its slot, the queue's first frame
// leaves within one frame time of the slot's start, and no frame is on the
// wire while its queue is disabled.
func TestTDMAFramesWaitForTheirSlot(t *testing.T) {
	const rate = Rate10G
	lengths := []int{60, 128, 512, 1514}
	longest := rate.FrameTime(1514) // 1231 ns
	const slot = 10 * time.Microsecond
	// Slots 0 to 2 belong to one queue each, slot 3 is shared by queues 1
	// and 3, slot 4 is empty: the period ends with a gap of 5 µs. Queue 0
	// is disabled for 50 of every 60 µs.
	slots := []QueueMask{0b0001, 0b0010, 0b0100, 0b1010, 0}
	schedule := mustTDMA(t, TDMAConfig{
		Start:        3000,
		Period:       55 * time.Microsecond,
		SlotPeriod:   slot,
		ActivePeriod: slot - longest, // a frame started while active ends in its slot
		Slots:        slots,
	})

	// Random traffic for 40 periods at about 40% of the link, in bursts
	// of 1 to 6 frames on a random queue.
	rng := rand.New(rand.NewPCG(5, 6))
	var frames []txFrame
	for now := int64(0); now < 3000+40*55_000; {
		q := rng.IntN(4)
		for range 1 + rng.IntN(6) {
			frames = append(frames, txFrame{queue: q, arrive: now, length: lengths[rng.IntN(len(lengths))]})
		}
		now += rng.Int64N(8_000)
	}
	out := simulateTX(t, NewTDMAScheduler(schedule, nil), rate, frames)

	// slotOf returns the start of the slot holding device time at, and its
	// index; the gap after the last slot counts as slot len(slots).
	slotOf := func(at int64) (start int64, index int) {
		off := (at - 3000) % 55_000
		i := off / int64(slot)
		return at - off + i*int64(slot), int(i)
	}
	var waited, firstInSlot int
	lastDone := make(map[int]int64) // queue -> completion of its previous frame
	for _, r := range out {
		ft := rate.FrameTime(r.length)
		if r.done != r.start+int64(ft) {
			t.Fatalf("frame %+v: done - start = %d, want the frame time %d", r, r.done-r.start, ft)
		}
		if !schedule.Enabled(r.start).Has(r.queue) {
			t.Fatalf("frame %+v started while queue %d is disabled", r, r.queue)
		}
		slotStart, i := slotOf(r.start)
		if r.done > slotStart+int64(slot) {
			t.Fatalf("frame %+v leaves at %d, after its slot %d ends at %d", r, r.done, i, slotStart+int64(slot))
		}
		if r.start < r.arrive {
			t.Fatalf("frame %+v started before it arrived", r)
		}
		if eligible, _ := schedule.NextStart(r.queue, r.arrive); eligible > r.arrive {
			waited++
			if r.start < eligible {
				t.Fatalf("frame %+v started at %d, before its queue's slot at %d", r, r.start, eligible)
			}
		}
		// The queue's first frame in this slot, if it had been waiting
		// since before the slot started: the link is idle at the slot
		// start (the guard band emptied it), so the frame starts at once
		// and leaves one frame time later if the slot is its queue's
		// alone, and starts after at most one frame of the other queue
		// in the shared slot.
		if r.arrive < slotStart && lastDone[r.queue] <= slotStart {
			firstInSlot++
			others := bits.OnesCount64(uint64(slots[i])) - 1
			if limit := slotStart + int64(others)*int64(longest); r.start > limit {
				t.Fatalf("frame %+v waited for slot %d at %d but started at %d, more than %d frame times later",
					r, i, slotStart, r.start, others)
			}
			if others == 0 && r.done != slotStart+int64(ft) {
				t.Fatalf("frame %+v: its queue's slot %d starts at %d; TX completion at %d, want one frame time later (%d)",
					r, i, slotStart, r.done, slotStart+int64(ft))
			}
		}
		lastDone[r.queue] = r.done
	}
	t.Logf("%d frames, %d waited for their slot, %d were first in a slot after waiting", len(out), waited, firstInSlot)
	if waited < len(out)/2 || firstInSlot < 100 {
		t.Errorf("the traffic exercises too little waiting: %d of %d waited, %d first in slot", waited, len(out), firstInSlot)
	}
}

func TestTDMASchedulerDoesNotAllocate(t *testing.T) {
	schedule := mustTDMA(t, TDMAConfig{
		Period: 40 * time.Microsecond, SlotPeriod: 10 * time.Microsecond,
		Slots: []QueueMask{0b0001, 0b0010, 0b0100, 0b1000},
	})
	var s TxScheduler = NewTDMAScheduler(schedule, nil)
	now := int64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		s.Next(0b1011, now)
		schedule.NextStart(2, now)
		now += 997
	})
	if allocs != 0 {
		t.Errorf("TDMAScheduler.Next and TDMA.NextStart allocate %v times per call, want 0", allocs)
	}
}

func BenchmarkTDMASchedulerNext(b *testing.B) {
	schedule := mustTDMA(b, TDMAConfig{
		Period: 40 * time.Microsecond, SlotPeriod: 10 * time.Microsecond, ActivePeriod: 9 * time.Microsecond,
		Slots: []QueueMask{0b0001, 0b0010, 0b0100, 0b1000},
	})
	var s TxScheduler = NewTDMAScheduler(schedule, nil)
	b.ReportAllocs()
	now, sink := int64(0), 0
	for b.Loop() {
		q, _ := s.Next(0b1011, now)
		sink += q
		now += 68 // one minimum frame at 10 Gbit/s
	}
	_ = sink
}
