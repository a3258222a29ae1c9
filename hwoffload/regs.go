package hwoffload

// The register map: byte offsets in the register window (BAR0 on the card,
// the start of the twin's region file). REGISTERS.md documents every value
// here and a test keeps the two equal. All registers are little-endian.
const (
	RegMagic            = 0x0000 // RO: Magic
	RegVersion          = 0x0004 // RO: Version
	RegControl          = 0x0008 // RW: ControlRun, ControlReset
	RegStatus           = 0x000C // RO: Status bits
	RegIPAddr           = 0x0010 // RW: IPv4 a<<24|b<<16|c<<8|d, written before RUN
	RegNetmask          = 0x0014 // RW
	RegGateway          = 0x0018 // RW
	RegError            = 0x001C // RO: ErrorCode of the last refused write or fault
	RegMACHi            = 0x0020 // RW: o0<<8|o1
	RegMACLo            = 0x0024 // RW: o2<<24|o3<<16|o4<<8|o5
	RegARPCount         = 0x0030 // RO: valid ARP entries, at most MaxARPEntries
	RegMirrorCtrl       = 0x0040 // RW: MirrorEnable
	RegMirrorServerIP   = 0x0044 // RW: the TCP server whose flows are reassembled, 0 any
	RegMirrorServerPort = 0x0048 // RW: its port, 0 any
	RegFastCtrl         = 0x0050 // RW: FastEnable
	RegCycles           = 0x0100 // RO 64-bit: free-running cycle counter
	RegCycleHz          = 0x0108 // RO: CycleHz
	RegCyclesEpochNs    = 0x0110 // RO 64-bit: Unix ns at which CYCLES was 0

	// Counters, 64-bit, RO.
	RegRxFrames       = 0x0200
	RegRxDropped      = 0x0208
	RegMirrorBytes    = 0x0210
	RegMirrorGapBytes = 0x0218
	RegTrades         = 0x0220
	RegOrders         = 0x0228
	RegStepSeqGaps    = 0x0230
	RegDecodeErrors   = 0x0238

	// Latency, 64-bit, RO, in cycles from the MAC receiving a record's
	// last frame to the record written.
	RegLatCount = 0x0300
	RegLatMin   = 0x0308
	RegLatMax   = 0x0310
	RegLatSum   = 0x0318

	// RegRing0 is the first result ring's registers; ring k's are at
	// RegRing0 + RingStride*k, laid out as the Ring* offsets say.
	RegRing0   = 0x1000
	RingStride = 0x40
)

// Offsets of a result ring's registers from RingReg(k, 0).
const (
	RingBase      = 0x00 // 64-bit; twin RO: byte offset in the region; card RW: DMA address
	RingLog2Slots = 0x08 // RO
	RingSlotBytes = 0x0C // RO: SlotBytes
	RingProd      = 0x10 // RO: records written, mod 2^32
	RingCons      = 0x14 // RW: records the host has consumed, mod 2^32
	RingDropped   = 0x18 // RO: records not written because the ring was full
)

// RingReg returns the window offset of result ring k's register at offset
// reg (one of the Ring* constants).
func RingReg(k, reg int) int { return RegRing0 + RingStride*k + reg }

// Register values and bits.
const (
	Magic   = 0x31305754 // the bytes "TW01"
	Version = 1
	CycleHz = 300_000_000 // CYCLES ticks per second

	ControlRun   = 1 << 0 // kernels free-running
	ControlReset = 1 << 1 // self-clearing reset
	controlBits  = ControlRun | ControlReset

	StatusRunning   = 1 << 0
	StatusLinkUp    = 1 << 1
	StatusInputDone = 1 << 2 // a finite input was consumed, every record written or dropped
	StatusError     = 1 << 3 // ERROR is not 0

	MirrorEnable = 1 << 0 // MIRROR_CTRL: the mirror TOE
	FastEnable   = 1 << 0 // FAST_CTRL: the FAST user kernel

	MaxARPEntries = 128
)

