package dmaring

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Sizes of the ring entries, as in mqnic_hw.h.
const (
	DescSize  = 16 // MQNIC_DESC_SIZE
	CplSize   = 32 // MQNIC_CPL_SIZE
	EventSize = 32 // MQNIC_EVENT_SIZE
)

// Descriptor fields (struct mqnic_desc): u16 reserved; u16 tx_csum_cmd;
// u32 len; u64 addr, little-endian. addr is a byte offset in the region.
const (
	DescCsumCmd = 2
	DescLen     = 4
	DescAddr    = 8
)

// Completion fields (struct mqnic_cpl), little-endian. CplStatus and
// CplFlags are tickwire's use of mqnic's rsvd2 and rsvd3 bytes.
const (
	CplQueue    = 0  // u16 queue
	CplIndex    = 2  // u16 ring index of the descriptor completed
	CplLen      = 4  // u16 frame length
	CplTsNs     = 8  // u32 device clock nanoseconds
	CplTsS      = 12 // u16 device clock seconds, low 16 bits
	CplRxCsum   = 14 // u16 one's complement sum of the frame after its Ethernet header
	CplRxHash   = 16 // u32 RSS hash
	CplHashType = 20 // u8 RSS hash type
	CplPort     = 21 // u8 port
	CplStatus   = 22 // u8 0 or an ErrCode (tickwire)
	CplFlags    = 23 // u8 CplFlag bits (tickwire)
	CplPhase    = 28 // u32, phase in bit 31
)

// Completion flags (CplFlags).
const (
	// CplFlagCsum says CplRxCsum holds the sum (the device's RX checksum
	// offload).
	CplFlagCsum = 1 << 0
)

// Hash types, as bits of the completion's rx_hash_type byte
// (frame.Frame.HashType). The encoding is Corundum's: its rx_hash module
// (fpga/common/rtl/rx_hash.v) emits a 4-bit type {UDP, TCP, IPv6, IPv4},
// which the RX engine copies into rx_hash_type, and its test bench names the
// bits IPV4=1, IPV6=2, TCP=4, UDP=8. A frame that is not hashed has type 0
// and hash 0.
const (
	// HashTypeIPv4 means the hash covers the IPv4 source and destination
	// addresses.
	HashTypeIPv4 = 1 << 0
	// HashTypeIPv6 is reserved for IPv6, which nicsim does not hash (nor
	// does Corundum's rx_hash yet).
	HashTypeIPv6 = 1 << 1
	// HashTypeTCP, together with HashTypeIPv4, means the hash also covers
	// the TCP source and destination ports.
	HashTypeTCP = 1 << 2
	// HashTypeUDP, together with HashTypeIPv4, means the hash also covers
	// the UDP source and destination ports.
	HashTypeUDP = 1 << 3
)

// Event fields (struct mqnic_event).
const (
	EventType   = 0  // u16
	EventSource = 2  // u16 the completion queue (type CPL) or queue (type error)
	EventCode   = 4  // u32 the ErrCode of an error event (tickwire, mqnic's rsvd0)
	EventKind   = 8  // u32 the QueueKind of an error event's source (tickwire)
	EventPhase  = 28 // u32, phase in bit 31
)

// Event types: MQNIC_EVENT_TYPE_CPL, and tickwire's error event.
const (
	EventTypeCpl   = 0x0000
	EventTypeError = 0x8000
)

// PhaseBit is the bit of a completion's or event's last word that says
// whether the entry is new (see EntryIsNew).
const PhaseBit = 0x80000000

// PtrMask is the width of the ring pointers the registers hold
// (MQNIC_QUEUE_PTR_MASK).
const PtrMask = 0xFFFF

// Ring sizes: log2 of the number of entries. The pointers are 16 bits wide
// and the phase rule needs ptr&size to be meaningful, so 2^15 is the most.
const (
	MinLogSize = 1
	MaxLogSize = 15
)

