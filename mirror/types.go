package mirror

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ChecksumMode selects how the Assembler treats IPv4 header and TCP checksums.
type ChecksumMode int

const (
	// ChecksumAuto verifies checksums and drops failing segments, but accepts
	// a flow direction that looks checksum-offloaded (see the package doc).
	ChecksumAuto ChecksumMode = iota
	// ChecksumVerify drops every segment with a bad IPv4 header or TCP
	// checksum.
	ChecksumVerify
	// ChecksumIgnore accepts every segment without checking.
	ChecksumIgnore
)

// String returns "auto", "verify" or "ignore".
func (m ChecksumMode) String() string {
	switch m {
	case ChecksumAuto:
		return "auto"
	case ChecksumVerify:
		return "verify"
	case ChecksumIgnore:
		return "ignore"
	}
	return "ChecksumMode(" + strconv.Itoa(int(m)) + ")"
}

// ParseChecksumMode parses "auto", "verify" or "ignore".
func ParseChecksumMode(s string) (ChecksumMode, error) {
	switch s {
	case "auto":
		return ChecksumAuto, nil
	case "verify":
		return ChecksumVerify, nil
	case "ignore":
		return ChecksumIgnore, nil
	}
	return 0, fmt.Errorf("%w: %q (want auto, verify or ignore)", ErrChecksumMode, s)
}

