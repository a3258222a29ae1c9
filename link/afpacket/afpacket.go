// Package afpacket captures frames live from a Linux network interface with an
// AF_PACKET memory-mapped ring, as a link/frame.Source. It is the live input of
// the passive path: a mirror (SPAN) port feeding mirror.Assembler.
//
//	src, err := afpacket.New("eth1", afpacket.Config{Promiscuous: true})
//	if err != nil {
//		return err // not Linux, not root, no such interface...
//	}
//	defer src.Close()
//	batch := frame.NewBatch(64, 2048)
//	for {
//		n, err := src.ReadFrames(batch)
//		for _, f := range batch[:n] {
//			asm.HandleFrame(f.Data(), f.Time)
//		}
//		if err != nil {
//			break // io.EOF once Close was called
//		}
//	}
//
// The ring is run by the pure-Go github.com/gopacket/gopacket/afpacket with
// TPACKET_V2, not V3. V3 hands frames to user space a block at a time and
// retires a partly filled block only when its timer fires (64 ms by
// gopacket's default, 1 ms at the very least), so a lone market-data packet
// on a quiet feed would wait that long. V2 hands over each frame as soon as
// the kernel has written it; the price, one status word per frame instead of
// per block, does not matter at market-data packet rates.
//
// Waiting is done by this package, not by gopacket: the ring is read without
// blocking until it is empty, so one ReadFrames call returns every frame that
// is ready (a batch) without waiting for more, and only an empty ring blocks,
// in poll(2) on the socket together with an eventfd that Close signals. That
// needs the socket's descriptor, which gopacket keeps in an unexported field;
// New reads it with reflection and fails clearly if a gopacket upgrade moved it.
//
// Timestamps are the kernel's software receive time with nanosecond
// resolution (tp_sec, tp_nsec of the ring slot).
//
// Things a mirror port needs from the host, outside this package: capture
// needs root or CAP_NET_RAW; frames addressed to other hosts arrive only with
// Config.Promiscuous; and generic receive offload (GRO/LRO) must be off on the
// capture interface (`ethtool -K eth1 gro off lro off`), otherwise the kernel
// merges TCP segments into super-frames longer than a ring slot, which arrive
// truncated (counted in Stats.Truncated). The kernel strips 802.1Q tags into
// the slot's metadata; set Config.KeepVLANTags to put them back in the frame.
//
// On systems other than Linux, New returns ErrUnsupported.
package afpacket

import (
	"errors"
	"time"

	"github.com/tickwire/tickwire/link/frame"
)

// Defaults for Config.
const (
	// DefaultFrameSize holds a 1514-byte Ethernet frame with two VLAN tags
	// plus the ring slot's own header.
	DefaultFrameSize = 2048
	// DefaultRingFrames is the number of ring slots: 8 MiB with the default
	// frame size, about 45 ms of a saturated 1 Gb/s link.
	DefaultRingFrames = 4096
)

// Config configures a Source. The zero value is valid and uses the defaults.
type Config struct {
	// FrameSize is the size in bytes of one ring slot, slot header
	// included; a frame longer than FrameSize minus about 70 bytes is
	// truncated by the kernel and counted in Stats.Truncated. A multiple of
	// 16, at least 256. Default DefaultFrameSize.
	FrameSize int
	// RingFrames is the number of ring slots. When the ring is full the
	// kernel drops frames (Stats.KernelDrops). Default DefaultRingFrames.
	RingFrames int
	// Promiscuous puts the interface in promiscuous mode for as long as the
	// Source is open, so frames addressed to other hosts (all of a mirror
	// port's traffic) are captured. Default false.
	Promiscuous bool
	// KeepVLANTags re-inserts the 802.1Q tag that the kernel moved out of
	// the frame. gopacket allocates a new frame for each tagged frame when
	// this is set, so it is off by default: the reassembler does not need
	// the tag.
	KeepVLANTags bool
	// ReadTimeout bounds how long ReadFrames waits for the first frame; it
	// then returns 0, ErrTimeout and the Source stays usable, so a reader
	// can advance time on a quiet link (mirror.Assembler.Flush). Zero
	// means wait until a frame arrives or Close is called.
	ReadTimeout time.Duration
}

// Stats counts what a Source has seen since New.
type Stats struct {
	// Frames is the number of frames returned by ReadFrames.
	Frames uint64
	// Truncated is the number of returned frames that were cut short by the
	// ring slot (FrameSize) or by the caller's frame.Frame.Buf.
	Truncated uint64
	// KernelDrops is the number of frames the kernel dropped because the
	// ring was full (PACKET_STATISTICS).
	KernelDrops uint64
}

var (
	// ErrUnsupported is returned by New on systems without AF_PACKET.
	ErrUnsupported = errors.New("afpacket: AF_PACKET capture needs Linux")
	// ErrTimeout is returned by ReadFrames when Config.ReadTimeout passed
	// without a frame; the Source stays usable.
	ErrTimeout = errors.New("afpacket: read timeout")
)

// Error describes a failed operation on an interface.
type Error struct {
	Op        string // "open", "read", ...
	Interface string
	Err       error
}

// Error implements error.
func (e *Error) Error() string {
	return "afpacket: " + e.Op + " " + e.Interface + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

var _ frame.Source = (*Source)(nil)
