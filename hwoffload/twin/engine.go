package twin

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/tickwire/tickwire/fast"
	"github.com/tickwire/tickwire/fast/sse"
	"github.com/tickwire/tickwire/fast/sse/step"
	"github.com/tickwire/tickwire/feed"
	"github.com/tickwire/tickwire/hwoffload"
	"github.com/tickwire/tickwire/internal/shm"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/mirror"
)

// shadowWords covers the register window, in 32-bit words.
const shadowWords = hwoffload.WindowBytes / 4

// ring is the engine's side of a result ring.
type ring struct {
	base    int    // byte offset of slot 0
	slots   uint32 // 2^LOG2_SLOTS
	prod    uint32 // records written
	cons    uint32 // CONS last accepted
	dropped uint32
	seq     uint64 // next record's seq
}

// engine is the twin's state. Only the engine goroutine touches it (newEngine
// runs before that goroutine starts).
type engine struct {
	r   *shm.Region
	mem []byte
	cfg Config

	mono0   time.Time // CYCLES is 0 here
	shadow  [shadowWords]uint32
	roRegs  []hwoffload.Register // with absolute offsets
	cfgRegs []int                // host-writable configuration registers
	control uint32               // CONTROL last accepted, RESET clear
	running bool
	errCode hwoffload.ErrorCode
	status  uint32

	input       frame.Source
	batch       []frame.Frame
	n, next     int // batch[next:n] not yet consumed
	eof         bool
	inputDone   bool
	inputFailed bool
	paced       bool  // paceMono and paceCap are set
	paceMono    int64 // monotonic ns at which the frame of capture time paceCap was due
	paceCap     int64

	host    *hostPath
	dec     *feed.Decoder
	rings   [hwoffload.NumRings]ring
	rxCyc   uint64 // CYCLES when the frame being handled was received
	flows   map[mirror.FlowKey]uint32
	flowSeq uint32

	// Counters kept by the engine itself; the others come from dec.Stats.
	rxFrames, rxDropped, trades, orders, decodeErrors uint64
	latCount, latMin, latMax, latSum                  uint64
}

