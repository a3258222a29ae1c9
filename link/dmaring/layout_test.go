package dmaring

import (
	"errors"
	"testing"
	"time"
)

func TestLayoutRoundTrip(t *testing.T) {
	l, err := NewLayout(4, 9, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if l.Regs != PageSize || l.RingArea%PageSize != 0 || l.BufArea%PageSize != 0 || l.Size != l.BufArea+l.BufLen {
		t.Fatalf("layout %+v", l)
	}
	r := newMemRegion(l)
	l.writeHeader(r.mem, 0)
	got, err := ReadLayout(r.mem, len(r.mem))
	if err != nil {
		t.Fatal(err)
	}
	if got != l {
		t.Fatalf("read %+v, wrote %+v", got, l)
	}
	// The register blocks of different kinds do not overlap.
	seen := map[int]bool{}
	for k := KindEQ; k <= KindRX; k++ {
		for i := range l.QueueCount(k) {
			off := l.RegOffset(k, i)
			if seen[off] || off < l.Regs || off+RegBlockSize > l.RingArea {
				t.Fatalf("%s %d at %#x", k, i, off)
			}
			seen[off] = true
		}
	}
}

func TestNewLayoutRejects(t *testing.T) {
	for _, c := range []struct{ q, log, buf int }{{0, 9, 2048}, {65, 9, 2048}, {1, 0, 2048}, {1, 13, 2048}, {1, 9, 100}, {1, 9, 2050}, {1, 9, 32768}} {
		if _, err := NewLayout(c.q, c.log, c.buf); err == nil {
			t.Errorf("NewLayout(%d, %d, %d) accepted", c.q, c.log, c.buf)
		}
	}
}

func TestReadLayoutRejects(t *testing.T) {
	l, _ := NewLayout(1, 4, 256)
	good := newMemRegion(l)
	l.writeHeader(good.mem, 0)
	for _, c := range []struct {
		name string
		mod  func(b []byte) []byte
	}{
		{"tiny", func(b []byte) []byte { return b[:100] }},
		{"region smaller than header says", func(b []byte) []byte { return b[:len(b)-PageSize] }},
		{"magic", func(b []byte) []byte { b[0] ^= 1; return b }},
		{"version", func(b []byte) []byte { le.PutUint32(b[HdrVersion:], 9); return b }},
		{"queues", func(b []byte) []byte { le.PutUint32(b[HdrQueues:], 1000); return b }},
		{"buffer area past end", func(b []byte) []byte { le.PutUint32(b[HdrBufAreaLen:], 1<<29); return b }},
		{"rings unaligned", func(b []byte) []byte { le.PutUint32(b[HdrRingArea:], uint32(l.RingArea+8)); return b }},
		{"huge size", func(b []byte) []byte { le.PutUint32(b[HdrSizeHi:], 1); return b }},
	} {
		b := append([]byte(nil), good.mem...)
		b = c.mod(b)
		if _, err := ReadLayout(b, len(b)); !errors.Is(err, ErrBadRegion) {
			t.Errorf("%s: err %v, want ErrBadRegion", c.name, err)
		}
	}
}

// TestPhaseRule runs a producer and a consumer over three laps of a ring
// initialised as mqnic's driver does (every byte 0x01), checking that the
// consumer sees exactly the entries written, in order, and nothing else.
func TestPhaseRule(t *testing.T) {
	const size = 8
	phase := make([]uint32, size)
	for i := range phase {
		phase[i] = 0x01010101
	}
	val := make([]int, size)
	var prod, cons uint32
	for step := range 3 * size * 2 {
		if step%3 != 2 && prod-cons < size { // write two, read one, mostly
			i := prod & (size - 1)
			val[i] = int(prod)
			phase[i] = PhaseFor(prod, size) | 0x01010101&^PhaseBit
			prod++
			continue
		}
		for {
			i := cons & (size - 1)
			if !EntryIsNew(phase[i], cons, size) {
				break
			}
			if val[i] != int(cons) {
				t.Fatalf("read %d at cons %d", val[i], cons)
			}
			cons++
		}
		if cons != prod {
			t.Fatalf("consumer at %d, producer at %d", cons, prod)
		}
	}
	if prod < 3*size {
		t.Fatalf("only %d entries in three laps", prod)
	}
	// Nothing is new on a fresh ring.
	if EntryIsNew(0x01010101, 0, size) {
		t.Fatal("fresh entry counts as new")
	}
}

func TestCommands(t *testing.T) {
	l, _ := NewLayout(1, 4, 256)
	r := newMemRegion(l)
	l.writeHeader(r.mem, 0)
	q := r.Regs(KindRX, 0)
	for _, c := range []uint32{CmdSetEnable, CmdSetSize | 4, CmdSetCQN | 1, CmdSetConsPtr | 7, CmdSetProdPtr | 3, CmdSetEnable | 1} {
		if err := q.Command(c); err != nil {
			t.Fatalf("%#x: %v", c, err)
		}
	}
	if q.LogSize() != 4 || q.CQN() != 1 || q.Load(RegHostPtr) != 3 || q.Load(RegDevPtr) != 7 || q.Load(RegCtrl)&CtrlEnable != 1 || q.Load(RegCtrl)>>16 != 2 {
		t.Fatalf("registers: log %d cqn %d prod %d cons %d ctrl %d", q.LogSize(), q.CQN(), q.Load(RegHostPtr), q.Load(RegDevPtr), q.Load(RegCtrl))
	}
	if err := q.Command(CmdSetConsPtr | 1); err == nil {
		t.Error("device pointer set while enabled")
	}
	if err := q.Command(CmdSetArm | 1); err == nil {
		t.Error("ARM accepted on an RX queue")
	}
	if err := q.Command(0x12345678); err == nil {
		t.Error("unknown command accepted")
	}
	if err := q.Command(CmdSetSize | 4 | 2<<8); err == nil {
		t.Error("descriptor blocks accepted")
	}
	cq := r.Regs(KindCQ, 1)
	if err := cq.Command(CmdSetConsPtrArm | 0x1234); err != nil {
		t.Fatal(err)
	}
	if cq.Load(RegHostPtr) != 0x1234 || cq.Load(RegArm) != 1 {
		t.Fatal("SET_CONS_PTR_ARM")
	}
}

func TestNotifier(t *testing.T) {
	n, err := NewNotifier()
	if err != nil {
		t.Fatal(err)
	}
	n.Notify()
	n.Notify()
	if err := n.Wait(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- n.Wait() }()
	n.Notify()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	go func() { done <- n.Wait() }()
	time.Sleep(time.Millisecond) // let it block; Close must wake it either way
	n.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait after Close: %v", err)
	}
}

func TestDeviceClockRegister(t *testing.T) {
	l, _ := NewLayout(1, 4, 256)
	r := newMemRegion(l)
	if _, _, ok := r.DeviceClock(); ok {
		t.Fatal("clock valid before the device set it")
	}
	r.SetDeviceClock(1<<33+5, 123)
	sec, ns, ok := r.DeviceClock()
	if !ok || sec != 1<<33+5 || ns != 123 {
		t.Fatalf("clock %d.%d %v", sec, ns, ok)
	}
}