// Set implements flag.Value, so a ChecksumMode can back a -checksum flag.
func (m *ChecksumMode) Set(s string) error {
	v, err := ParseChecksumMode(s)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Defaults used for zero Config fields.
const (
	// DefaultBufferPerFlow is the seed's 32 KB buffer per connection.
	DefaultBufferPerFlow = 32 << 10
	// DefaultMaxFlows is the number of flow directions tracked by default.
	DefaultMaxFlows = 1024
	// DefaultMaxBufferTotal bounds the reassembly buffers of all flow
	// directions together: 2048 buffers of DefaultBufferPerFlow, twice what
	// DefaultMaxFlows directions can hold at once.
	DefaultMaxBufferTotal = 64 << 20
	// DefaultHoleTimeout is how long, in capture time, a hole is waited for.
	// It is far above a LAN round trip (a retransmission normally arrives
	// within a few milliseconds) and short enough that a lost segment delays
	// the data behind it by at most a tenth of a second.
	DefaultHoleTimeout = 100 * time.Millisecond
)

// Hard limits on Config values, so a configuration cannot ask for unbounded
// memory by mistake.
const (
	MaxBufferPerFlow  = 1 << 30
	MaxMaxFlows       = 1 << 22
	MaxMaxBufferTotal = 1 << 40
	// maxRuns bounds the separate out-of-order runs held per flow direction.
	maxRuns = 32
)

// Config configures an Assembler. The zero value is the default
// configuration.
type Config struct {
	// BufferPerFlow is the number of bytes held out of order per flow
	// direction, and the size of its reassembly buffer. When a segment would
	// end more than BufferPerFlow bytes past the first undelivered byte, the
	// oldest holes are skipped (Stats.BufferFullSkips). 0 means
	// DefaultBufferPerFlow; at most MaxBufferPerFlow.
	BufferPerFlow int
	// MaxBufferTotal bounds the bytes of reassembly buffers of all flow
	// directions together, free ones kept for reuse included: at most
	// MaxBufferTotal/BufferPerFlow buffers of BufferPerFlow bytes exist. A
	// direction takes a buffer when it first holds bytes out of order (with
	// History, when it starts) and gives it back when it holds nothing more
	// (without History) or ends. When all buffers are taken, a direction
	// that must hold bytes takes one back from another direction, among the
	// 16 that have held theirs longest: one that holds only History if
	// there is one (its History is then forgotten), else the least
	// recently active, whose holes are skipped and reported as gaps
	// (Stats.BufferTotalSkips) and whose held bytes are delivered. A
	// direction starting with History takes only a free buffer or a
	// History-only one, and otherwise goes without History until it holds
	// bytes. 0 means DefaultMaxBufferTotal, or BufferPerFlow when that is
	// larger; otherwise from BufferPerFlow to MaxMaxBufferTotal.
	MaxBufferTotal int64
	// MaxFlows is the number of flow directions tracked at once, including
	// ended ones (kept so that their late segments do not start a new flow).
	// When the table is full, a new direction reuses an ended one or, if the
	// 16 least recently active are all active, evicts the least recently
	// active (Stats.Evictions). 0 means DefaultMaxFlows; at most MaxMaxFlows.
	MaxFlows int
	// Budget, when not nil, bounds the flow directions and reassembly
	// buffers of this Assembler and the others sharing it together, beside
	// their own MaxFlows and MaxBufferTotal (see Budget). Its
	// MaxBufferTotal must be at least BufferPerFlow.
	Budget *Budget
	// HoleTimeout is the capture time after which a hole is skipped (the
	// hole's age counts from the arrival of the first byte held after it).
	// 0 means DefaultHoleTimeout; a negative value disables the timeout, so
	// holes are then only skipped by the buffer bound, the end of the flow
	// and Close. The timeout runs on the timestamps passed to HandleFrame,
	// HandleIPv4 and Flush: a source without capture times (all 0) never
	// reaches it.
	HoleTimeout time.Duration
	// Checksum selects the checksum policy; the zero value is ChecksumAuto.
	Checksum ChecksumMode
	// History keeps a copy of the last BufferPerFlow delivered bytes of
	// every flow direction that has a reassembly buffer, so that a
	// retransmission of bytes already delivered is compared with them and
	// counted as an overlap anomaly when it differs. It costs one copy of
	// every in-order byte and a buffer per direction from its start, as far
	// as MaxBufferTotal allows. Without it, in-order data is never copied,
	// and only retransmissions of bytes still held out of order (or
	// delivered from the buffer while it holds more) are compared.
	History bool
}

// FlowKey identifies one direction of a TCP connection.
type FlowKey struct {
	SrcIP, DstIP     [4]byte
	SrcPort, DstPort uint16
}

// String returns the key as "1.2.3.4:5->6.7.8.9:10".
func (k FlowKey) String() string {
	b := make([]byte, 0, 48)
	b = appendAddr(b, k.SrcIP, k.SrcPort)
	b = append(b, "->"...)
	b = appendAddr(b, k.DstIP, k.DstPort)
	return string(b)
}

// Reverse returns the key of the opposite direction.
func (k FlowKey) Reverse() FlowKey {
	return FlowKey{SrcIP: k.DstIP, DstIP: k.SrcIP, SrcPort: k.DstPort, DstPort: k.SrcPort}
}

func appendAddr(b []byte, ip [4]byte, port uint16) []byte {
	for i, x := range ip {
		if i > 0 {
			b = append(b, '.')
		}
		b = strconv.AppendUint(b, uint64(x), 10)
	}
	b = append(b, ':')
	return strconv.AppendUint(b, uint64(port), 10)
}

// EndReason tells why a flow direction ended.
type EndReason int

const (
	// EndFIN: the direction sent a FIN.
	EndFIN EndReason = iota + 1
	// EndRST: the direction sent an RST.
	EndRST
	// EndEvicted: the flow table was full and this direction was the least
	// recently active.
	EndEvicted
	// EndClose: the input ended (Assembler.Close).
	EndClose
	// EndRestart: a SYN with a new initial sequence number started a new
	// connection on the same addresses and ports.
	EndRestart
)

// String returns "fin", "rst", "evicted", "close" or "restart".
func (r EndReason) String() string {
	switch r {
	case EndFIN:
		return "fin"
	case EndRST:
		return "rst"
	case EndEvicted:
		return "evicted"
	case EndClose:
		return "close"
	case EndRestart:
		return "restart"
	}
	return "EndReason(" + strconv.Itoa(int(r)) + ")"
}

// Handler receives the reassembled streams. Timestamps are capture times in
// nanoseconds since the Unix epoch, as passed to HandleFrame, HandleLinkFrame
// or HandleIPv4.
// A Handler must not call back into the Assembler.
//
// For every flow direction the calls come in the order FlowStart, then Data
// and Gap calls in increasing, contiguous stream offset order (each call
// starts where the previous one ended), then FlowEnd. A direction may start
// again after it ended (a new SYN).
type Handler interface {
	// FlowStart reports that the direction's stream offset 0 is known.
	FlowStart(k FlowKey, ts int64)
	// Data hands over in-order bytes; offset is the stream offset of data[0].
	// data is reused after the call returns: it may alias the frame passed
	// to HandleFrame or the Assembler's buffers, so copy what you keep.
	Data(k FlowKey, offset uint64, data []byte, ts int64)
	// Gap reports that the length bytes at offset were skipped: they will
	// never be delivered.
	Gap(k FlowKey, offset uint64, length uint64, ts int64)
	// FlowEnd reports that the direction ended; no call for k follows
	// unless a new FlowStart.
	FlowEnd(k FlowKey, reason EndReason, ts int64)
}

// Stats counts what the Assembler saw and did. All fields are totals since
// New except ActiveFlows.
type Stats struct {
	Frames    uint64 // frames and packets handed in
	NonTCP    uint64 // not IPv4 TCP (other EtherTypes, protocols, IPv6, a third VLAN tag): ignored
	Malformed uint64 // dropped: link-layer, IPv4 or TCP header malformed
	Truncated uint64 // dropped: the capture cut the packet short of its IPv4 total length
	Fragments uint64 // dropped: IPv4 fragments (not reassembled)
	// UnsupportedLink counts the frames handed to HandleLinkFrame with a
	// link type it does not decode: dropped.
	UnsupportedLink uint64

	IPv4ChecksumBad   uint64 // dropped: bad IPv4 header checksum
	ChecksumBad       uint64 // dropped: bad TCP checksum
	ChecksumOffloaded uint64 // accepted despite a bad TCP checksum in an offloaded direction
	// OffloadedDirections counts the flow directions treated as
	// checksum-offloaded (see Assembler.OffloadedFlows).
	OffloadedDirections uint64

	Segments         uint64 // TCP segments accepted (checksums passed)
	EmptySegments    uint64 // accepted segments without payload (carry no data)
	Duplicates       uint64 // segments with payload but no new byte (retransmissions, duplicates)
	Overlaps         uint64 // segments with new bytes that also overlap bytes already seen
	OverlapAnomalies uint64 // segments whose overlapping bytes differ from the first copy
	BeforeStart      uint64 // segments (or their heads) lying before the stream start
	LateSegments     uint64 // segments with payload for a direction that has ended

	DeliveredBytes uint64 // bytes handed to Handler.Data
	Gaps           uint64 // holes skipped (Handler.Gap calls)
	GapBytes       uint64 // bytes in those holes

	// Why holes were skipped; their sum is Gaps.
	BufferFullSkips uint64 // a segment ended beyond BufferPerFlow
	RunLimitSkips   uint64 // a flow direction held the maximum of 32 separate runs
	TimeoutSkips    uint64 // older than HoleTimeout
	// BufferTotalSkips counts the holes skipped to give their direction's
	// buffer to another one, all buffers being taken (MaxBufferTotal).
	BufferTotalSkips uint64
	EndSkips         uint64 // the direction ended (FIN, RST, eviction, restart, Close)

	Flows       uint64 // flow directions started (FlowStart calls)
	ActiveFlows uint64 // flow directions started and not yet ended
	Evictions   uint64 // active flow directions evicted to make room (they end with EndEvicted)
	// FlowsRefused counts segments that would have started a flow
	// direction while the Budget's flows were all held by other
	// Assemblers and this one held none to evict: the segment is counted
	// in Segments and otherwise ignored.
	FlowsRefused uint64
}

// Errors returned by HandleFrame, HandleLinkFrame and HandleIPv4 for a frame
// that is dropped. They are per-frame and never fatal; each is also counted
// in Stats.
var (
	ErrShortFrame   = errors.New("mirror: frame too short")
	ErrLinkType     = errors.New("mirror: unsupported link type")
	ErrIPv4Header   = errors.New("mirror: malformed IPv4 header")
	ErrTruncated    = errors.New("mirror: packet truncated by the capture")
	ErrIPv4Checksum = errors.New("mirror: bad IPv4 header checksum")
	ErrTCPHeader    = errors.New("mirror: malformed TCP header")
	ErrTCPChecksum  = errors.New("mirror: bad TCP checksum")
	ErrChecksumMode = errors.New("mirror: unknown checksum mode")
	ErrConfig       = errors.New("mirror: invalid config")
)
