package hwoffload

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tickwire/tickwire/internal/shm"
)

var (
	// ErrNotImplemented is wrapped by OpenPCI's error where the card's DMA
	// memory cannot be set up on this system (VFIO is Linux only).
	ErrNotImplemented = errors.New("hwoffload: backend not implemented yet")
	// ErrSpec is wrapped by Open's error for a spec it cannot parse.
	ErrSpec = errors.New("hwoffload: bad device spec")
	// ErrBadRegion is wrapped by Open's error for a region that is not an
	// engine's: wrong MAGIC or VERSION, or rings outside the region.
	ErrBadRegion = errors.New("hwoffload: not an offload engine region")
	// ErrRunning is returned by Configure while STATUS.RUNNING is set.
	ErrRunning = errors.New("hwoffload: device is running")
)

// EngineError is the engine's ERROR register as an error.
type EngineError struct {
	Code ErrorCode
}

func (e *EngineError) Error() string {
	return "hwoffload: engine error " + e.Code.String()
}

// Device is an offload engine seen through its register window and result
// rings. Its register methods are safe for concurrent use; each Ring has one
// consumer.
type Device struct {
	r     *shm.Region
	rings [NumRings]Ring
	dma   *dmaBuffer // the card's result rings, nil when they are in r

	hostOnce sync.Once
	hostc    *hostClient // set in hostOnce
	// hostRunning is hostc once its dispatcher runs.
	hostRunning atomic.Pointer[hostClient]
	hostErr     error
}

// waitPoll is how often Open, Run, Stop, Reset and WaitStatus look at a
// register they wait on.
const waitPoll = 100 * time.Microsecond

// Open opens the device that spec names:
//
//	twin:PATH   a software twin's region file, e.g. twin:/dev/shm/u50
//	pci:BDF     the card at PCI address BDF, e.g. pci:0000:65:00.0: its
//	            BAR0 mapped from SysfsRoot/bus/pci/devices/BDF/resource0
//	            (see OpenPCI)
//
// If the region exists but its MAGIC is still 0 (the twin is starting),
// Open waits for it until ctx is done.
func Open(ctx context.Context, spec string) (*Device, error) {
	kind, arg, ok := strings.Cut(spec, ":")
	if !ok || arg == "" {
		return nil, fmt.Errorf("%w: %q (want twin:PATH or pci:BDF)", ErrSpec, spec)
	}
	switch kind {
	case "twin":
		r, err := shm.Open(arg)
		if err != nil {
			return nil, fmt.Errorf("hwoffload: %w", err)
		}
		d, err := OpenRegion(ctx, r)
		if err != nil {
			r.Close()
			return nil, err
		}
		return d, nil
	case "pci":
		return OpenPCI(ctx, arg)
	}
	return nil, fmt.Errorf("%w: %q (want twin:PATH or pci:BDF)", ErrSpec, spec)
}

// OpenRegion opens the device whose register window starts region r (for a
// twin in this process: its Region().Map()). On success the Device takes
// ownership of r and closes it in Close.
func OpenRegion(ctx context.Context, r *shm.Region) (*Device, error) {
	return openRegion(ctx, r, nil)
}

// openRegion is OpenRegion; with dma, the rings' BASE registers are IOVAs
// in dma instead of offsets in r.
func openRegion(ctx context.Context, r *shm.Region, dma *dmaBuffer) (*Device, error) {
	if r.Len() < WindowBytes {
		return nil, fmt.Errorf("%w: %d bytes, under the %d of the register window", ErrBadRegion, r.Len(), WindowBytes)
	}
	for r.Load32(RegMagic) == 0 {
		if err := sleepCtx(ctx, waitPoll); err != nil {
			return nil, fmt.Errorf("hwoffload: waiting for MAGIC: %w", err)
		}
	}
	if m := r.Load32(RegMagic); m != Magic {
		return nil, fmt.Errorf("%w: MAGIC %#x", ErrBadRegion, m)
	}
	if v := r.Load32(RegVersion); v != Version {
		return nil, fmt.Errorf("%w: VERSION %d, this driver knows %d", ErrBadRegion, v, Version)
	}
	d := &Device{r: r, dma: dma}
	type span struct{ lo, hi uint64 }
	var spans []span
	for k := range NumRings {
		base := r.Load64(RingReg(k, RingBase))
		log2 := r.Load32(RingReg(k, RingLog2Slots))
		sb := r.Load32(RingReg(k, RingSlotBytes))
		mem, off := r.Bytes(), base
		inRange := base >= WindowBytes && r.InRange(base, uint64(SlotBytes)<<log2)
		if dma != nil {
			mem, off = dma.mem, base-dma.iova
			inRange = base >= dma.iova && off <= uint64(len(mem)) && uint64(SlotBytes)<<log2 <= uint64(len(mem))-off
		}
		if log2 < MinLog2Slots || log2 > MaxLog2Slots || sb != SlotBytes ||
			base%RingAlign != 0 || !inRange {
			return nil, fmt.Errorf("%w: ring %d: BASE %#x, LOG2_SLOTS %d, SLOT_BYTES %d in a region of %d bytes",
				ErrBadRegion, k, base, log2, sb, r.Len())
		}
		s := span{base, base + uint64(SlotBytes)<<log2}
		for _, o := range spans {
			if s.lo < o.hi && o.lo < s.hi {
				return nil, fmt.Errorf("%w: ring %d overlaps another", ErrBadRegion, k)
			}
		}
		spans = append(spans, s)
		d.rings[k] = Ring{d: d, k: k, mem: mem, base: int(off), slots: 1 << log2}
		d.rings[k].sync()
	}
	return d, nil
}

