// Package afxdp runs a tickwire stack, or a mirror capture, on the receive
// rings of a Linux network interface through AF_XDP sockets: the kernel's
// TCP/IP stack is out of the path of the frames the package owns.
//
//	ep, err := afxdp.New("eth1", afxdp.Config{Addr: netip.MustParseAddr("10.0.0.2")})
//	s, err := tickwire.New(tickwire.Config{Link: ep, MAC: ep.MAC(), Addr: netip.MustParsePrefix("10.0.0.2/24")})
//	defer s.Close() // closes ep: the XDP program is detached
//
//	src, err := afxdp.NewSource("eth1", afxdp.Config{Filter: afxdp.Filter{Port: 9001}})
//	defer src.Close()
//	n, err := src.ReadFrames(batch) // a frame.Source, as link/afpacket's
//
// # Rings
//
// Each queue of the interface that the package uses gets one AF_XDP socket
// with its own UMEM: Config.RingFrames frames for receiving, all of them
// posted to the fill ring, and as many for sending, and four rings (fill,
// RX, TX, completion) of Config.RingFrames entries each, mapped into the
// process. The fill ring can hold every receive frame and the completion
// ring every send frame, so returning a frame never waits for room. A frame
// is copied out of the UMEM (into a pooled gVisor buffer for the stack, into
// the caller's batch for a Source) and its UMEM frame goes straight back to
// the fill ring: UMEM frames are reused and nothing is allocated per frame.
// Every frame is stamped with internal/rxclock when the reader takes it from
// the RX ring (AF_XDP carries no kernel timestamp).
//
// The socket binds with XDP_USE_NEED_WAKEUP where the kernel has it (then a
// system call is made only when the kernel asks for one) and asks for
// zero-copy unless Config.Copy is set; a driver without zero-copy falls
// back to copy mode, which every interface has (veth, generic XDP).
// ZeroCopy reports which one the socket got.
//
// The shared ring indexes are read and written with sync/atomic, whose
// operations are sequentially consistent: a load of the kernel's producer
// index is (at least) an acquire before the descriptors are read, and the
// store of our producer index is (at least) a release after the descriptors
// were written, which is what the kernel's rings require (see
// Documentation/networking/af_xdp.rst). Pointers into the mapped rings are
// made in rings_unsafe.go, the only file that imports unsafe.
//
// # The XDP program
//
// The program that steers frames into the sockets is built in Go with
// github.com/cilium/ebpf's asm package (no C compiler, no object file) and
// redirects only what the package owns, through an XSKMAP indexed by the
// receive queue; everything else gets XDP_PASS and the host keeps working:
//
//   - New (endpoint mode): IPv4 frames to Config.Addr, and ARP frames whose
//     target address is Config.Addr (requests for it and replies to it).
//   - NewSource (capture mode): IPv4 frames matching Config.Filter, which is
//     required: there is no steal-everything default. Unlike AF_PACKET,
//     capture over AF_XDP takes the frames it redirects away from the
//     kernel: the host's own sockets no longer see them.
//
// Frames with a VLAN tag in the packet are passed to the kernel, not
// matched.
//
// The program is attached with a BPF link (BPF_LINK_CREATE), in driver
// (native) mode when the driver has it and generic (SKB) mode otherwise
// (Config.Mode). A BPF link belongs to the descriptor that made it: Close
// detaches it, and so does the kernel when the process exits or crashes,
// so a crash leaves nothing attached and there is nothing to clean up. An
// XDP program that someone else attached makes New fail with an
// *AttachedError unless Config.Replace is set; a program that a tickwire
// process attached the old way (netlink, which survives the process) is
// recognised by its name and replaced without asking. A program held by
// another live BPF link cannot be replaced at all: the error says so. The
// interface is left as it was found on Close, except that a program
// replaced with Config.Replace is not put back.
//
// # What the host must provide
//
// Root, or CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF (ErrPermission otherwise);
// a kernel built with CONFIG_XDP_SOCKETS (ErrNoKernelSupport). The frames
// must be real wire frames: on a veth the kernel peer must not send TCP
// with partial checksums or as large GSO segments, so turn those off on the
// peer (`ethtool -K peer tx off tso off gso off`); a physical NIC needs
// nothing. On systems other than linux/amd64 and linux/arm64, New and
// NewSource return ErrNotSupported.
//
// # gVisor's pkg/xdp and pkg/tcpip/link/xdp
//
// gVisor has an AF_XDP control block (pkg/xdp) and a link endpoint on it
// (pkg/tcpip/link/xdp). This package uses neither and does these things
// differently:
//
//   - Teardown: pkg/xdp has no Close (its rings and UMEM are never unmapped)
//     and leaks the mappings made before a failing setup step; the endpoint's
//     Close does nothing. Here every Open is undone by Close, which tests
//     that open and close sockets over and over rely on.
//   - Bad input: pkg/xdp panics on a descriptor that crosses a frame
//     (UMEM.Get) and the endpoint panics on a frame shorter than an
//     Ethernet header; WritePackets copies a packet into a frame without
//     checking its length. Here such descriptors and frames are counted
//     (Stats.RxInvalid, Stats.TxDropped) and skipped.
//   - Locking: one UMEM mutex is shared by the receive and send paths.
//     Here each socket has separate receive and send frame pools, so the
//     reader never takes a lock and the sender takes only its own.
//   - need_wakeup: the endpoint never sets it, and so pays a system call
//     per TX batch and per empty poll; here it is used where supported.
//   - Timestamps, Stats (XDP_STATISTICS: kernel drops, empty fill ring),
//     busy-polling, a configurable ring size and the XDP program, which
//     gVisor leaves to runsc.
//
// Their ring arithmetic (cached producer and consumer indexes, the fill
// ring's consumer kept one ring-length ahead) is the kernel's own scheme,
// written here afresh.
package afxdp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/tickwire/tickwire/link/frame"
)