// Region geometry.
const (
	// WindowBytes is the register window: the first 64 KiB of a region.
	WindowBytes = 0x10000
	// NumRings is the number of result rings.
	NumRings = 4
	// SlotBytes is the size of a ring slot, one record.
	SlotBytes = 128
	// RingAlign is the alignment of a ring's BASE.
	RingAlign = 64
	// MinLog2Slots and MaxLog2Slots bound a ring's LOG2_SLOTS.
	MinLog2Slots = 4
	MaxLog2Slots = 20
)

// The result rings.
const (
	RingTrades = 0 // kind KindTrade
	RingOrders = 1 // kind KindOrder
	RingEvents = 2 // gaps, decode errors, flow starts and ends
	RingHost   = 3 // host-path completions and notifications (kinds from 16, REGISTERS.md)
)

// Access says who may write a register.
type Access string

// Register accesses.
const (
	RO Access = "RO" // the engine writes, the host reads
	RW Access = "RW" // the host writes
)

// Register describes one register.
type Register struct {
	Name   string // as in REGISTERS.md
	Offset int    // in the window, or from RingReg(k, 0) for RingRegisters
	Bits   int    // 32 or 64
	Access Access // for the twin; a card's ring BASE is RW
}

// Registers lists the window's registers outside the rings, by offset.
var Registers = []Register{
	{"MAGIC", RegMagic, 32, RO},
	{"VERSION", RegVersion, 32, RO},
	{"CONTROL", RegControl, 32, RW},
	{"STATUS", RegStatus, 32, RO},
	{"IP_ADDR", RegIPAddr, 32, RW},
	{"NETMASK", RegNetmask, 32, RW},
	{"GATEWAY", RegGateway, 32, RW},
	{"ERROR", RegError, 32, RO},
	{"MAC_HI", RegMACHi, 32, RW},
	{"MAC_LO", RegMACLo, 32, RW},
	{"ARP_COUNT", RegARPCount, 32, RO},
	{"MIRROR_CTRL", RegMirrorCtrl, 32, RW},
	{"MIRROR_SERVER_IP", RegMirrorServerIP, 32, RW},
	{"MIRROR_SERVER_PORT", RegMirrorServerPort, 32, RW},
	{"FAST_CTRL", RegFastCtrl, 32, RW},
	{"CYCLES", RegCycles, 64, RO},
	{"CYCLE_HZ", RegCycleHz, 32, RO},
	{"CYCLES_EPOCH_NS", RegCyclesEpochNs, 64, RO},
	{"RX_FRAMES", RegRxFrames, 64, RO},
	{"RX_DROPPED", RegRxDropped, 64, RO},
	{"MIRROR_BYTES", RegMirrorBytes, 64, RO},
	{"MIRROR_GAP_BYTES", RegMirrorGapBytes, 64, RO},
	{"TRADES", RegTrades, 64, RO},
	{"ORDERS", RegOrders, 64, RO},
	{"STEP_SEQ_GAPS", RegStepSeqGaps, 64, RO},
	{"DECODE_ERRORS", RegDecodeErrors, 64, RO},
	{"LAT_COUNT", RegLatCount, 64, RO},
	{"LAT_MIN", RegLatMin, 64, RO},
	{"LAT_MAX", RegLatMax, 64, RO},
	{"LAT_SUM", RegLatSum, 64, RO},
}

// RingRegisters lists a result ring's registers, offsets from RingReg(k, 0).
var RingRegisters = []Register{
	{"BASE", RingBase, 64, RO},
	{"LOG2_SLOTS", RingLog2Slots, 32, RO},
	{"SLOT_BYTES", RingSlotBytes, 32, RO},
	{"PROD", RingProd, 32, RO},
	{"CONS", RingCons, 32, RW},
	{"DROPPED", RingDropped, 32, RO},
}
