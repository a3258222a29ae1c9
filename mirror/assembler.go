package mirror

import (
	"encoding/binary"
	"fmt"
	"math"
)

// maxOffloadedListed bounds the keys kept for OffloadedFlows; all offloaded
// directions are counted in Stats.OffloadedDirections.
const maxOffloadedListed = 256

// Assembler reassembles the TCP flow directions found in the frames handed to
// it and reports their bytes to a Handler. It is not safe for concurrent use:
// use one Assembler per goroutine (for example one per capture queue).
type Assembler struct {
	h         Handler
	mode      ChecksumMode
	bufSize   int
	timeout   int64 // ns; negative: never
	history   bool
	t         table
	offloaded []FlowKey
	// Reassembly buffers (buffer.go): nBufs exist, at most maxBufs; free
	// holds at most maxFree of them for reuse; the flows holding one are
	// linked from bufHead (oldest) to bufTail.
	free             []*buffer
	nBufs            int
	maxBufs          int
	budget           *Budget // nil without Config.Budget
	verified         bool    // the frame being handled came with its checksums verified
	maxFree          int
	bufHead, bufTail int32
	stats            Stats
	now              int64 // latest capture time seen
	deadline         int64 // earliest capture time at which a hole or FIN may expire
	pendHead         int32 // list of flows that may expire, -1 when empty
}

// New returns an Assembler that reports to h. Zero fields of cfg take their
// defaults; out-of-range values are an error wrapping ErrConfig. New
// allocates the flow table (a few hundred bytes per flow direction);
// reassembly buffers (BufferPerFlow bytes each, at most MaxBufferTotal in
// all) are allocated when first needed and reused.
func New(cfg Config, h Handler) (*Assembler, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: nil Handler", ErrConfig)
	}
	if cfg.BufferPerFlow == 0 {
		cfg.BufferPerFlow = DefaultBufferPerFlow
	}
	if cfg.MaxFlows == 0 {
		cfg.MaxFlows = DefaultMaxFlows
	}
	if cfg.HoleTimeout == 0 {
		cfg.HoleTimeout = DefaultHoleTimeout
	}
	if cfg.BufferPerFlow < 0 || cfg.BufferPerFlow > MaxBufferPerFlow {
		return nil, fmt.Errorf("%w: BufferPerFlow %d outside 1..%d", ErrConfig, cfg.BufferPerFlow, MaxBufferPerFlow)
	}
	if cfg.MaxFlows < 0 || cfg.MaxFlows > MaxMaxFlows {
		return nil, fmt.Errorf("%w: MaxFlows %d outside 1..%d", ErrConfig, cfg.MaxFlows, MaxMaxFlows)
	}
	if cfg.MaxBufferTotal == 0 {
		cfg.MaxBufferTotal = max(DefaultMaxBufferTotal, int64(cfg.BufferPerFlow))
	}
	if cfg.MaxBufferTotal < int64(cfg.BufferPerFlow) || cfg.MaxBufferTotal > MaxMaxBufferTotal {
		return nil, fmt.Errorf("%w: MaxBufferTotal %d outside BufferPerFlow (%d)..%d", ErrConfig, cfg.MaxBufferTotal, cfg.BufferPerFlow, int64(MaxMaxBufferTotal))
	}
	if cfg.Checksum < ChecksumAuto || cfg.Checksum > ChecksumIgnore {
		return nil, fmt.Errorf("%w: %v", ErrChecksumMode, cfg.Checksum)
	}
	a := &Assembler{
		h:        h,
		mode:     cfg.Checksum,
		bufSize:  cfg.BufferPerFlow,
		timeout:  int64(cfg.HoleTimeout),
		history:  cfg.History,
		deadline: math.MaxInt64,
		pendHead: -1,
		maxBufs:  int(cfg.MaxBufferTotal / int64(cfg.BufferPerFlow)),
		bufHead:  -1,
		bufTail:  -1,
	}
	if b := cfg.Budget; b != nil {
		if b.maxBytes < int64(cfg.BufferPerFlow) {
			return nil, fmt.Errorf("%w: Budget of %d buffer bytes below BufferPerFlow (%d)", ErrConfig, b.maxBytes, cfg.BufferPerFlow)
		}
		a.budget = b
	}
	a.maxFree = min(max(a.maxBufs/4, 1), cfg.MaxFlows)
	if a.budget != nil {
		a.maxFree = min(a.maxFree, budgetFree)
	}
	a.t.init(cfg.MaxFlows)
	return a, nil
}

// Stats returns the counters.
func (a *Assembler) Stats() Stats { return a.stats }