// Defaults for Config.
const (
	// DefaultFrameSize is the UMEM frame size: a 1514-byte frame fits after
	// the kernel's 256 bytes of XDP headroom.
	DefaultFrameSize = 2048
	// DefaultRingFrames is the number of receive frames, of send frames
	// and of entries in each ring, per queue: 8 MiB of UMEM per queue with
	// the default frame size.
	DefaultRingFrames = 2048
	// xdpHeadroom is what the kernel keeps in front of a received frame
	// (XDP_PACKET_HEADROOM).
	xdpHeadroom = 256
)

// AttachMode is how the XDP program is attached to the interface.
type AttachMode int

// The attach modes.
const (
	// AttachAuto tries driver mode and falls back to generic mode.
	AttachAuto AttachMode = iota
	// AttachDriver runs the program in the driver (native XDP).
	AttachDriver
	// AttachGeneric runs the program on the kernel's socket buffers
	// (generic or SKB mode), which every interface has.
	AttachGeneric
)

// String returns "auto", "driver" or "generic".
func (m AttachMode) String() string {
	switch m {
	case AttachAuto:
		return "auto"
	case AttachDriver:
		return "driver"
	case AttachGeneric:
		return "generic"
	}
	return fmt.Sprintf("AttachMode(%d)", int(m))
}

// Filter selects the frames a Source captures: IPv4 frames from or to Host
// (when valid) and, when Port is not 0, TCP or UDP segments from or to Port
// (the first fragment only). At least one of the two must be set.
type Filter struct {
	Host netip.Addr
	Port uint16
}

// IsZero reports whether f selects nothing (neither Host nor Port set).
func (f Filter) IsZero() bool { return !f.Host.IsValid() && f.Port == 0 }

// String returns the filter as HOST:PORT, with * for a field not set.
func (f Filter) String() string {
	h, p := "*", "*"
	if f.Host.IsValid() {
		h = f.Host.String()
	}
	if f.Port != 0 {
		p = fmt.Sprint(f.Port)
	}
	return h + ":" + p
}