func newEngine(r *shm.Region, cfg Config) (*engine, error) {
	e := &engine{r: r, mem: r.Bytes(), cfg: cfg, mono0: time.Now(), input: cfg.Input, flows: map[mirror.FlowKey]uint32{}}
	dec, err := feed.New(cfg.Feed, e)
	if err != nil {
		return nil, err
	}
	e.dec = dec
	if e.input != nil {
		e.batch = frame.NewBatch(cfg.Batch, SlotSize)
	}
	for _, reg := range hwoffload.Registers {
		if reg.Access == hwoffload.RO && reg.Offset != hwoffload.RegMagic {
			e.roRegs = append(e.roRegs, reg)
		}
	}
	ringBytes := int(1<<cfg.RingLog2) * hwoffload.SlotBytes
	for k := range e.rings {
		e.rings[k] = ring{base: hwoffload.WindowBytes + k*ringBytes, slots: 1 << cfg.RingLog2}
		for _, reg := range hwoffload.RingRegisters {
			// Ring 3's PROD and DROPPED are stored by the host path's
			// goroutines, not remembered in the shadow.
			hostOwned := k == hwoffload.RingHost && (reg.Offset == hwoffload.RingProd || reg.Offset == hwoffload.RingDropped)
			if reg.Access == hwoffload.RO && !hostOwned {
				reg.Offset = hwoffload.RingReg(k, reg.Offset)
				e.roRegs = append(e.roRegs, reg)
			}
		}
		e.set64(hwoffload.RingReg(k, hwoffload.RingBase), uint64(e.rings[k].base))
		e.set32(hwoffload.RingReg(k, hwoffload.RingLog2Slots), uint32(cfg.RingLog2))
		e.set32(hwoffload.RingReg(k, hwoffload.RingSlotBytes), hwoffload.SlotBytes)
	}
	e.host = newHostPath(e, cfg.Link, hwoffload.WindowBytes+hwoffload.NumRings*ringBytes)
	for _, reg := range hwoffload.HostRegisters {
		switch reg.Offset {
		case hwoffload.RegUDPRxProd:
			// written by the stack's goroutines: hostPath.checkShared
		default:
			if reg.Access == hwoffload.RO {
				e.roRegs = append(e.roRegs, reg)
			}
		}
	}
	e.cfgRegs = []int{hwoffload.RegIPAddr, hwoffload.RegNetmask, hwoffload.RegGateway, hwoffload.RegMACHi,
		hwoffload.RegMACLo, hwoffload.RegMirrorCtrl, hwoffload.RegMirrorServerIP, hwoffload.RegMirrorServerPort,
		hwoffload.RegFastCtrl}
	e.set32(hwoffload.RegVersion, hwoffload.Version)
	e.set32(hwoffload.RegCycleHz, hwoffload.CycleHz)
	e.set64(hwoffload.RegCyclesEpochNs, uint64(e.mono0.UnixNano()))
	if cfg.Addr.IsValid() {
		a := cfg.Addr.Addr().As4()
		e.set32(hwoffload.RegIPAddr, binary.BigEndian.Uint32(a[:]))
		e.set32(hwoffload.RegNetmask, ^uint32(0)<<(32-cfg.Addr.Bits()))
		if cfg.Addr.Bits() == 0 {
			e.set32(hwoffload.RegNetmask, 0)
		}
	}
	e.set32(hwoffload.RegMirrorCtrl, hwoffload.MirrorEnable)
	e.set32(hwoffload.RegFastCtrl, hwoffload.FastEnable)
	e.set64(hwoffload.RegCycles, e.cycles())
	e.updateStatus()
	e.r.Store32(hwoffload.RegMagic, hwoffload.Magic) // last: the region is ready
	return e, nil
}

// set32 and set64 store a register and remember the value.
func (e *engine) set32(off int, v uint32) {
	e.shadow[off/4] = v
	e.r.Store32(off, v)
}

func (e *engine) set64(off int, v uint64) {
	e.shadow[off/4] = uint32(v)
	e.shadow[off/4+1] = uint32(v >> 32)
	e.r.Store64(off, v)
}

func (e *engine) shadow64(off int) uint64 {
	return uint64(e.shadow[off/4]) | uint64(e.shadow[off/4+1])<<32
}

func (e *engine) monoNow() int64 { return int64(time.Since(e.mono0)) }

// cycles returns CYCLES now: monotonic ns since mono0 at CYCLE_HZ.
func (e *engine) cycles() uint64 {
	ns := uint64(time.Since(e.mono0))
	return ns/1e9*hwoffload.CycleHz + ns%1e9*hwoffload.CycleHz/1e9
}

func (e *engine) fault(c hwoffload.ErrorCode) {
	e.errCode = c
	e.set32(hwoffload.RegError, uint32(c))
	e.updateStatus()
}

func (e *engine) updateStatus() {
	var s uint32
	if e.running {
		s |= hwoffload.StatusRunning
	}
	if e.input != nil && !e.inputFailed || e.cfg.Link != nil {
		s |= hwoffload.StatusLinkUp
	}
	if e.inputDone {
		s |= hwoffload.StatusInputDone
	}
	if e.errCode != hwoffload.CodeNone {
		s |= hwoffload.StatusError
	}
	if s != e.status || s != e.shadow[hwoffload.RegStatus/4] {
		e.status = s
		e.set32(hwoffload.RegStatus, s)
	}
}

