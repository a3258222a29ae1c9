package hwoffload

import "github.com/tickwire/tickwire/internal/shm"

// FakeRegion returns a region laid out as an engine lays it out, with
// 2^log2 slots per ring and nothing running: tests play the engine.
func FakeRegion(log2 int) *shm.Region {
	ring := SlotBytes << log2
	r, err := shm.New(WindowBytes + NumRings*ring)
	if err != nil {
		panic(err)
	}
	for k := range NumRings {
		r.Store64(RingReg(k, RingBase), uint64(WindowBytes+k*ring))
		r.Store32(RingReg(k, RingLog2Slots), uint32(log2))
		r.Store32(RingReg(k, RingSlotBytes), SlotBytes)
	}
	r.Store32(RegVersion, Version)
	r.Store32(RegMagic, Magic)
	return r
}