// Config configures an Endpoint (New) or a Source (NewSource). The zero
// value of every field but Addr (New) and Filter (NewSource) is valid.
type Config struct {
	// Addr is the stack's IPv4 address (New only, required): the program
	// steers IPv4 frames to it and ARP frames for it to the stack.
	Addr netip.Addr
	// MAC is the stack's Ethernet address (New only); default the
	// interface's own, so the peer's frames reach it without promiscuous
	// mode.
	MAC net.HardwareAddr
	// Filter selects what a Source captures (NewSource only, required).
	Filter Filter
	// Queue is the first receive queue to bind, default 0; Queues is how
	// many, from Queue on, default 1: one socket, UMEM and reader each.
	// An Endpoint sends on the socket of Queue.
	Queue, Queues int
	// FrameSize is the UMEM frame size in bytes, 2048 or 4096; default
	// DefaultFrameSize. A frame longer than FrameSize-256 is dropped by
	// the kernel (Stats.KernelDrops); New fails when the interface's MTU
	// does not fit.
	FrameSize int
	// RingFrames is the number of receive frames per queue, a power of two
	// from 64 to 32768; there are as many send frames, and each ring has
	// RingFrames entries. Default DefaultRingFrames.
	RingFrames int
	// Mode is how the XDP program is attached; default AttachAuto.
	Mode AttachMode
	// Copy binds in copy mode without trying zero-copy. Default false.
	Copy bool
	// Replace detaches an XDP program someone else attached to the
	// interface (attached through netlink; one held by a live BPF link
	// cannot be) and does not put it back on Close. Default false: New
	// fails with *AttachedError.
	Replace bool
	// Promiscuous puts the interface in promiscuous mode while the
	// endpoint or source is open, so frames addressed to other hosts (a
	// mirror port's) reach the program. It holds a membership of a packet
	// socket that receives nothing (PACKET_MR_PROMISC), which the kernel
	// counts and drops when the socket closes, so Close, exit or a crash
	// leave the interface's mode as it was. Default false.
	Promiscuous bool
	// ReadTimeout bounds how long Source.ReadFrames waits for a first
	// frame before it returns 0, ErrTimeout (the Source stays usable).
	// Zero: wait until a frame arrives or Close.
	ReadTimeout time.Duration
}

// Stats counts what an Endpoint or Source has seen since it was opened,
// summed over its queues. All counters only grow.
type Stats struct {
	RxFrames    uint64 // frames delivered to the stack or returned by ReadFrames
	RxBytes     uint64 // their bytes
	RxTruncated uint64 // Source: frames cut short by the caller's frame.Frame.Buf
	RxInvalid   uint64 // descriptors outside their frame, and frames shorter than an Ethernet header
	// KernelDrops is what the kernel could not put in the RX ring: ring
	// full or a frame too long for a UMEM frame (XDP_STATISTICS rx_dropped
	// and rx_ring_full).
	KernelDrops uint64
	// FillRingEmpty counts the times the kernel found no free frame in the
	// fill ring (XDP_STATISTICS rx_fill_ring_empty_descs).
	FillRingEmpty uint64
	TxFrames      uint64 // frames put on the TX ring
	TxBytes       uint64 // their bytes
	TxDropped     uint64 // frames not sent: no free send frame, too long, or the kernel refused the kick
}

var (
	// ErrNotSupported is returned by New and NewSource off linux/amd64
	// and linux/arm64.
	ErrNotSupported = errors.New("afxdp: AF_XDP needs Linux on amd64 or arm64")
	// ErrPermission is the cause when the process may not open AF_XDP
	// sockets or load XDP programs.
	ErrPermission = errors.New("afxdp: permission denied (AF_XDP needs root, or CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF)")
	// ErrNoKernelSupport is the cause when the kernel has no AF_XDP
	// sockets (built without CONFIG_XDP_SOCKETS).
	ErrNoKernelSupport = errors.New("afxdp: the kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS)")
	// ErrNoInterface is the cause when the interface does not exist.
	ErrNoInterface = errors.New("afxdp: no such interface")
	// ErrQueueRange is the cause when Config.Queue and Config.Queues name a
	// receive queue the interface does not have.
	ErrQueueRange = errors.New("afxdp: receive queue out of range")
	// ErrTimeout is returned by Source.ReadFrames when Config.ReadTimeout
	// passed without a frame; the Source stays usable. It has a
	// Timeout() bool method that returns true, as net's timeouts do, so
	// feed.Decoder.Run advances time on it.
	ErrTimeout error = timeoutError{}
)