// OffloadedFlows returns the flow directions treated as checksum-offloaded
// (ChecksumAuto), in the order they were detected; at most the first 256 are
// listed, Stats.OffloadedDirections counts them all. The slice is a copy.
func (a *Assembler) OffloadedFlows() []FlowKey {
	return append([]FlowKey(nil), a.offloaded...)
}

// HandleFrame handles one Ethernet frame captured at ts (nanoseconds since the
// Unix epoch). Up to two VLAN tags (802.1Q 0x8100, 802.1ad 0x88a8) are
// skipped. Frames that are not IPv4 TCP are counted and ignored (nil error).
// A dropped frame returns one of the package's Err values; such errors are
// per-frame and never fatal. HandleFrame does NOT take ownership of frame: it
// is read during the call (and may be handed to Handler.Data) only.
//
// The common segment takes a path of its own in a straight line: a 20-byte
// IPv4 header in an untagged frame, not a fragment, no SYN, FIN or RST, of
// an active flow that has seen no FIN, good (or unchecked) checksums, and
// no hole or FIN due to expire at ts. It does what the general path
// (handleFrame) does with such a segment: an empty one is only counted, the
// next bytes (when they end before any bytes held) are delivered, and any
// other payload goes to data, as from the general path. Any other frame
// goes to the general path, which decides again from scratch: nothing has
// changed by then but the table's caches of recent flows.
func (a *Assembler) HandleFrame(frame []byte, ts int64) error {
	if len(frame) < ethHeaderLen+ipv4MinHeaderLen+tcpMinHeaderLen || ts >= a.deadline ||
		binary.BigEndian.Uint16(frame[12:]) != etherTypeIPv4 {
		return a.handleFrame(frame, ts)
	}
	if a.mode != ChecksumIgnore && !a.verified {
		// The checksum reads every byte: ask for them now, so that they
		// arrive while the headers are checked (from L3 or memory, the
		// wait would otherwise come after the checks).
		prefetch(frame)
	}
	h := (*[ethHeaderLen + ipv4MinHeaderLen + tcpMinHeaderLen]byte)(frame)
	const ip, tcp = ethHeaderLen, ethHeaderLen + ipv4MinHeaderLen
	end := ip + int(binary.BigEndian.Uint16(h[ip+2:]))
	payloadStart := tcp + int(h[tcp+12]>>4)*4
	if h[ip] != 0x45 || h[ip+9] != ipProtoTCP || end > len(frame) ||
		binary.BigEndian.Uint16(h[ip+6:])&(ipv4FlagMF|ipv4FragOffMask) != 0 ||
		h[tcp+13]&(tcpFlagSYN|tcpFlagFIN|tcpFlagRST) != 0 ||
		payloadStart < tcp+tcpMinHeaderLen || payloadStart > end {
		return a.handleFrame(frame, ts)
	}
	w := wireKeyOf(h[ip:], h[tcp:])
	fi := a.t.last
	if fi < 0 || !a.t.flows[fi].hasKey(w) {
		if fi = a.t.recentFlow(w); fi < 0 {
			if fi, _ = a.t.lookup(w); fi < 0 {
				return a.handleFrame(frame, ts)
			}
		}
	}
	f := &a.t.flows[fi]
	if f.state != flowActive || f.finSeen {
		return a.handleFrame(frame, ts)
	}
	if a.mode != ChecksumIgnore && !a.verified {
		if !ipv4HeaderSumOK(h[ip:tcp]) {
			return a.handleFrame(frame, ts)
		}
		// onesSumLE written out: it does not inline (two calls), and
		// this is one call less per segment.
		seg, pseudo := frame[ip+12:end], tcpPseudoConst(end-tcp)
		s, ok := vectorOnesSum(seg, pseudo)
		if !ok {
			s = scalarOnesSum(seg, pseudo)
		}
		if s != 0xffff {
			return a.handleFrame(frame, ts)
		}
	}
	if a.mode != ChecksumIgnore && !f.hadGood {
		f.hadGood, f.badRun = true, 0
	}
	a.stats.Frames++
	a.stats.Segments++
	a.now = max(a.now, ts)
	f.lastSeen = ts
	a.t.touch(fi)
	payload := frame[payloadStart:end]
	n := uint64(len(payload))
	if n == 0 {
		a.stats.EmptySegments++
		return nil
	}
	if seq := binary.BigEndian.Uint32(h[tcp+4:]); seq != f.startSeq+uint32(f.next) ||
		f.nRuns != 0 && f.next+n > f.buf.runs[0].start || a.history {
		a.data(f, seq, payload, ts)
		return nil
	}
	// data and deliver for the next bytes without History, written out:
	// two Go frames less per segment.
	f.histStart = f.next + n
	a.h.Data(f.key, f.next, payload, ts)
	f.next += n
	a.stats.DeliveredBytes += n
	if f.nRuns != 0 {
		a.drain(f, ts)
		a.settle(f)
	}
	return nil
}

