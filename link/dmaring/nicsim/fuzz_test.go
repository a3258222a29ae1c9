package nicsim

import (
	"encoding/binary"
	"testing"

	"github.com/tickwire/tickwire/link/dmaring"
)

// fuzzRegs are the registers FuzzDevice writes.
var fuzzRegs = [...]int{dmaring.RegBaseLo, dmaring.RegBaseHi, dmaring.RegCtrl, dmaring.RegSizeCQN, dmaring.RegHostPtr, dmaring.RegArm}

// FuzzDevice drives the device with random descriptor rings, doorbells,
// register writes, commands and received frames, interleaved with TX
// passes. The device must neither panic nor loop: every pass and every
// frame does bounded work, whatever the region holds. Seeds are in
// testdata/fuzz/FuzzDevice.
func FuzzDevice(f *testing.F) {
	f.Add([]byte{3, 4, 0, 64, 3})
	f.Add([]byte{2, 2, 0, 3, 0xff, 0xff, 0xff, 0xff, 3, 4, 0, 64})
	f.Fuzz(func(t *testing.T, ops []byte) {
		ep, err := dmaring.New(dmaring.Config{InMemory: true, Queues: 2, RingLog: 3, BufSize: 256, MTU: 200})
		if err != nil {
			t.Fatal(err)
		}
		defer ep.Close()
		r := ep.Region()
		d, err := newDevice(r, Config{Region: r})
		if err != nil {
			t.Fatal(err)
		}
		l := r.Layout()
		mem := r.Bytes()
		take := func(n int) []byte {
			if len(ops) < n {
				ops = append(ops, make([]byte, n-len(ops))...)
			}
			b := ops[:n]
			ops = ops[n:]
			return b
		}
		kinds := [...]dmaring.QueueKind{dmaring.KindEQ, dmaring.KindCQ, dmaring.KindTX, dmaring.KindRX}
		for steps := 0; len(ops) > 0 && steps < 256; steps++ {
			op := take(1)[0]
			switch op % 6 {
			case 0: // a descriptor, where the queue's base register says its ring is
				a := take(2)
				q := r.Regs(kinds[2+int(a[0]&1)], int(a[0]>>1)%l.Queues)
				off := int(q.Base()&0xFFFFFFF) + int(a[1]%8)*dmaring.DescSize
				desc := take(dmaring.DescSize)
				if off >= 0 && off+dmaring.DescSize <= len(mem) {
					copy(mem[off:], desc)
				}
			case 1: // a doorbell
				a := take(3)
				q := r.Regs(kinds[2+int(a[0]&1)], int(a[0]>>1)%l.Queues)
				q.Store(dmaring.RegHostPtr, uint32(binary.LittleEndian.Uint16(a[1:])))
			case 2: // any register
				a := take(3)
				k := kinds[a[0]%4]
				q := r.Regs(k, int(a[1])%l.QueueCount(k))
				q.Store(fuzzRegs[int(a[2])%len(fuzzRegs)], binary.LittleEndian.Uint32(take(4)))
			case 3:
				d.serveTX()
			case 4: // a frame from the wire
				n := int(binary.LittleEndian.Uint16(take(2))) % 400
				frame := make([]byte, n)
				copy(frame, ops)
				d.Receive(frame, 0)
			case 5: // an mqnic command
				a := take(2)
				k := kinds[a[0]%4]
				r.Regs(k, int(a[1])%l.QueueCount(k)).Command(binary.LittleEndian.Uint32(take(4)))
			}
		}
		for range 64 {
			if !d.serveTX() {
				break
			}
		}
	})
}