// poll looks at the registers the host may write, and puts back the ones
// it may not.
func (e *engine) poll() {
	e.set64(hwoffload.RegCycles, e.cycles())
	if e.r.Load32(hwoffload.RegMagic) != hwoffload.Magic {
		e.r.Store32(hwoffload.RegMagic, hwoffload.Magic)
		e.fault(hwoffload.CodeReadOnly)
	}
	// The ARP table and the port bitmaps, written by the engine goroutine
	// only (the ARP entries beyond ARP_COUNT are kept as written too).
	for _, span := range [...][2]int{
		{hwoffload.RegARP0, hwoffload.RegARP0 + hwoffload.MaxARPEntries*hwoffload.ARPStride},
		{hwoffload.RegUDPPorts, hwoffload.RegListenPorts + hwoffload.PortBitmapSize},
	} {
		for off := span[0]; off < span[1]; off += 4 {
			if want := e.shadow[off/4]; e.r.Load32(off) != want {
				e.r.Store32(off, want)
				e.fault(hwoffload.CodeReadOnly)
			}
		}
	}
	for _, reg := range e.roRegs {
		if reg.Bits == 64 {
			if want := e.shadow64(reg.Offset); e.r.Load64(reg.Offset) != want {
				e.r.Store64(reg.Offset, want)
				e.fault(hwoffload.CodeReadOnly)
			}
		} else if want := e.shadow[reg.Offset/4]; e.r.Load32(reg.Offset) != want {
			e.r.Store32(reg.Offset, want)
			e.fault(hwoffload.CodeReadOnly)
		}
	}

	// CONTROL first, so that a host that clears RUN and then configures
	// is seen stopped; RUN itself is applied after the configuration, so
	// that a host that configures and then sets RUN is seen configured.
	c := e.r.Load32(hwoffload.RegControl)
	if c != e.control {
		switch {
		case c&^uint32(hwoffload.ControlRun|hwoffload.ControlReset) != 0:
			e.r.CompareAndSwap32(hwoffload.RegControl, c, e.control)
			e.fault(hwoffload.CodeControlBits)
		default:
			if c&hwoffload.ControlReset != 0 {
				e.reset()
				c &^= hwoffload.ControlReset
				// A host write racing this one is looked at next time.
				e.r.CompareAndSwap32(hwoffload.RegControl, c|hwoffload.ControlReset, c)
			}
			e.control = c
		}
	}
	run := e.control&hwoffload.ControlRun != 0
	if !run && e.running {
		e.running = false
		e.updateStatus()
	}
	for _, off := range e.cfgRegs {
		v := e.r.Load32(off)
		old := e.shadow[off/4]
		if v == old {
			continue
		}
		var code hwoffload.ErrorCode
		switch {
		case e.running:
			code = hwoffload.CodeWhileRunning
		case !validConfig(off, v):
			code = hwoffload.CodeBadValue
		}
		if code != hwoffload.CodeNone {
			e.r.CompareAndSwap32(off, v, old)
			e.fault(code)
			continue
		}
		e.shadow[off/4] = v
	}
	if run && !e.running {
		e.running = true
		e.paced = false
		e.host.run() // the network configuration is taken at RUN
		e.updateStatus()
	}
	for k := range hwoffload.RingHost {
		e.syncCons(k)
	}
	e.host.poll()
}

// validConfig reports whether v may be written into configuration
// register off.
func validConfig(off int, v uint32) bool {
	switch off {
	case hwoffload.RegNetmask:
		return ^v&(^v+1) == 0 // ones contiguous from the top: ^v is 2^n-1
	case hwoffload.RegMACHi:
		return v <= 0xFFFF
	case hwoffload.RegMirrorCtrl:
		return v&^uint32(hwoffload.MirrorEnable) == 0
	case hwoffload.RegFastCtrl:
		return v&^uint32(hwoffload.FastEnable) == 0
	case hwoffload.RegMirrorServerPort:
		return v <= 0xFFFF
	}
	return true
}

// syncCons takes ring k's CONS if it is acceptable: from the CONS last
// accepted up to PROD.
func (e *engine) syncCons(k int) {
	rg := &e.rings[k]
	off := hwoffload.RingReg(k, hwoffload.RingCons)
	c := e.r.Load32(off)
	if c == rg.cons {
		return
	}
	if c-rg.cons > rg.prod-rg.cons {
		e.r.CompareAndSwap32(off, c, rg.cons)
		e.fault(hwoffload.CodeConsAhead)
		return
	}
	rg.cons = c
	e.shadow[off/4] = c
}

