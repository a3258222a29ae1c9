package nicsim

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/tickwire/tickwire/link/dmaring"
)

// txStamps returns the device-clock stamps (Unix ns) of the first n TX
// completions of TX queue q, extending their 16-bit seconds with ref, a
// device time within 9 hours of them. The host reclaims its buffers but
// never clears a completion, so they stay readable.
func txStamps(t *testing.T, r *dmaring.Region, q, n int, ref int64) []int64 {
	t.Helper()
	cq := r.Regs(dmaring.KindCQ, 2*q)
	size := uint32(1) << cq.LogSize()
	var out []int64
	for i := uint32(0); i < uint32(n); i++ {
		off := int(cq.Base()) + int(i)*dmaring.CplSize
		if !dmaring.EntryIsNew(r.Load32(off+dmaring.CplPhase), i, size) {
			t.Fatalf("TX queue %d: %d completions, want %d", q, i, n)
		}
		b := r.Bytes()[off : off+dmaring.CplSize]
		if s := dmaring.ErrCode(b[dmaring.CplStatus]); s != dmaring.ErrNone {
			t.Fatalf("TX queue %d completion %d: status %v", q, i, s)
		}
		sec := ref/1e9&^0xffff | int64(binary.LittleEndian.Uint16(b[dmaring.CplTsS:]))
		if sec > ref/1e9+0x8000 {
			sec -= 0x10000
		} else if sec+0x8000 < ref/1e9 {
			sec += 0x10000
		}
		out = append(out, sec*1e9+int64(binary.LittleEndian.Uint32(b[dmaring.CplTsNs:])))
	}
	return out
}

// TestTDMAHoldsDisabledQueue: with a 1 Gbit/s link and a TDMA schedule that
// enables queue 0 in slot 0 and queue 1 in slot 1, frames posted on both
// queues during slot 0 leave: queue 0's at once, queue 1's only in slot 1,
// the first of them within one frame time of the slot's start (its
// completion stamp is exactly start plus frame time), the rest one after
// another inside the slot's active period. On the device clock's TX
// completion stamps, no two frames overlap on the link.
func TestTDMAHoldsDisabledQueue(t *testing.T) {
	const (
		frameLen = 1000
		perQueue = 5
		slot     = 100 * time.Millisecond // posting 10 frames must fit in slot 0
		rate     = Rate1G
	)
	ft := int64(rate.FrameTime(frameLen))
	ep, err := dmaring.New(dmaring.Config{Queues: 2, RingLog: 5, InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	clock := NewClock()
	start := clock.Now()
	schedule, err := NewTDMA(TDMAConfig{
		Start: start, Period: 2 * slot, SlotPeriod: slot,
		ActivePeriod: slot - time.Duration(ft), // a guard of one frame time
		Slots:        []QueueMask{1 << 0, 1 << 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{
		Region: ep.Region(), Wakeups: ep.Wakeups(), Clock: clock,
		TxScheduler: NewTDMAScheduler(schedule, nil), LinkRate: rate,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	frame := make([]byte, frameLen)
	frame[12], frame[13] = 0x88, 0xb5
	for i := range perQueue {
		for q := range 2 {
			frame[14] = byte(i)
			if err := ep.Send(q, frame); err != nil {
				t.Fatal(err)
			}
		}
	}
	posted := clock.Now()
	if posted >= start+int64(slot) {
		t.Fatalf("posting took %v, longer than slot 0 (%v): the test cannot tell waiting from sending", time.Duration(posted-start), slot)
	}
	deadline := time.Now().Add(20 * time.Second)
	for d.Stats().TxFrames != 2*perQueue {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %d frames sent, want %d", d.Stats().TxFrames, 2*perQueue)
		}
		time.Sleep(time.Millisecond)
	}

	q0 := txStamps(t, ep.Region(), 0, perQueue, start)
	q1 := txStamps(t, ep.Region(), 1, perQueue, start)
	slot1 := start + int64(slot)
	for i, s := range q0 {
		if from := s - ft; from < start || !schedule.Enabled(from).Has(0) {
			t.Errorf("queue 0 frame %d left at %d ns into the schedule, want in slot 0's active period", i, from-start)
		}
	}
	if q1[0] != slot1+ft {
		t.Errorf("queue 1's first frame completed %d ns into slot 1, want %d (one frame time)", q1[0]-slot1, ft)
	}
	for i, s := range q1 {
		if from := s - ft; from < slot1 || !schedule.Enabled(from).Has(1) {
			t.Errorf("queue 1 frame %d left at %d ns into slot 1, outside its active period", i, from-slot1)
		}
	}
	all := append(append([]int64(nil), q0...), q1...)
	for i := 1; i < len(all); i++ {
		if all[i]-all[i-1] < ft {
			t.Errorf("completion %d stamped %d ns after the one before, less than a frame time (%d ns)", i, all[i]-all[i-1], ft)
		}
	}
}