// Queue register block commands, written with Regs.Command (mqnic_hw.h
// MQNIC_QUEUE_CMD_*, MQNIC_CQ_CMD_*, MQNIC_EQ_CMD_*).
const (
	CmdSetSize       = 0x80020000 // | log2 size
	CmdSetCQN        = 0xC0000000 // | completion (or event) queue number; SET_EQN for a CQ
	CmdSetProdPtr    = 0x80800000 // | pointer: the doorbell of a TX/RX queue
	CmdSetConsPtr    = 0x80900000 // | pointer
	CmdSetConsPtrArm = 0x80910000 // | pointer, then arm (CQ, EQ)
	CmdSetEnable     = 0x40000100 // | 0 or 1
	CmdSetArm        = 0x40000200 // | 0 or 1 (CQ, EQ)
)

// Region header (page 0). Words written once by the creator, then read by
// both sides.
const (
	HdrMagic      = 0x00
	HdrVersion    = 0x04
	HdrSizeLo     = 0x08
	HdrSizeHi     = 0x0C
	HdrQueues     = 0x10 // queue pairs, N
	HdrRegs       = 0x14 // offset of the register blocks
	HdrRingArea   = 0x18 // offset of the ring area
	HdrBufArea    = 0x1C // offset of the buffer area
	HdrBufAreaLen = 0x20 // its length
	HdrBufSize    = 0x24 // largest buffer one descriptor may name
	HdrFeatures   = 0x28 // Feature bits the host asks for
	HdrRingLog    = 0x2C // log2 entries of the host's TX/RX rings and CQs
	HdrEQLog      = 0x30 // log2 entries of its event queues
	HdrMAC        = 0x34 // the host's Ethernet address, 6 bytes (a device on a TAP wire gives it the TAP)

	// Device clock (device-written, a seqlock: odd while being written).
	HdrClockSeq   = 0x40
	HdrClockNs    = 0x44
	HdrClockSecLo = 0x48
	HdrClockSecHi = 0x4C

	// Device status (device-written).
	HdrDevState   = 0x80 // DevStateNone, DevStateRunning, DevStateStopped
	HdrDevErrors  = 0x84 // errors raised so far
	HdrDevLastErr = 0x88 // the last ErrCode
	HdrDevLastQ   = 0x8C // the last error's queue (kind<<16 | index)
	HdrDevSleep   = 0x90 // 1: the device waits for a kick after a doorbell

	// Wake-up words of a shared region (Config.Shared): futexes both
	// processes wait on and bump. The device's, then one per event queue
	// (HdrWakeEQ + 4*i).
	HdrWakeDevice = 0x100
	HdrWakeEQ     = 0x104
)

// Region header values.
const (
	Magic    = 0x52445754 // "TWDR" little-endian
	Version  = 1
	PageSize = 4096 // alignment of ring base addresses and the areas

	DevStateNone    = 0
	DevStateRunning = 1
	DevStateStopped = 2
)

// Features (HdrFeatures).
const (
	FeatureRxCsum = 1 << 0 // device fills CplRxCsum
	FeatureTxCsum = 1 << 1 // device honours tx_csum_cmd
	FeatureTs     = 1 << 2 // device stamps completions
)

// Queue register block: RegBlockSize bytes per queue, host-written words in
// the first half and device-written words in the second, so that the two
// sides never write one cache line.
const (
	RegBlockSize = 128

	RegBaseLo  = 0x00 // MQNIC_QUEUE_BASE_ADDR_VF_REG (bits 11:0, the VF, must be 0)
	RegBaseHi  = 0x04
	RegCtrl    = 0x08 // bit 0: enabled (MQNIC_QUEUE_ENABLE_MASK); bits 31:16 generation, moved by every SET_ENABLE
	RegSizeCQN = 0x0C // bits 31:24 log2 size, 23:0 CQN/EQN
	RegHostPtr = 0x10 // prod ptr of a TX/RX queue, cons ptr of a CQ/EQ
	RegArm     = 0x14 // 1: armed (CQ, EQ); the device clears it when it fires

	RegDevPtr = 0x40 // cons ptr of a TX/RX queue, prod ptr of a CQ/EQ
	RegStatus = 0x44 // bit 3 active (MQNIC_QUEUE_ACTIVE_MASK); bits 23:16 ErrCode
	RegErrors = 0x48 // errors raised on this queue

	CtrlEnable   = 1 << 0
	StatusActive = 1 << 3
)