// reset clears the tables, rings, counters, latency and ERROR; it keeps
// the configuration, BASE and the input's position.
func (e *engine) reset() {
	e.host.reset() // first: its goroutines write ring 3
	dec, err := feed.New(e.cfg.Feed, e)
	if err == nil { // it was accepted by newEngine
		e.dec = dec
	}
	clear(e.flows)
	e.flowSeq = 0
	for k := range e.rings {
		rg := &e.rings[k]
		rg.prod, rg.cons, rg.dropped, rg.seq = 0, 0, 0, 0
		e.set32(hwoffload.RingReg(k, hwoffload.RingProd), 0)
		e.set32(hwoffload.RingReg(k, hwoffload.RingCons), 0)
		e.set32(hwoffload.RingReg(k, hwoffload.RingDropped), 0)
	}
	e.rxFrames, e.rxDropped, e.trades, e.orders, e.decodeErrors = 0, 0, 0, 0, 0
	e.latCount, e.latMin, e.latMax, e.latSum = 0, 0, 0, 0
	e.errCode = hwoffload.CodeNone
	e.set32(hwoffload.RegError, 0)
	e.publishCounters()
	e.updateStatus()
}

// publishCounters stores the counter and latency registers. It runs after
// each step of frames (at most pollEvery apart while frames flow) rather
// than per frame: the decoder's Stats walk its flows.
func (e *engine) publishCounters() {
	st := e.dec.Stats()
	e.set64(hwoffload.RegRxFrames, e.rxFrames)
	e.set64(hwoffload.RegRxDropped, e.rxDropped)
	e.set64(hwoffload.RegMirrorBytes, st.Mirror.DeliveredBytes)
	e.set64(hwoffload.RegMirrorGapBytes, st.Mirror.GapBytes)
	e.set64(hwoffload.RegTrades, e.trades)
	e.set64(hwoffload.RegOrders, e.orders)
	e.set64(hwoffload.RegStepSeqGaps, st.SequenceGaps)
	e.set64(hwoffload.RegDecodeErrors, e.decodeErrors)
	e.set64(hwoffload.RegLatCount, e.latCount)
	e.set64(hwoffload.RegLatMin, e.latMin)
	e.set64(hwoffload.RegLatMax, e.latMax)
	e.set64(hwoffload.RegLatSum, e.latSum)
}

func (e *engine) fastOn() bool { return e.shadow[hwoffload.RegFastCtrl/4]&hwoffload.FastEnable != 0 }
func (e *engine) mirrorOn() bool {
	return e.shadow[hwoffload.RegMirrorCtrl/4]&hwoffload.MirrorEnable != 0
}

// frame hands one input frame to the mirror TOE, received at monotonic
// time now.
func (e *engine) frame(f *frame.Frame, now int64) {
	e.rxFrames++
	e.rxCyc = uint64(now)/1e9*hwoffload.CycleHz + uint64(now)%1e9*hwoffload.CycleHz/1e9
	data := f.Data()
	if !e.mirrorOn() || !e.wanted(f.LinkType, data) {
		e.rxDropped++
	} else if err := e.dec.HandleFrame(f.LinkType, data, f.Time); err != nil {
		e.rxDropped++
	}
}