// handleFrame is HandleFrame's general path.
func (a *Assembler) handleFrame(frame []byte, ts int64) error {
	a.stats.Frames++
	if len(frame) < ethHeaderLen {
		a.stats.Malformed++
		return ErrShortFrame
	}
	etherType := binary.BigEndian.Uint16(frame[12:])
	p := frame[ethHeaderLen:]
	if etherType == etherTypeIPv4 { // the common untagged frame
		return a.ipv4(p, ts)
	}
	return a.tagged(etherType, p, ts)
}

// tagged handles the payload p of a link-layer header whose EtherType is not
// IPv4: up to two VLAN tags are skipped to reach an IPv4 packet.
func (a *Assembler) tagged(etherType uint16, p []byte, ts int64) error {
	for tags := 0; etherType == etherType8021Q || etherType == etherType8021AD; tags++ {
		if tags == maxVLANTags {
			a.stats.NonTCP++
			return nil
		}
		if len(p) < vlanTagLen {
			a.stats.Malformed++
			return ErrShortFrame
		}
		etherType = binary.BigEndian.Uint16(p[2:])
		p = p[vlanTagLen:]
	}
	if etherType != etherTypeIPv4 {
		a.stats.NonTCP++
		return nil
	}
	return a.ipv4(p, ts)
}

// HandleLinkFrame handles one frame whose link-layer header is of pcap link
// type linkType (frame.Frame.LinkType of link/frame, whose constants name
// them), captured at ts, like HandleFrame:
//
//   - 1 (Ethernet) and 0, which frame.Frame reads as Ethernet: HandleFrame.
//   - 113 (LINUX_SLL): a 16-byte Linux cooked header whose last two bytes
//     are the EtherType; VLAN tags after it are skipped as in Ethernet.
//   - 276 (LINUX_SLL2): a 20-byte Linux cooked header whose first two bytes
//     are the EtherType.
//   - 101 (RAW): an IP packet; IPv6 is counted as NonTCP, another version
//     is malformed.
//   - 228 (IPV4): HandleIPv4.
//
// A frame of any other link type is counted in Stats.UnsupportedLink and
// returns ErrLinkType. A Linux cooked capture of loopback traffic (tcpdump
// -i any) holds every packet twice, sent and received: the second copy is
// a duplicate, counted as such. Only Ethernet frames take HandleFrame's
// straight path; the others take the general path, with the same results
// and the same in-order delivery without copies. HandleLinkFrame does NOT
// take ownership of frame.
func (a *Assembler) HandleLinkFrame(linkType uint16, frame []byte, ts int64) error {
	switch linkType {
	case linkTypeEthernet, linkTypeNull:
		return a.HandleFrame(frame, ts)
	case linkTypeIPv4:
		return a.HandleIPv4(frame, ts)
	}
	a.stats.Frames++
	switch linkType {
	case linkTypeLinuxSLL:
		if len(frame) < sllHeaderLen {
			a.stats.Malformed++
			return ErrShortFrame
		}
		return a.etherPayload(binary.BigEndian.Uint16(frame[sllProtocolOffset:]), frame[sllHeaderLen:], ts)
	case linkTypeLinuxSLL2:
		if len(frame) < sll2HeaderLen {
			a.stats.Malformed++
			return ErrShortFrame
		}
		return a.etherPayload(binary.BigEndian.Uint16(frame), frame[sll2HeaderLen:], ts)
	case linkTypeRaw:
		if len(frame) > 0 && frame[0]>>4 == 6 {
			a.stats.NonTCP++
			return nil
		}
		return a.ipv4(frame, ts)
	}
	a.stats.UnsupportedLink++
	return ErrLinkType
}

// HandleVerifiedLinkFrame is HandleLinkFrame for a frame whose source
// verified its IPv4 header and TCP checksums (frame.Frame.ChecksumVerified:
// a NIC's receive checksum offload). They are not computed again, which
// spares a pass over every byte; the segment counts as having good
// checksums in every Checksum mode but ChecksumIgnore, where nothing is
// checked anyway. Give it only frames a source vouched for: a wrong frame
// passed here is taken as right.
func (a *Assembler) HandleVerifiedLinkFrame(linkType uint16, frame []byte, ts int64) error {
	a.verified = true
	err := a.HandleLinkFrame(linkType, frame, ts)
	a.verified = false
	return err
}

// etherPayload handles the payload p of a link-layer header with the given
// EtherType.
func (a *Assembler) etherPayload(etherType uint16, p []byte, ts int64) error {
	if etherType == etherTypeIPv4 {
		return a.ipv4(p, ts)
	}
	return a.tagged(etherType, p, ts)
}

