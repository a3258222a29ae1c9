package dmaring

import (
	"encoding/binary"
	"fmt"
)

// Regs is one queue's register block in a mapping of the region: the
// software counterpart of mqnic's queue, CQ and EQ register blocks. The host
// drives it with Command, as mqnic's driver does with iowrite32 to
// MQNIC_*_CTRL_STATUS_REG, and the base address words; the device reads the
// host words and writes its own (RegDevPtr, RegStatus, RegErrors).
type Regs struct {
	r    *Region
	kind QueueKind
	off  int
}

// Regs returns the register block of queue i of kind k. It panics when i is
// out of range for the layout (a programmer error).
func (r *Region) Regs(k QueueKind, i int) Regs {
	if i < 0 || i >= r.layout.QueueCount(k) {
		panic(fmt.Sprintf("dmaring: %s %d out of range", k, i))
	}
	return Regs{r: r, kind: k, off: r.layout.RegOffset(k, i)}
}

// Load atomically reads the register at reg (a Reg* offset).
func (q Regs) Load(reg int) uint32 { return q.r.Load32(q.off + reg) }

// Store atomically writes the register at reg.
func (q Regs) Store(reg int, v uint32) { q.r.Store32(q.off+reg, v) }

// CompareAndSwap is an atomic compare-and-swap of the register at reg.
func (q Regs) CompareAndSwap(reg int, old, v uint32) bool {
	return q.r.CompareAndSwap32(q.off+reg, old, v)
}

// SetBase writes the ring's base address (a byte offset in the region,
// which the device requires to be 4 KiB aligned) while the queue is
// disabled; enabling the queue publishes it. The low 12 bits are mqnic's VF
// number, which tickwire does not use.
func (q Regs) SetBase(addr uint64) {
	q.Store(RegBaseLo, uint32(addr))
	q.Store(RegBaseHi, uint32(addr>>32))
}

// Base returns the ring's base address.
func (q Regs) Base() uint64 { return uint64(q.Load(RegBaseLo)) | uint64(q.Load(RegBaseHi))<<32 }

// LogSize returns the log2 size last set.
func (q Regs) LogSize() uint32 { return q.Load(RegSizeCQN) >> 24 }

// CQN returns the completion queue (event queue, for a CQ) number last set.
func (q Regs) CQN() uint32 { return q.Load(RegSizeCQN) & 0xFFFFFF }

// hostPtrIsProd reports whether the host owns the producer pointer (TX and
// RX queues) rather than the consumer pointer (CQs and EQs).
func (q Regs) hostPtrIsProd() bool { return q.kind == KindTX || q.kind == KindRX }

// Command applies one mqnic command word. SET_PROD_PTR on a TX or RX
// queue is the doorbell; SET_CONS_PTR on a CQ or EQ returns entries to the
// device. The pointer the device owns (a queue's consumer pointer, a CQ's or
// EQ's producer pointer) can be set only while the queue is disabled, as
// mqnic's driver does when it opens a queue. An unknown or misplaced
// command is an error; nothing is written.
func (q Regs) Command(cmd uint32) error {
	switch {
	case cmd&0xC0000000 == CmdSetCQN:
		v := q.Load(RegSizeCQN)
		q.Store(RegSizeCQN, v&0xFF000000|cmd&0xFFFFFF)
		return nil
	case cmd&0xFFFF0000 == CmdSetSize:
		if cmd&0xFF00 != 0 {
			return fmt.Errorf("dmaring: %s: descriptor blocks (SET_SIZE %#x) not supported", q.kind, cmd)
		}
		v := q.Load(RegSizeCQN)
		q.Store(RegSizeCQN, v&0xFFFFFF|(cmd&0xFF)<<24)
		return nil
	case cmd&0xFFFF0000 == CmdSetProdPtr:
		if q.hostPtrIsProd() {
			q.Store(RegHostPtr, cmd&PtrMask)
			return nil
		}
		return q.setDevPtr(cmd)
	case cmd&0xFFFF0000 == CmdSetConsPtr, cmd&0xFFFF0000 == CmdSetConsPtrArm:
		if q.hostPtrIsProd() {
			return q.setDevPtr(cmd)
		}
		q.Store(RegHostPtr, cmd&PtrMask)
		if cmd&0xFFFF0000 == CmdSetConsPtrArm {
			q.Store(RegArm, 1)
		}
		return nil
	case cmd&0xFFFFFF00 == CmdSetEnable:
		// Every SET_ENABLE moves the generation, so a device that did not
		// look while the queue was disabled still sees the change.
		gen := (q.Load(RegCtrl)>>16 + 1) & 0xFFFF
		q.Store(RegCtrl, gen<<16|cmd&CtrlEnable)
		return nil
	case cmd&0xFFFFFF00 == CmdSetArm:
		if q.hostPtrIsProd() {
			return fmt.Errorf("dmaring: %s: no ARM command", q.kind)
		}
		q.Store(RegArm, cmd&1)
		return nil
	}
	return fmt.Errorf("dmaring: %s: unknown command %#x", q.kind, cmd)
}

func (q Regs) setDevPtr(cmd uint32) error {
	if q.Load(RegCtrl)&CtrlEnable != 0 {
		return fmt.Errorf("dmaring: %s: device pointer set while enabled", q.kind)
	}
	q.Store(RegDevPtr, cmd&PtrMask)
	return nil
}

// Err returns the device's error for the queue, nil when none.
func (q Regs) Err(index int) error {
	if code := ErrCode(q.Load(RegStatus) >> 16); code != ErrNone {
		return &DeviceError{Kind: q.kind, Queue: index, Code: code}
	}
	return nil
}

// Descriptor helpers over the plain bytes of a ring entry.

// PutDesc writes a descriptor into d (DescSize bytes).
func PutDesc(d []byte, csumCmd uint16, length uint32, addr uint64) {
	le := binary.LittleEndian
	le.PutUint16(d[0:], 0)
	le.PutUint16(d[DescCsumCmd:], csumCmd)
	le.PutUint32(d[DescLen:], length)
	le.PutUint64(d[DescAddr:], addr)
}