// wanted applies the MIRROR_SERVER_IP/PORT filter: with either set, only
// Ethernet (optionally 802.1Q) IPv4 TCP frames to or from that server pass.
func (e *engine) wanted(linkType uint16, b []byte) bool {
	ip := e.shadow[hwoffload.RegMirrorServerIP/4]
	port := e.shadow[hwoffload.RegMirrorServerPort/4]
	if ip == 0 && port == 0 {
		return true
	}
	if linkType != 0 && linkType != 1 || len(b) < 14 {
		return false
	}
	et, l3 := binary.BigEndian.Uint16(b[12:]), 14
	if et == 0x8100 && len(b) >= 18 {
		et, l3 = binary.BigEndian.Uint16(b[16:]), 18
	}
	if et != 0x0800 || len(b) < l3+20 || b[l3]>>4 != 4 || b[l3+9] != 6 {
		return false
	}
	l4 := l3 + int(b[l3]&15)*4
	if len(b) < l4+4 {
		return false
	}
	src, dst := binary.BigEndian.Uint32(b[l3+12:]), binary.BigEndian.Uint32(b[l3+16:])
	sp, dp := uint32(binary.BigEndian.Uint16(b[l4:])), uint32(binary.BigEndian.Uint16(b[l4+2:]))
	match := func(a, p uint32) bool { return (ip == 0 || a == ip) && (port == 0 || p == port) }
	return match(src, sp) || match(dst, dp)
}

// endInput ends the input: the decoder's remaining gaps and flow ends
// become records, then INPUT_DONE is set.
func (e *engine) endInput() {
	e.dec.Close()
	e.inputDone = true
	e.publishCounters()
	e.updateStatus()
}

// begin returns ring k's next slot, cleared, with its header written, or
// false when the ring is full (the record is dropped and counted; its seq
// is used up either way).
func (e *engine) begin(k int, kind uint16, flow uint32) (hwoffload.Slot, bool) {
	rg := &e.rings[k]
	seq := rg.seq
	rg.seq++
	if rg.prod-rg.cons >= rg.slots {
		e.syncCons(k)
		if rg.prod-rg.cons >= rg.slots {
			rg.dropped++
			e.set32(hwoffload.RingReg(k, hwoffload.RingDropped), rg.dropped)
			return nil, false
		}
	}
	off := rg.base + int(rg.prod&(rg.slots-1))*hwoffload.SlotBytes
	s := hwoffload.Slot(e.mem[off : off+hwoffload.SlotBytes])
	s.Clear()
	s.PutHeader(kind, flow, seq, e.rxCyc, 0)
	return s, true
}

// commit stamps the record begun on ring k and publishes it.
func (e *engine) commit(k int) {
	rg := &e.rings[k]
	out := e.cycles()
	off := rg.base + int(rg.prod&(rg.slots-1))*hwoffload.SlotBytes
	binary.LittleEndian.PutUint64(e.mem[off+hwoffload.SlotOutCycles:], out)
	e.set64(hwoffload.RegCycles, out)
	rg.prod++
	e.set32(hwoffload.RingReg(k, hwoffload.RingProd), rg.prod)
	lat := out - e.rxCyc
	if out < e.rxCyc {
		lat = 0
	}
	if e.latCount == 0 || lat < e.latMin {
		e.latMin = lat
	}
	e.latMax = max(e.latMax, lat)
	e.latCount++
	e.latSum += lat
}

func (e *engine) flowIndex(k mirror.FlowKey) uint32 {
	if i, ok := e.flows[k]; ok {
		return i
	}
	return ^uint32(0)
}

func ipv4(a [4]byte) uint32 { return binary.BigEndian.Uint32(a[:]) }

// The engine is the feed.Handler: every call becomes a record.
var _ feed.Handler = (*engine)(nil)

// FlowStart implements feed.Handler.FlowStart.
func (e *engine) FlowStart(k mirror.FlowKey, ts int64) {
	i := e.flowSeq
	e.flowSeq++
	e.flows[k] = i
	if s, ok := e.begin(hwoffload.RingEvents, hwoffload.KindFlowStart, i); ok {
		s.PutFlow(ipv4(k.SrcIP), ipv4(k.DstIP), k.SrcPort, k.DstPort, 0)
		e.commit(hwoffload.RingEvents)
	}
}

