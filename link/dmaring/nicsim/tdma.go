package nicsim

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrTDMAConfig is the error NewTDMA wraps when it rejects a TDMAConfig; the
// wrapping error says which field is wrong.
var ErrTDMAConfig = errors.New("nicsim: invalid TDMA schedule")

// TDMAConfig is a TDMA schedule, with the timing parameters of Corundum's
// tdma_scheduler.v (schedule start, schedule period, timeslot period, active
// period) and the queue enables of its tx_scheduler_ctrl_tdma.v:
//
//	Start
//	  |<---------------- Period ---------------->|
//	  | slot 0     | slot 1     | slot 2     |gap| slot 0 ...
//	  |<-SlotPeriod->|
//	  |<-Active->|guard
//
// Times are device-clock nanoseconds and intervals are half-open: a slot
// starting at s with active period a enables its queues from s included to
// s+a excluded. (Corundum switches on the first clock cycle after a
// boundary; a software clock has no cycle to wait for.) Like Corundum's, the
// schedule knows nothing of frame lengths: the guard band keeps frames
// inside their slot.
type TDMAConfig struct {
	// Start is the device time at which the first schedule period begins;
	// periods follow every Period after it. Before Start the schedule is
	// not running and no queue is enabled, as in Corundum, whose TDMA
	// scheduler enables nothing until it has reached the start time. Start
	// must not be negative.
	Start int64

	// Period is the schedule period. Each period starts with slot 0.
	Period time.Duration

	// SlotPeriod is the length of a time slot: slot i starts i*SlotPeriod
	// into the period. It must not exceed Period. As in Corundum the period
	// takes precedence: a slot that would run past the end of the period is
	// cut there, and the next period starts with slot 0 on time. Time left
	// in the period after the last slot enables no queue.
	SlotPeriod time.Duration

	// ActivePeriod is the part of each slot, from its start, during which
	// the slot's queues are enabled; the rest of the slot is a guard band
	// with every queue disabled. A queue only starts a frame while it is
	// enabled, so a guard of one longest frame time at the link rate
	// (LinkRate.FrameTime) keeps every frame inside its slot. Zero means
	// the whole slot (no guard); it must not exceed SlotPeriod.
	ActivePeriod time.Duration

	// Slots[i] is the set of queues enabled during slot i. Corundum keeps
	// the transpose, one word of slot bits per queue; a mask per slot is
	// the same table. There must be at least one slot and no more than fit
	// in a period: len(Slots) <= ceil(Period/SlotPeriod). A slot may be
	// empty.
	Slots []QueueMask
}

// TDMA is a validated TDMA schedule. It answers which queues are enabled at a
// device time, and when a queue is enabled next. A TDMA is immutable and safe
// for concurrent use; Enabled and NextStart do not allocate.
type TDMA struct {
	start  int64
	period int64
	slot   int64
	active int64
	slots  []QueueMask
	all    QueueMask // the union of slots
}