// QueueKind names the four kinds of queue and the order of their register
// blocks: N event queues, 2N completion queues (TX queue i completes to CQ
// 2i, RX queue i to CQ 2i+1, and both raise events on EQ i), N TX queues and
// N RX queues.
type QueueKind uint8

// The queue kinds.
const (
	KindEQ QueueKind = iota
	KindCQ
	KindTX
	KindRX
)

func (k QueueKind) String() string {
	switch k {
	case KindEQ:
		return "event queue"
	case KindCQ:
		return "completion queue"
	case KindTX:
		return "TX queue"
	case KindRX:
		return "RX queue"
	}
	return fmt.Sprintf("queue kind %d", k)
}

// ErrCode is why the device refused a queue or a descriptor. It travels in
// error events, the queue's status register and completions.
type ErrCode uint8

// The device's error codes.
const (
	ErrNone         ErrCode = iota
	ErrBaseAlign            // ring base address not 4 KiB aligned (or VF bits set)
	ErrRingOutside          // ring not inside the ring area
	ErrLogSize              // log2 size out of MinLogSize..MaxLogSize
	ErrBadCQN               // completion or event queue number out of range
	ErrProdPtr              // producer pointer more than the ring size ahead
	ErrDescAddr             // descriptor's buffer outside the buffer area
	ErrDescLen              // descriptor length 0 or longer than the buffer size
	ErrFrameTooLong         // received frame longer than the RX buffer
	ErrRegionSmall          // region smaller than its header says
)

var errCodeText = [...]string{
	ErrNone:         "no error",
	ErrBaseAlign:    "ring base address not 4 KiB aligned",
	ErrRingOutside:  "ring outside the ring area",
	ErrLogSize:      "log2 ring size out of range",
	ErrBadCQN:       "completion or event queue number out of range",
	ErrProdPtr:      "producer pointer past the ring",
	ErrDescAddr:     "descriptor address outside the buffer area",
	ErrDescLen:      "descriptor length exceeds its buffer",
	ErrFrameTooLong: "frame longer than the RX buffer",
	ErrRegionSmall:  "region too small",
}

func (c ErrCode) String() string {
	if int(c) < len(errCodeText) {
		return errCodeText[c]
	}
	return fmt.Sprintf("error code %d", c)
}

// DeviceError is an error the device reported for one queue.
type DeviceError struct {
	Kind  QueueKind
	Queue int
	Code  ErrCode
}

func (e *DeviceError) Error() string {
	return fmt.Sprintf("dmaring: device: %s %d: %s", e.Kind, e.Queue, e.Code)
}

// Errors.
var (
	// ErrNotSupported is returned where a shared-memory file (memfd,
	// /dev/shm) or an eventfd is needed on a system without them.
	ErrNotSupported = errors.New("dmaring: shared-memory regions need Linux")
	// ErrBadRegion is wrapped by the errors of a region whose header does
	// not describe a valid layout.
	ErrBadRegion = errors.New("dmaring: bad region")
	// ErrClosed is returned by calls on a closed Endpoint or queue.
	ErrClosed = errors.New("dmaring: closed")
)

// Limits of a Layout.
const (
	MaxQueues     = 64
	MaxBufSize    = 16384
	MinBufSize    = 256
	MaxRegionSize = 1 << 30
)