// Trade implements feed.Handler.Trade.
func (e *engine) Trade(t *sse.Trade, m feed.Meta) {
	if !e.fastOn() {
		return
	}
	e.trades++
	if s, ok := e.begin(hwoffload.RingTrades, hwoffload.KindTrade, e.flowIndex(m.Flow)); ok {
		s.PutTrade(t)
		e.commit(hwoffload.RingTrades)
	}
}

// Order implements feed.Handler.Order.
func (e *engine) Order(o *sse.Order, m feed.Meta) {
	if !e.fastOn() {
		return
	}
	e.orders++
	if s, ok := e.begin(hwoffload.RingOrders, hwoffload.KindOrder, e.flowIndex(m.Flow)); ok {
		s.PutOrder(o)
		e.commit(hwoffload.RingOrders)
	}
}

// TCPGap implements feed.Handler.TCPGap.
func (e *engine) TCPGap(k mirror.FlowKey, offset, length uint64, ts int64) {
	if s, ok := e.begin(hwoffload.RingEvents, hwoffload.KindTCPGap, e.flowIndex(k)); ok {
		s.PutTCPGap(offset, length)
		e.commit(hwoffload.RingEvents)
	}
}

// SequenceGap implements feed.Handler.SequenceGap.
func (e *engine) SequenceGap(category uint32, expected, got uint64, m feed.Meta) {
	if !e.fastOn() {
		return
	}
	if s, ok := e.begin(hwoffload.RingEvents, hwoffload.KindSeqGap, e.flowIndex(m.Flow)); ok {
		s.PutSeqGap(category, expected, got)
		e.commit(hwoffload.RingEvents)
	}
}

// The engine is a feed.ErrorHandler: every decoding error is a record.
var _ feed.ErrorHandler = (*engine)(nil)

// DecodeError implements feed.ErrorHandler.DecodeError.
func (e *engine) DecodeError(offset uint64, err error, m feed.Meta) {
	e.decodeErrors++
	if !e.fastOn() {
		return
	}
	if s, ok := e.begin(hwoffload.RingEvents, hwoffload.KindDecodeError, e.flowIndex(m.Flow)); ok {
		s.PutDecodeError(offset, DecodeErrorCode(err))
		e.commit(hwoffload.RingEvents)
	}
}

// DecodeErrorCode returns the code a decode error record carries for err,
// a decoding error feed reports: the STEP framing errors as GARBAGE,
// FRAMING, TOOLARGE, CHECKSUM and FIELD, a FAST decoding error as its code
// in the FAST specification (fast.Code: D2, D5, D6, D7, D9, R1, R4, LIMIT,
// SHORT), anything else as ERROR. REGISTERS.md lists them.
func DecodeErrorCode(err error) string {
	switch {
	case errors.Is(err, step.ErrGarbage):
		return "GARBAGE"
	case errors.Is(err, step.ErrFraming):
		return "FRAMING"
	case errors.Is(err, step.ErrTooLarge):
		return "TOOLARGE"
	case errors.Is(err, step.ErrChecksum):
		return "CHECKSUM"
	case errors.Is(err, step.ErrField):
		return "FIELD"
	}
	if c := fast.Code(err); c != "" {
		return c
	}
	return "ERROR"
}

// FlowEnd implements feed.Handler.FlowEnd.
func (e *engine) FlowEnd(k mirror.FlowKey, reason mirror.EndReason, ts int64) {
	var r uint8
	switch reason {
	case mirror.EndFIN:
		r = hwoffload.EndFIN
	case mirror.EndRST:
		r = hwoffload.EndRST
	case mirror.EndEvicted:
		r = hwoffload.EndEvicted
	case mirror.EndClose:
		r = hwoffload.EndInput
	case mirror.EndRestart:
		r = hwoffload.EndRestart
	}
	if s, ok := e.begin(hwoffload.RingEvents, hwoffload.KindFlowEnd, e.flowIndex(k)); ok {
		s.PutFlow(ipv4(k.SrcIP), ipv4(k.DstIP), k.SrcPort, k.DstPort, r)
		e.commit(hwoffload.RingEvents)
	}
	delete(e.flows, k)
}