type timeoutError struct{}

func (timeoutError) Error() string { return "afxdp: read timeout" }
func (timeoutError) Timeout() bool { return true }

// Error describes a failed operation on an interface.
type Error struct {
	Op        string // "open", "attach", "read", ...
	Interface string
	Err       error
}

// Error implements error.
func (e *Error) Error() string {
	return "afxdp: " + e.Op + " " + e.Interface + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// AttachedError is the cause when the interface already has an XDP program
// that New or NewSource may not replace.
type AttachedError struct {
	ProgramID   uint32 // the attached program's ID (bpftool prog show id ID)
	ProgramName string // its name, "" when unknown
	Mode        string // "driver", "generic", "offload" or "multi"
	// Held is true when a live BPF link holds the program: it cannot be
	// replaced, even with Config.Replace, until its owner closes it.
	Held bool
}

// Error implements error.
func (e *AttachedError) Error() string {
	s := fmt.Sprintf("afxdp: the interface already has XDP program %d %q (%s mode)", e.ProgramID, e.ProgramName, e.Mode)
	if e.Held {
		return s + ", held by a live BPF link: stop its owner first"
	}
	return s + ": set Config.Replace to replace it"
}

// ConfigError names the Config field that is invalid.
type ConfigError struct {
	Field  string
	Reason string
}

// Error implements error.
func (e *ConfigError) Error() string { return "afxdp: invalid Config." + e.Field + ": " + e.Reason }

// validate fills defaults and checks the fields every mode shares.
func (c *Config) validate() error {
	if c.FrameSize == 0 {
		c.FrameSize = DefaultFrameSize
	}
	if c.RingFrames == 0 {
		c.RingFrames = DefaultRingFrames
	}
	if c.Queues == 0 {
		c.Queues = 1
	}
	switch {
	case c.FrameSize != 2048 && c.FrameSize != 4096:
		return &ConfigError{"FrameSize", "must be 2048 or 4096"}
	case c.RingFrames < 64 || c.RingFrames > 32768 || c.RingFrames&(c.RingFrames-1) != 0:
		return &ConfigError{"RingFrames", "must be a power of two from 64 to 32768"}
	case c.Queue < 0:
		return &ConfigError{"Queue", "must not be negative"}
	case c.Queues < 0 || c.Queues > 64:
		return &ConfigError{"Queues", "must be 1 to 64"}
	case c.Mode < AttachAuto || c.Mode > AttachGeneric:
		return &ConfigError{"Mode", "unknown attach mode"}
	case c.ReadTimeout < 0:
		return &ConfigError{"ReadTimeout", "must not be negative"}
	}
	return nil
}

func (c *Config) validateEndpoint() error {
	if !c.Addr.Is4() {
		return &ConfigError{"Addr", "must be the stack's IPv4 address"}
	}
	if !c.Filter.IsZero() {
		return &ConfigError{"Filter", "is for NewSource; New steers by Addr"}
	}
	if c.MAC != nil && (len(c.MAC) != 6 || c.MAC[0]&1 != 0) {
		return &ConfigError{"MAC", "must be a 6-byte unicast Ethernet address"}
	}
	return c.validate()
}

func (c *Config) validateSource() error {
	if c.Filter.IsZero() {
		return &ConfigError{"Filter", "is required: AF_XDP capture takes the frames it captures away from the kernel, so there is no capture-everything default"}
	}
	if c.Filter.Host.IsValid() && !c.Filter.Host.Is4() {
		return &ConfigError{"Filter", "Host must be an IPv4 address"}
	}
	return c.validate()
}

var _ frame.Source = (*Source)(nil)