// Layout is where everything is in a region. The host computes it
// (NewLayout) and writes it into the header; the device reads it back
// (ReadLayout) and checks it against the region's size.
type Layout struct {
	Queues   int // queue pairs
	RingLog  int // log2 entries of each TX and RX ring and of their CQs
	EQLog    int // log2 entries of each event queue
	BufSize  int // bytes of one buffer
	Size     int // region bytes
	Regs     int // offset of the register blocks
	RingArea int // offset of the ring area
	BufArea  int // offset of the buffer area
	BufLen   int // its length
}

// NewLayout lays out a region for queues queue pairs with 2^ringLog entries
// per ring and one buffer of bufSize bytes per ring entry.
func NewLayout(queues, ringLog, bufSize int) (Layout, error) {
	if queues < 1 || queues > MaxQueues {
		return Layout{}, fmt.Errorf("dmaring: %d queues: must be 1 to %d", queues, MaxQueues)
	}
	if ringLog < MinLogSize || ringLog > 12 {
		return Layout{}, fmt.Errorf("dmaring: log2 ring size %d: must be %d to 12", ringLog, MinLogSize)
	}
	if bufSize < MinBufSize || bufSize > MaxBufSize || bufSize%64 != 0 {
		return Layout{}, fmt.Errorf("dmaring: buffer size %d: must be a multiple of 64 from %d to %d", bufSize, MinBufSize, MaxBufSize)
	}
	l := Layout{Queues: queues, RingLog: ringLog, EQLog: 8, BufSize: bufSize}
	l.Regs = PageSize
	l.RingArea = pageUp(l.Regs + 5*queues*RegBlockSize)
	entries := 1 << ringLog
	rings := queues * (pageUp(entries*DescSize)*2 + pageUp(entries*CplSize)*2 + pageUp(EventSize<<l.EQLog))
	l.BufArea = l.RingArea + rings
	l.BufLen = 2 * queues * entries * bufSize
	l.Size = l.BufArea + l.BufLen
	if l.Size > MaxRegionSize {
		return Layout{}, fmt.Errorf("dmaring: region of %d bytes: more than %d", l.Size, MaxRegionSize)
	}
	return l, nil
}

func pageUp(n int) int { return (n + PageSize - 1) &^ (PageSize - 1) }

// RegOffset returns the offset of the register block of queue i of kind k.
func (l *Layout) RegOffset(k QueueKind, i int) int {
	n := l.Queues
	base := l.Regs
	switch k {
	case KindCQ:
		base += n * RegBlockSize
	case KindTX:
		base += 3 * n * RegBlockSize
	case KindRX:
		base += 4 * n * RegBlockSize
	}
	return base + i*RegBlockSize
}

// QueueCount returns how many queues of kind k the layout has.
func (l *Layout) QueueCount(k QueueKind) int {
	if k == KindCQ {
		return 2 * l.Queues
	}
	return l.Queues
}

// writeHeader writes l into the header of mem.
func (l *Layout) writeHeader(mem []byte, features uint32) {
	le.PutUint32(mem[HdrVersion:], Version)
	le.PutUint32(mem[HdrSizeLo:], uint32(l.Size))
	le.PutUint32(mem[HdrSizeHi:], uint32(uint64(l.Size)>>32))
	le.PutUint32(mem[HdrQueues:], uint32(l.Queues))
	le.PutUint32(mem[HdrRegs:], uint32(l.Regs))
	le.PutUint32(mem[HdrRingArea:], uint32(l.RingArea))
	le.PutUint32(mem[HdrBufArea:], uint32(l.BufArea))
	le.PutUint32(mem[HdrBufAreaLen:], uint32(l.BufLen))
	le.PutUint32(mem[HdrBufSize:], uint32(l.BufSize))
	le.PutUint32(mem[HdrFeatures:], features)
	le.PutUint32(mem[HdrRingLog:], uint32(l.RingLog))
	le.PutUint32(mem[HdrEQLog:], uint32(l.EQLog))
	le.PutUint32(mem[HdrMagic:], Magic)
}