// HandleIPv4 handles one IPv4 packet (no link-layer header) captured at ts,
// like HandleFrame.
func (a *Assembler) HandleIPv4(pkt []byte, ts int64) error {
	a.stats.Frames++
	return a.ipv4(pkt, ts)
}

func (a *Assembler) ipv4(p []byte, ts int64) error {
	a.advance(ts)
	if len(p) < ipv4MinHeaderLen || p[0]>>4 != 4 {
		a.stats.Malformed++
		return ErrIPv4Header
	}
	ihl := int(p[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(p[2:]))
	if ihl < ipv4MinHeaderLen || total < ihl || len(p) < ihl {
		a.stats.Malformed++
		return ErrIPv4Header
	}
	if p[9] != ipProtoTCP {
		a.stats.NonTCP++
		return nil
	}
	if total > len(p) {
		a.stats.Truncated++
		return ErrTruncated
	}
	// The IPv4 total length, not the frame, bounds the packet: Ethernet pads
	// short frames.
	p = p[:total]
	if a.mode != ChecksumIgnore && !a.verified && !ipv4HeaderSumOK(p[:ihl]) {
		a.stats.IPv4ChecksumBad++
		return ErrIPv4Checksum
	}
	if binary.BigEndian.Uint16(p[6:])&(ipv4FlagMF|ipv4FragOffMask) != 0 {
		a.stats.Fragments++
		return nil
	}
	seg := p[ihl:]
	if len(seg) < tcpMinHeaderLen {
		a.stats.Malformed++
		return ErrTCPHeader
	}
	dataOff := int(seg[12]>>4) * 4
	if dataOff < tcpMinHeaderLen || dataOff > len(seg) {
		a.stats.Malformed++
		return ErrTCPHeader
	}
	cs := checksumUnchecked
	switch {
	case a.mode == ChecksumIgnore:
	case a.verified:
		cs = checksumGood
	default:
		cs = tcpChecksum(p, ihl)
	}
	w := wireKeyOf(p, seg)
	seq, flags, payload := binary.BigEndian.Uint32(seg[4:]), seg[13], seg[dataOff:]
	// Most segments belong to the flow of the segment before them or to
	// one seen a moment ago: try the caches before hashing the key.
	fi := a.t.last
	if fi < 0 || !a.t.flows[fi].hasKey(w) {
		fi = a.t.recentFlow(w)
	}
	if fi >= 0 {
		if f := &a.t.flows[fi]; f.takesInOrder(seq, flags, len(payload), cs) {
			a.inOrder(fi, f, payload, cs, ts)
			return nil
		}
	}
	return a.segment(w, fi, seq, flags, payload, cs, ts)
}

// takesInOrder reports whether a segment of flow f takes the in-order path
// (inOrder): the next in-order data segment of a flow with nothing held, no
// FIN pending and a good (or unchecked) checksum.
func (f *flow) takesInOrder(seq uint32, flags uint8, payloadLen int, cs checksumState) bool {
	return f.state == flowActive && f.nRuns == 0 && !f.finSeen && payloadLen > 0 &&
		flags&(tcpFlagSYN|tcpFlagFIN|tcpFlagRST) == 0 && seq == f.startSeq+uint32(f.next) &&
		(cs == checksumGood || cs == checksumUnchecked)
}

// inOrder delivers a segment that takesInOrder accepted for flow fi.
func (a *Assembler) inOrder(fi int32, f *flow, payload []byte, cs checksumState, ts int64) {
	if cs == checksumGood {
		f.hadGood, f.badRun = true, 0
	}
	a.stats.Segments++
	f.lastSeen = ts
	a.t.touch(fi)
	a.deliver(f, payload, ts)
}

// segment handles one TCP segment whose headers are valid, of flow fi (w's
// flow, already known not to take the in-order path) or, when fi is
// negative, of the flow the table finds for w.
func (a *Assembler) segment(w wireKey, fi int32, seq uint32, flags uint8, payload []byte, cs checksumState, ts int64) error {
	var h uint64
	if fi < 0 {
		fi, h = a.t.lookup(w)
		if fi >= 0 {
			if f := &a.t.flows[fi]; f.takesInOrder(seq, flags, len(payload), cs) {
				a.inOrder(fi, f, payload, cs, ts)
				return nil
			}
		}
	}
	if fi < 0 {
		if len(payload) == 0 && flags&tcpFlagSYN == 0 {
			// Cannot start a flow: only count it.
			if !a.acceptChecksum(nil, cs, false) {
				a.stats.ChecksumBad++
				return ErrTCPChecksum
			}
			a.stats.Segments++
			a.stats.EmptySegments++
			return nil
		}
		if fi = a.newFlow(w, h); fi < 0 {
			a.stats.Segments++
			a.stats.FlowsRefused++
			return nil
		}
	}
	f := &a.t.flows[fi]
	if !a.acceptChecksum(f, cs, len(payload) > 0) {
		a.stats.ChecksumBad++
		return ErrTCPChecksum
	}
	a.stats.Segments++
	f.lastSeen = ts
	a.t.touch(fi)

	if flags&tcpFlagRST != 0 {
		// Linux ignores data on an RST; the direction ends at once.
		if f.state == flowActive {
			a.end(f, EndRST, ts)
		}
		if len(payload) == 0 {
			a.stats.EmptySegments++
		}
		return nil
	}
	if flags&tcpFlagSYN != 0 {
		a.syn(f, seq, ts)
		seq++ // a SYN takes one sequence number before its data
	}
	if len(payload) == 0 {
		a.stats.EmptySegments++
	} else {
		switch f.state {
		case flowIdle:
			a.start(f, seq, false, ts)
		case flowEnded:
			a.stats.LateSegments++
			return nil
		}
		a.data(f, seq, payload, ts)
	}
	if f.state != flowActive {
		return nil
	}
	if flags&tcpFlagFIN != 0 && !f.finSeen {
		if off := a.offsetOf(f, seq+uint32(len(payload))); off >= 0 {
			f.finSeen, f.finOff, f.finTs = true, uint64(off), ts
			a.noteDeadline(ts)
			a.markPending(f)
		}
	}
	if f.finSeen && f.nRuns == 0 && f.next >= f.finOff {
		a.end(f, EndFIN, ts)
	}
	return nil
}

// acceptChecksum applies the checksum policy to a segment of flow f (nil when
// the segment creates no flow).
func (a *Assembler) acceptChecksum(f *flow, cs checksumState, hasPayload bool) bool {
	switch cs {
	case checksumUnchecked:
		return true
	case checksumGood:
		if f != nil {
			f.hadGood = true
			f.badRun = 0
		}
		return true
	}
	if a.mode == ChecksumVerify {
		return false
	}
	if f == nil {
		return cs == checksumOffloadLike
	}
	if f.offloaded {
		a.stats.ChecksumOffloaded++
		return true
	}
	if f.hadGood {
		return false
	}
	if cs == checksumOffloadLike || (hasPayload && f.badRun >= 2) {
		f.offloaded = true
		a.stats.OffloadedDirections++
		if len(a.offloaded) < maxOffloadedListed {
			a.offloaded = append(a.offloaded, f.key)
		}
		a.stats.ChecksumOffloaded++
		return true
	}
	if hasPayload {
		f.badRun++
	}
	return false
}

// evictScan bounds the walk from the least recently active flow towards
// the head looking for a flow that is not active, which can be reused
// without losing anything.
const evictScan = 16

// newFlow adds an idle flow for w. When the table is full it reuses an ended
// or idle flow near the least recently active end, or else evicts the least
// recently active flow.
func (a *Assembler) newFlow(w wireKey, h uint64) int32 {
	if len(a.t.free) == 0 || !a.budget.takeFlow() {
		if a.t.inUse == 0 {
			return -1 // the Budget's flows are all other Assemblers'
		}
		victim := a.t.tail
		for i, fi := 0, a.t.tail; i < evictScan && fi >= 0; i, fi = i+1, a.t.flows[fi].lruPrev {
			if a.t.flows[fi].state != flowActive {
				victim = fi
				break
			}
		}
		v := &a.t.flows[victim]
		if v.state == flowActive {
			a.stats.Evictions++
			a.end(v, EndEvicted, v.lastSeen)
		}
		a.releaseBuffer(v)
		a.t.remove(victim)
	}
	if h == 0 {
		h = hashKey(w)
	}
	return a.t.insert(w, h)
}

// syn handles a SYN (or SYN-ACK) whose initial sequence number is isn.
func (a *Assembler) syn(f *flow, isn uint32, ts int64) {
	start := isn + 1
	switch f.state {
	case flowIdle:
		a.start(f, start, true, ts)
		return
	case flowActive:
		if f.synSeen && start == f.startSeq {
			return // retransmitted SYN
		}
		if !f.synSeen {
			// The handshake was reordered behind the first data: the SYN
			// belongs to this connection if it lies just before the start.
			if d := int64(int32(f.startSeq - start)); d >= 0 && d <= int64(a.bufSize) {
				return
			}
		}
		a.end(f, EndRestart, ts)
	case flowEnded:
		if f.synSeen && start == f.startSeq {
			return
		}
	}
	a.start(f, start, true, ts)
}

// start sets the stream start of f at sequence number startSeq.
func (a *Assembler) start(f *flow, startSeq uint32, fromSYN bool, ts int64) {
	f.state = flowActive
	f.synSeen = fromSYN
	f.finSeen = false
	f.startSeq = startSeq
	f.next, f.histStart = 0, 0
	f.nRuns = 0
	if a.history {
		a.takeBuffer(f, false, ts)
	}
	a.stats.Flows++
	a.stats.ActiveFlows++
	a.h.FlowStart(f.key, ts)
}

// end ends an active flow: remaining holes are skipped and reported, the
// held data delivered.
func (a *Assembler) end(f *flow, reason EndReason, ts int64) {
	for f.nRuns > 0 {
		a.skipHole(f, &a.stats.EndSkips, ts)
	}
	a.unpend(f)
	f.state = flowEnded
	a.releaseBuffer(f)
	a.stats.ActiveFlows--
	a.h.FlowEnd(f.key, reason, ts)
}

// offsetOf returns the stream offset of sequence number seq in f, negative
// before the start. While the stream is young, "before the start" is decided
// by the signed 32-bit difference from the start; later, seq is taken within
// 2^31 of the next undelivered byte.
func (a *Assembler) offsetOf(f *flow, seq uint32) int64 {
	if f.next < 1<<30 {
		if r := int64(int32(seq - f.startSeq)); r < 0 {
			return r
		}
	}
	return int64(f.next) + int64(int32(seq-(f.startSeq+uint32(f.next))))
}

// data handles the payload p of a segment with sequence number seq in the
// active flow f.
func (a *Assembler) data(f *flow, seq uint32, p []byte, ts int64) {
	if seq == f.startSeq+uint32(f.next) && f.nRuns == 0 {
		a.deliver(f, p, ts)
		return
	}
	off := a.offsetOf(f, seq)
	if off < 0 {
		a.stats.BeforeStart++
		if off+int64(len(p)) <= 0 {
			return
		}
		p = p[-off:]
		off = 0
	}
	a.place(f, uint64(off), p, ts)
}

// place stores or delivers the bytes p at stream offset o, first copy wins.
func (a *Assembler) place(f *flow, o uint64, p []byte, ts int64) {
	e := o + uint64(len(p))
	fresh, overlap, anomaly := false, false, false
	for len(p) > 0 {
		if o < f.next {
			n := min(f.next, e) - o
			overlap = true
			if a.differsFromHistory(f, o, p[:n]) {
				anomaly = true
			}
			p, o = p[n:], o+n
			continue
		}
		if o == f.next {
			lim := e
			if f.nRuns > 0 && f.buf.runs[0].start < lim {
				lim = f.buf.runs[0].start
			}
			a.deliver(f, p[:lim-o], ts)
			fresh = true
			p, o = p[lim-o:], lim
			a.drain(f, ts)
			continue
		}
		if e-f.next > uint64(a.bufSize) {
			// Holding p would exceed the buffer: give up on the oldest hole.
			if f.nRuns == 0 || o < f.buf.runs[0].start {
				a.gap(f, o-f.next, &a.stats.BufferFullSkips, ts)
			} else {
				a.skipHole(f, &a.stats.BufferFullSkips, ts)
			}
			continue
		}
		stored, ov, an, ok := a.insert(f, o, p, ts)
		if !ok && f.buf == nil {
			// No buffer to be had (Budget): skip the hole before p.
			a.gap(f, o-f.next, &a.stats.BufferTotalSkips, ts)
			continue
		}
		if !ok {
			a.skipHole(f, &a.stats.RunLimitSkips, ts)
			continue
		}
		fresh = fresh || stored
		overlap = overlap || ov
		anomaly = anomaly || an
		break
	}
	a.settle(f)
	switch {
	case !fresh:
		a.stats.Duplicates++
	case overlap:
		a.stats.Overlaps++
	}
	if anomaly {
		a.stats.OverlapAnomalies++
	}
}

// deliver hands p, the bytes at f.next, to the Handler without copying them.
func (a *Assembler) deliver(f *flow, p []byte, ts int64) {
	n := uint64(len(p))
	if a.history && f.buf != nil {
		a.keepHistory(f, p)
	} else {
		f.histStart = f.next + n
	}
	a.h.Data(f.key, f.next, p, ts)
	f.next += n
	a.stats.DeliveredBytes += n
}

// keepHistory keeps the bytes p about to be delivered at f.next, to compare
// retransmissions with. They cannot overwrite held bytes: those lie below
// f.next+len(ring).
func (a *Assembler) keepHistory(f *flow, p []byte) {
	n := uint64(len(p))
	size := uint64(len(f.buf.ring))
	a.copyToRing(f, f.next+n-min(n, size), p[n-min(n, size):])
}

// drain delivers the first held run if it starts at f.next.
func (a *Assembler) drain(f *flow, ts int64) {
	if f.nRuns == 0 || f.buf.runs[0].start != f.next {
		return
	}
	b := f.buf
	r := b.runs[0]
	size := uint64(len(b.ring))
	pos := r.start % size
	n := r.end - r.start
	first := min(n, size-pos)
	a.h.Data(f.key, r.start, b.ring[pos:pos+first], ts)
	if n > first {
		a.h.Data(f.key, r.start+first, b.ring[:n-first], ts)
	}
	f.next = r.end
	a.stats.DeliveredBytes += n
	a.removeFirstRun(f)
}

func (a *Assembler) removeFirstRun(f *flow) {
	runs := &f.buf.runs
	if f.nRuns > 1 { // the usual single run needs no memmove call
		copy(runs[:f.nRuns-1], runs[1:f.nRuns])
	}
	f.nRuns--
	if f.nRuns > 0 {
		since := runs[0].ts
		for _, r := range runs[1:f.nRuns] {
			since = min(since, r.ts)
		}
		f.holeSince = since
	}
}

// settle gives f's buffer back when f holds nothing and keeps no History.
// It runs once a segment (or a timeout) has been dealt with, so that the
// rest of a segment that filled a hole is still compared with the bytes
// delivered from the buffer.
func (a *Assembler) settle(f *flow) {
	if f.nRuns == 0 && f.buf != nil && !a.history {
		a.releaseBuffer(f)
	}
}

// gap skips the n missing bytes at f.next.
func (a *Assembler) gap(f *flow, n uint64, reason *uint64, ts int64) {
	a.stats.Gaps++
	a.stats.GapBytes += n
	*reason++
	a.h.Gap(f.key, f.next, n, ts)
	f.next += n
	f.histStart = f.next
}

// skipHole skips the hole before the first held run and delivers the run.
func (a *Assembler) skipHole(f *flow, reason *uint64, ts int64) {
	a.gap(f, f.buf.runs[0].start-f.next, reason, ts)
	a.drain(f, ts)
}

// insert holds the bytes p at offset o > f.next (ending at most
// BufferPerFlow past f.next), keeping bytes already held. It reports whether
// any byte was new, whether p overlapped held bytes and whether those differ;
// ok is false, with nothing changed, when p would need a run beyond maxRuns.
// A direction without a buffer takes one (takeBuffer), which may skip the
// holes of another.
func (a *Assembler) insert(f *flow, o uint64, p []byte, ts int64) (stored, overlap, anomaly, ok bool) {
	e := o + uint64(len(p))
	i := 0
	for i < f.nRuns && f.buf.runs[i].end < o {
		i++
	}
	j := i
	for j < f.nRuns && f.buf.runs[j].start <= e {
		j++
	}
	if i == j && f.nRuns == maxRuns {
		return false, false, false, false
	}
	if !a.takeBuffer(f, true, ts) {
		return false, false, false, false
	}
	runs := &f.buf.runs
	merged := run{start: o, end: e, ts: ts}
	cur := o
	for _, r := range runs[i:j] {
		if r.start > cur {
			a.copyToRing(f, cur, p[cur-o:r.start-o])
			stored = true
		}
		if s, t := max(r.start, o), min(r.end, e); s < t {
			overlap = true
			if !a.ringEqual(f, s, p[s-o:t-o]) {
				anomaly = true
			}
		}
		cur = max(cur, r.end)
		merged.start = min(merged.start, r.start)
		merged.end = max(merged.end, r.end)
		merged.ts = min(merged.ts, r.ts)
	}
	if cur < e {
		a.copyToRing(f, cur, p[cur-o:])
		stored = true
	}
	if f.nRuns == 0 {
		f.holeSince = ts
		a.noteDeadline(ts)
		a.markPending(f)
	} else {
		f.holeSince = min(f.holeSince, ts)
	}
	if i == j {
		if i < f.nRuns { // a new last run (the usual case) moves none
			copy(runs[i+1:f.nRuns+1], runs[i:f.nRuns])
		}
		runs[i] = merged
		f.nRuns++
	} else {
		runs[i] = merged
		copy(runs[i+1:], runs[j:f.nRuns])
		f.nRuns -= j - i - 1
	}
	return stored, overlap, anomaly, true
}

// differsFromHistory compares p, a retransmission of bytes already delivered
// at offset o, with the part of them still kept in the ring.
func (a *Assembler) differsFromHistory(f *flow, o uint64, p []byte) bool {
	if f.buf == nil {
		return false
	}
	lo := f.histStart
	size := uint64(len(f.buf.ring))
	if f.next > size {
		lo = max(lo, f.next-size)
	}
	if f.nRuns > 0 && f.buf.runs[f.nRuns-1].end > size {
		// Held bytes reuse the slots of the oldest delivered ones.
		lo = max(lo, f.buf.runs[f.nRuns-1].end-size)
	}
	e := o + uint64(len(p))
	if lo >= e {
		return false
	}
	if o < lo {
		p, o = p[lo-o:], lo
	}
	return !a.ringEqual(f, o, p)
}

// ringEqual compares p with the bytes at stream offset o in f's buffer.
func (a *Assembler) ringEqual(f *flow, o uint64, p []byte) bool {
	ring := f.buf.ring
	size := uint64(len(ring))
	pos := o % size
	first := min(uint64(len(p)), size-pos)
	return string(ring[pos:pos+first]) == string(p[:first]) &&
		string(ring[:uint64(len(p))-first]) == string(p[first:])
}

// copyToRing stores p at stream offset o in f's buffer; len(p) is at most
// BufferPerFlow.
func (a *Assembler) copyToRing(f *flow, o uint64, p []byte) {
	ring := f.buf.ring
	pos := o % uint64(len(ring))
	n := copy(ring[pos:], p)
	copy(ring, p[n:])
}

func (a *Assembler) noteDeadline(since int64) {
	if a.timeout < 0 {
		return
	}
	d := int64(math.MaxInt64 - 1) // a timestamp this late never expires
	if since <= math.MaxInt64-1-a.timeout {
		d = since + a.timeout
	}
	a.deadline = min(a.deadline, d)
}

// Flush advances capture time to ts without a packet: holes older than
// HoleTimeout are skipped and FINs waiting that long end their flows.
func (a *Assembler) Flush(ts int64) { a.advance(ts) }

// advance moves capture time to ts, as Flush and every packet do.
func (a *Assembler) advance(ts int64) {
	if ts > a.now {
		a.now = ts
	}
	if ts >= a.deadline {
		a.expire(ts)
	}
}

// markPending puts f on the list of flows that expire looks at.
func (a *Assembler) markPending(f *flow) {
	if a.timeout < 0 || f.pending {
		return
	}
	f.pending = true
	f.pendPrev, f.pendNext = -1, a.pendHead
	if a.pendHead >= 0 {
		a.t.flows[a.pendHead].pendPrev = f.idx
	}
	a.pendHead = f.idx
}

func (a *Assembler) unpend(f *flow) {
	if !f.pending {
		return
	}
	f.pending = false
	if f.pendPrev >= 0 {
		a.t.flows[f.pendPrev].pendNext = f.pendNext
	} else {
		a.pendHead = f.pendNext
	}
	if f.pendNext >= 0 {
		a.t.flows[f.pendNext].pendPrev = f.pendPrev
	}
	f.pendPrev, f.pendNext = -1, -1
}

// expire applies HoleTimeout at capture time now to the flows that had held
// runs or a pending FIN since the last call, not to the whole table.
func (a *Assembler) expire(now int64) {
	a.deadline = math.MaxInt64
	for fi := a.pendHead; fi >= 0; {
		f := &a.t.flows[fi]
		fi = f.pendNext
		if f.state == flowActive {
			for f.nRuns > 0 && now-f.holeSince >= a.timeout {
				a.skipHole(f, &a.stats.TimeoutSkips, now)
			}
			a.settle(f)
			if f.finSeen && f.nRuns == 0 && (f.next >= f.finOff || now-f.finTs >= a.timeout) {
				a.end(f, EndFIN, now) // leaves the list
				continue
			}
		}
		if f.state != flowActive || (f.nRuns == 0 && !f.finSeen) {
			a.unpend(f)
			continue
		}
		if f.nRuns > 0 {
			a.noteDeadline(f.holeSince)
		}
		if f.finSeen {
			a.noteDeadline(f.finTs)
		}
	}
}

// Close ends the input: every remaining hole is skipped and reported, the
// held data delivered, and every flow ends (EndClose, or EndFIN when its FIN
// was seen), at the latest capture time seen. The Assembler is then empty
// and may be reused.
func (a *Assembler) Close() {
	for fi := a.t.head; fi >= 0; {
		f := &a.t.flows[fi]
		nextFi := f.lruNext
		if f.state == flowActive {
			reason := EndClose
			if f.finSeen {
				reason = EndFIN
			}
			a.end(f, reason, a.now)
		}
		a.releaseBuffer(f)
		a.t.remove(fi)
		a.budget.releaseFlows(1)
		fi = nextFi
	}
	if a.budget != nil { // what Close kept for reuse goes back to it
		a.budget.releaseBuffers(len(a.free), a.bufSize)
		a.nBufs -= len(a.free)
		clear(a.free)
		a.free = a.free[:0]
	}
	a.deadline = math.MaxInt64
	a.pendHead = -1
}
