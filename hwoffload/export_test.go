package hwoffload

import "github.com/tickwire/tickwire/internal/shm"

// FakeRegion returns a region laid out as an engine lays it out, with
// 2^log2 slots per ring and nothing running: tests play the engine.
func FakeRegion(log2 int) *shm.Region {
	r := fakeRings(log2, 0)
	r.Store32(RegVersion, Version)
	r.Store32(RegMagic, Magic)
	return r
}

// fakeRings returns a region of the window, the rings of 2^log2 slots
// and extra bytes after them, its rings' registers set.
func fakeRings(log2, extra int) *shm.Region {
	ring := SlotBytes << log2
	r, err := shm.New(WindowBytes + NumRings*ring + extra)
	if err != nil {
		panic(err)
	}
	for k := range NumRings {
		r.Store64(RingReg(k, RingBase), uint64(WindowBytes+k*ring))
		r.Store32(RingReg(k, RingLog2Slots), uint32(log2))
		r.Store32(RingReg(k, RingSlotBytes), SlotBytes)
	}
	return r
}

// FakeHostRegion is FakeRegion with the host path's geometry too: the
// command ring, the sessions' buffers and the UDP areas after the rings,
// and IP_ADDR 10.0.0.2. Tests play the engine.
func FakeHostRegion(log2 int) *shm.Region {
	cmd := WindowBytes + NumRings*SlotBytes<<log2
	sess := cmd + CmdSlotBytes<<CmdLog2Slots
	udp := sess + Sessions*2*SessBufBytes
	r := fakeRings(log2, udp+2*UDPAreaBytes-cmd)
	r.Store64(RegCmdBase, uint64(cmd))
	r.Store32(RegCmdLog2Slots, CmdLog2Slots)
	r.Store32(RegCmdSlotBytes, CmdSlotBytes)
	r.Store64(RegSessBase, uint64(sess))
	r.Store32(RegSessions, Sessions)
	r.Store32(RegSessBufBytes, SessBufBytes)
	r.Store64(RegUDPRxBase, uint64(udp))
	r.Store32(RegUDPRxBytes, UDPAreaBytes)
	r.Store64(RegUDPTxBase, uint64(udp+UDPAreaBytes))
	r.Store32(RegUDPTxBytes, UDPAreaBytes)
	r.Store32(RegIPAddr, 0x0a000002)
	r.Store32(RegVersion, Version)
	r.Store32(RegMagic, Magic)
	return r
}