// Close unmaps the device's region. Slots read from its rings are invalid
// afterwards.
func (d *Device) Close() error {
	d.hostOnce.Do(func() {}) // no host path after Close
	d.closeHost()
	err := d.r.Close()
	if d.dma != nil {
		d.dma.close()
	}
	return err
}

// Read32 returns the 32-bit register at window offset off (a multiple of 4
// below WindowBytes; other offsets panic).
func (d *Device) Read32(off int) uint32 { d.checkOff(off, 4); return d.r.Load32(off) }

// Read64 returns the 64-bit register at window offset off (a multiple of 8).
func (d *Device) Read64(off int) uint64 { d.checkOff(off, 8); return d.r.Load64(off) }

// Write32 writes the 32-bit register at window offset off. Writing
// registers the engine owns is refused by it (ERROR READ_ONLY).
func (d *Device) Write32(off int, v uint32) { d.checkOff(off, 4); d.r.Store32(off, v) }

func (d *Device) checkOff(off, n int) {
	if off < 0 || off%n != 0 || off+n > WindowBytes {
		panic(fmt.Sprintf("hwoffload: register offset %#x out of the window or misaligned", off))
	}
}

// Status returns the STATUS register.
func (d *Device) Status() uint32 { return d.r.Load32(RegStatus) }

// Err returns the ERROR register as an *EngineError, nil when it is 0.
func (d *Device) Err() error {
	if c := ErrorCode(d.r.Load32(RegError)); c != CodeNone {
		return &EngineError{Code: c}
	}
	return nil
}

// Config is the configuration written before RUN.
type Config struct {
	// Addr sets IP_ADDR and NETMASK (IPv4); the zero value writes 0.
	Addr netip.Prefix
	// Gateway sets GATEWAY (IPv4); the zero value writes 0.
	Gateway netip.Addr
	// MAC sets MAC_HI and MAC_LO; nil writes zeros, else 6 bytes.
	MAC net.HardwareAddr
	// DisableMirror clears MIRROR_CTRL (the mirror TOE); DisableFAST
	// clears FAST_CTRL (the FAST user kernel).
	DisableMirror, DisableFAST bool
	// MirrorServer selects the TCP server whose flows the mirror TOE
	// reassembles (MIRROR_SERVER_IP/PORT); zero parts mean any.
	MirrorServer netip.AddrPort
}

func ipv4Reg(a netip.Addr) (uint32, error) {
	if !a.IsValid() {
		return 0, nil
	}
	if !a.Is4() {
		return 0, fmt.Errorf("hwoffload: %v is not an IPv4 address", a)
	}
	b := a.As4()
	return binary.BigEndian.Uint32(b[:]), nil
}

// Configure writes c into the configuration registers. The device must be
// stopped (ErrRunning otherwise); the engine checks the values and may
// refuse them (Err reports it, within 10 ms).
func (d *Device) Configure(c Config) error {
	if d.Status()&StatusRunning != 0 {
		return ErrRunning
	}
	ip, err := ipv4Reg(c.Addr.Addr())
	if err != nil {
		return err
	}
	var mask uint32
	if c.Addr.IsValid() && c.Addr.Bits() > 0 {
		mask = ^uint32(0) << (32 - c.Addr.Bits())
	}
	gw, err := ipv4Reg(c.Gateway)
	if err != nil {
		return err
	}
	srv, err := ipv4Reg(c.MirrorServer.Addr())
	if err != nil {
		return err
	}
	if c.MAC != nil && len(c.MAC) != 6 {
		return fmt.Errorf("hwoffload: MAC %v is not 6 bytes", c.MAC)
	}
	var macHi, macLo uint32
	if c.MAC != nil {
		macHi = uint32(c.MAC[0])<<8 | uint32(c.MAC[1])
		macLo = binary.BigEndian.Uint32(c.MAC[2:])
	}
	mirror, fast := uint32(MirrorEnable), uint32(FastEnable)
	if c.DisableMirror {
		mirror = 0
	}
	if c.DisableFAST {
		fast = 0
	}
	for _, w := range [...]struct {
		off int
		v   uint32
	}{
		{RegIPAddr, ip}, {RegNetmask, mask}, {RegGateway, gw}, {RegMACHi, macHi}, {RegMACLo, macLo},
		{RegMirrorCtrl, mirror}, {RegMirrorServerIP, srv}, {RegMirrorServerPort, uint32(c.MirrorServer.Port())},
		{RegFastCtrl, fast},
	} {
		d.r.Store32(w.off, w.v)
	}
	return nil
}