// NewTDMA validates c and returns its schedule. An invalid configuration
// gives an error that wraps ErrTDMAConfig. NewTDMA copies c.Slots.
func NewTDMA(c TDMAConfig) (*TDMA, error) {
	bad := func(format string, args ...any) (*TDMA, error) {
		return nil, fmt.Errorf("%w: %s", ErrTDMAConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Start < 0:
		return bad("start time %d is negative", c.Start)
	case c.Period <= 0:
		return bad("schedule period %v is not positive", c.Period)
	case c.SlotPeriod <= 0:
		return bad("slot period %v is not positive", c.SlotPeriod)
	case c.SlotPeriod > c.Period:
		return bad("slot period %v is longer than the schedule period %v", c.SlotPeriod, c.Period)
	case c.ActivePeriod < 0:
		return bad("active period %v is negative", c.ActivePeriod)
	case c.ActivePeriod > c.SlotPeriod:
		return bad("active period %v is longer than the slot period %v", c.ActivePeriod, c.SlotPeriod)
	case len(c.Slots) == 0:
		return bad("no slots")
	}
	fit := (c.Period-1)/c.SlotPeriod + 1 // slots that start inside the period: ceil(Period/SlotPeriod)
	if int64(len(c.Slots)) > int64(fit) {
		return bad("%d slots of %v do not fit in a schedule period of %v: at most %d", len(c.Slots), c.SlotPeriod, c.Period, fit)
	}
	t := &TDMA{
		start:  c.Start,
		period: int64(c.Period),
		slot:   int64(c.SlotPeriod),
		active: int64(c.ActivePeriod),
		slots:  append([]QueueMask(nil), c.Slots...),
	}
	if t.active == 0 {
		t.active = t.slot
	}
	for _, m := range t.slots {
		t.all |= m
	}
	return t, nil
}

// Config returns the schedule's configuration, with ActivePeriod filled in
// and a copy of Slots.
func (t *TDMA) Config() TDMAConfig {
	return TDMAConfig{
		Start:        t.start,
		Period:       time.Duration(t.period),
		SlotPeriod:   time.Duration(t.slot),
		ActivePeriod: time.Duration(t.active),
		Slots:        append([]QueueMask(nil), t.slots...),
	}
}

// window returns the active window of slot i as offsets into a period.
func (t *TDMA) window(i int) (from, to int64) {
	from = int64(i) * t.slot
	return from, min(from+t.active, from+t.slot, t.period)
}

// Enabled returns the queues enabled at device time now: the slot's queues
// while now is inside a slot's active window, no queue in a guard band, in
// the gap after the last slot, or before the schedule starts.
func (t *TDMA) Enabled(now int64) QueueMask {
	if now < t.start {
		return 0
	}
	off := (now - t.start) % t.period
	i := off / t.slot
	if i >= int64(len(t.slots)) {
		return 0
	}
	if _, to := t.window(int(i)); off >= to {
		return 0
	}
	return t.slots[i]
}

// NextStart returns the earliest device time at or after now at which queue
// is enabled: now itself if the queue is enabled at now, otherwise the start
// of its next active window. It returns 0 and false if no slot enables queue
// (or that window would start past the largest int64 time).
func (t *TDMA) NextStart(queue int, now int64) (int64, bool) {
	if queue < 0 || queue >= MaxSchedQueues {
		return 0, false
	}
	at := t.nextEnabled(1<<uint(queue), now)
	if at == Never {
		return 0, false
	}
	return at, true
}

// nextEnabled returns the earliest device time at or after now at which a
// queue of mask is enabled, or Never.
func (t *TDMA) nextEnabled(mask QueueMask, now int64) int64 {
	if mask&t.all == 0 {
		return Never
	}
	now = max(now, t.start)
	off := (now - t.start) % t.period
	base := now - off // start of the period holding now
	for i, m := range t.slots {
		if m&mask == 0 {
			continue
		}
		from, to := t.window(i)
		if off < to {
			return base + max(from, off)
		}
	}
	// Nothing left in this period: the first window of mask in the next.
	if base > math.MaxInt64-t.period {
		return Never
	}
	for i, m := range t.slots {
		if m&mask != 0 {
			from, _ := t.window(i)
			return base + t.period + from
		}
	}
	return Never // unreachable: mask&t.all != 0
}

// TDMAScheduler is a TxScheduler that lets only the queues a TDMA schedule
// enables send, and leaves the choice among them to another TxScheduler,
// as Corundum's TDMA control gates the enables of its round-robin
// scheduler. When no ready queue is enabled it returns -1 and the start of
// the next active window of a ready queue, so a frame on a disabled queue
// waits for its slot. It is not safe for concurrent use; Next does not
// allocate.
type TDMAScheduler struct {
	tdma  *TDMA
	inner TxScheduler
}

var _ TxScheduler = (*TDMAScheduler)(nil)

// NewTDMAScheduler returns a scheduler that filters ready queues through
// schedule and picks among the enabled ones with inner; a nil inner means a
// new RoundRobin.
func NewTDMAScheduler(schedule *TDMA, inner TxScheduler) *TDMAScheduler {
	if inner == nil {
		inner = &RoundRobin{}
	}
	return &TDMAScheduler{tdma: schedule, inner: inner}
}

// Next implements TxScheduler.Next.
func (s *TDMAScheduler) Next(ready QueueMask, now int64) (queue int, retry int64) {
	enabled := ready & s.tdma.Enabled(now)
	if enabled == 0 {
		return -1, s.tdma.nextEnabled(ready, now)
	}
	q, retry := s.inner.Next(enabled, now)
	if q >= 0 {
		return q, 0
	}
	// The inner scheduler holds back the enabled queues; ask again when it
	// says, or when another ready queue's slot comes, whichever is first.
	return -1, min(retry, s.tdma.nextEnabled(ready&^enabled, now))
}