// ReadLayout reads and checks the layout in the header of a region of
// size bytes. Errors wrap ErrBadRegion.
func ReadLayout(hdr []byte, size int) (Layout, error) {
	bad := func(format string, args ...any) (Layout, error) {
		return Layout{}, fmt.Errorf("%w: "+format, append([]any{ErrBadRegion}, args...)...)
	}
	if len(hdr) < PageSize || size < PageSize {
		return bad("%d bytes, less than its header (%s)", size, ErrRegionSmall)
	}
	if m := le.Uint32(hdr[HdrMagic:]); m != Magic {
		return bad("magic %#x", m)
	}
	if v := le.Uint32(hdr[HdrVersion:]); v != Version {
		return bad("version %d, want %d", v, Version)
	}
	l := Layout{
		Queues:   int(le.Uint32(hdr[HdrQueues:])),
		RingLog:  int(le.Uint32(hdr[HdrRingLog:])),
		EQLog:    int(le.Uint32(hdr[HdrEQLog:])),
		BufSize:  int(le.Uint32(hdr[HdrBufSize:])),
		Size:     int(uint64(le.Uint32(hdr[HdrSizeLo:])) | uint64(le.Uint32(hdr[HdrSizeHi:]))<<32),
		Regs:     int(le.Uint32(hdr[HdrRegs:])),
		RingArea: int(le.Uint32(hdr[HdrRingArea:])),
		BufArea:  int(le.Uint32(hdr[HdrBufArea:])),
		BufLen:   int(le.Uint32(hdr[HdrBufAreaLen:])),
	}
	switch {
	case l.Size < 0 || l.Size > MaxRegionSize:
		return bad("size %d out of range", l.Size)
	case l.Size > size:
		return bad("header says %d bytes, region has %d (%s)", l.Size, size, ErrRegionSmall)
	case l.Queues < 1 || l.Queues > MaxQueues:
		return bad("%d queues", l.Queues)
	case l.RingLog < MinLogSize || l.RingLog > MaxLogSize || l.EQLog < MinLogSize || l.EQLog > MaxLogSize:
		return bad("log2 sizes %d, %d (%s)", l.RingLog, l.EQLog, ErrLogSize)
	case l.BufSize < MinBufSize || l.BufSize > MaxBufSize:
		return bad("buffer size %d", l.BufSize)
	case l.Regs < PageSize || l.Regs%PageSize != 0 || l.Regs+5*l.Queues*RegBlockSize > l.RingArea:
		return bad("register blocks at %#x", l.Regs)
	case l.RingArea%PageSize != 0 || l.RingArea > l.BufArea:
		return bad("ring area at %#x", l.RingArea)
	case l.BufArea%PageSize != 0 || l.BufLen < 0 || l.BufArea+l.BufLen > l.Size:
		return bad("buffer area %#x+%#x", l.BufArea, l.BufLen)
	}
	return l, nil
}

// EntryIsNew reports whether a completion or event whose last word is phase
// is new to a consumer whose consumer pointer is cons, on a ring of size
// entries: mqnic_process_eq and mqnic_process_rx_cq stop at the first entry
// whose phase bit equals cons&size. A ring starts filled with 0x01 bytes
// (phase 0), cons 0: nothing is new until the device writes phase 1 on its
// first lap, phase 0 on the second, and so on.
func EntryIsNew(phase uint32, cons uint32, size uint32) bool {
	return (phase&PhaseBit != 0) != (cons&size != 0)
}

// PhaseFor returns the phase word the device writes with the entry at
// producer pointer prod on a ring of size entries.
func PhaseFor(prod uint32, size uint32) uint32 {
	if prod&size == 0 {
		return PhaseBit
	}
	return 0
}

var le = binary.LittleEndian