// setControl changes CONTROL's bits: set, then clear.
func (d *Device) setControl(set, clr uint32) {
	for {
		old := d.r.Load32(RegControl)
		if d.r.CompareAndSwap32(RegControl, old, old&^clr|set) {
			return
		}
	}
}

// Run sets CONTROL.RUN and waits until STATUS.RUNNING is set.
func (d *Device) Run(ctx context.Context) error {
	d.setControl(ControlRun, 0)
	return d.WaitStatus(ctx, StatusRunning, StatusRunning)
}

// Stop clears CONTROL.RUN and waits until STATUS.RUNNING is clear.
func (d *Device) Stop(ctx context.Context) error {
	d.setControl(0, ControlRun)
	return d.WaitStatus(ctx, StatusRunning, 0)
}

// Reset sets CONTROL.RESET and waits until the engine has cleared it: rings,
// counters, latency and ERROR are then zero. The rings' consumers start
// again from the empty rings; no Ring may be read during Reset (the host
// path's dispatcher, which reads ring 3, is paused, and the host path's
// connections fail with net.ErrClosed: RESET closed them).
func (d *Device) Reset(ctx context.Context) error {
	if h := d.hostRunning.Load(); h != nil {
		h.ringMu.Lock()
		defer h.ringMu.Unlock()
		defer h.resetDone()
	}
	d.setControl(ControlReset, 0)
	for d.r.Load32(RegControl)&ControlReset != 0 {
		if err := sleepCtx(ctx, waitPoll); err != nil {
			return fmt.Errorf("hwoffload: waiting for RESET to clear: %w", err)
		}
	}
	for k := range d.rings {
		d.rings[k].sync()
	}
	return nil
}

// WaitStatus waits until STATUS&mask == want, or ctx is done.
func (d *Device) WaitStatus(ctx context.Context, mask, want uint32) error {
	for d.Status()&mask != want {
		if err := sleepCtx(ctx, waitPoll); err != nil {
			return fmt.Errorf("hwoffload: waiting for STATUS&%#x == %#x (STATUS %#x): %w", mask, want, d.Status(), err)
		}
	}
	return nil
}

// Counters are the engine's counter registers (0x200..).
type Counters struct {
	RxFrames, RxDropped         uint64
	MirrorBytes, MirrorGapBytes uint64
	Trades, Orders              uint64
	StepSeqGaps, DecodeErrors   uint64
}

// Counters reads the counter registers (each one atomically; not a
// snapshot of all at one instant).
func (d *Device) Counters() Counters {
	return Counters{
		RxFrames: d.r.Load64(RegRxFrames), RxDropped: d.r.Load64(RegRxDropped),
		MirrorBytes: d.r.Load64(RegMirrorBytes), MirrorGapBytes: d.r.Load64(RegMirrorGapBytes),
		Trades: d.r.Load64(RegTrades), Orders: d.r.Load64(RegOrders),
		StepSeqGaps: d.r.Load64(RegStepSeqGaps), DecodeErrors: d.r.Load64(RegDecodeErrors),
	}
}

// Latency is the engine's latency registers, in cycles of CYCLE_HZ.
type Latency struct {
	Count, Min, Max, Sum uint64
}

// Mean returns Sum/Count as a duration, 0 when Count is 0.
func (l Latency) Mean() time.Duration {
	if l.Count == 0 {
		return 0
	}
	return CyclesDuration(l.Sum / l.Count)
}

// Latency reads the latency registers.
func (d *Device) Latency() Latency {
	return Latency{Count: d.r.Load64(RegLatCount), Min: d.r.Load64(RegLatMin),
		Max: d.r.Load64(RegLatMax), Sum: d.r.Load64(RegLatSum)}
}

// CyclesDuration converts a number of cycles at CycleHz to a duration.
func CyclesDuration(c uint64) time.Duration {
	return time.Duration(c/CycleHz)*time.Second + time.Duration(c%CycleHz*1e9/CycleHz)
}

// Cycles returns the CYCLES register.
func (d *Device) Cycles() uint64 { return d.r.Load64(RegCycles) }

// Time converts a cycle count (CYCLES, a record's rx_cycles or out_cycles)
// to wall time, with CYCLES_EPOCH_NS.
func (d *Device) Time(cycles uint64) time.Time {
	return time.Unix(0, int64(d.r.Load64(RegCyclesEpochNs))).Add(CyclesDuration(cycles))
}

// sleepCtx sleeps d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
