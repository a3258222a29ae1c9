// Package twin is the software twin of the U50 offload engine: the engine's
// register map and result rings (package hwoffload, REGISTERS.md) in a
// shared region, served by tickwire's own parts. Its input is a frame.Source
// (a pcap file); package feed is the mirror TOE (package mirror) and the
// FAST user kernel (fast/sse), and every trade, order, gap and flow event it
// reports becomes a record in a ring.
//
//	src, _ := pcap.Open("feed.pcap")
//	tw, err := twin.New(twin.Config{Region: "/dev/shm/u50", Input: src})
//	defer tw.Close()
//	dev, err := hwoffload.Open(ctx, "twin:/dev/shm/u50") // here or in another process
//
// The region is one file: the 64 KiB register window, then rings 0 to 3,
// each 2^RingLog2 slots of 128 bytes (BASE = 0x10000 + k * 2^RingLog2 * 128).
// The twin writes MAGIC last, so a host that reads MAGIC finds every other
// register set. It consumes its input only while CONTROL.RUN is set, at most
// Speed times the recorded pace, and sets STATUS.INPUT_DONE once the input
// ended and every record was written or dropped.
//
// One goroutine runs the engine. Between frames, and at least every
// millisecond when idle, it looks at the host-writable registers: CONTROL
// (RUN; RESET clears rings, counters, latency, ERROR and the decoder's
// tables, and is cleared when done), the configuration registers (accepted
// only while not RUNNING), and every ring's CONS. A value it cannot accept
// is put back and ERROR set (the codes are in REGISTERS.md); a read-only
// register the host wrote is put back too (READ_ONLY), the host path's
// included: each session's registers but RX_CONS, ring 3's PROD and
// DROPPED, CMD_CONS, UDP_RX_PROD, the ARP table and the port bitmaps. CYCLES counts the monotonic
// clock at CYCLE_HZ; it is refreshed at each look and each record.
//
// Every decoding error feed reports (feed.ErrorHandler) becomes a decode
// error record with its stream offset and code (DecodeErrorCode).
//
// With Config.Link the twin has a network port: a tickwire.Stack on it
// (IP, ARP, ICMP, UDP and the general TOE, made with IP_ADDR, NETMASK,
// GATEWAY and MAC when the first host-path command runs) serves the command
// ring, each session with a reader and a writer goroutine; ARP_COUNT and the
// ARP table are refreshed every 10 ms. The network configuration is taken
// at RUN: when IP_ADDR, NETMASK, GATEWAY or MAC changed while stopped, the
// stack is replaced by one made with the new values at the next RUN (its
// connections reset, listeners and UDP ports opened again on the new stack,
// the network port kept open). RESET closes the sessions, listeners and UDP
// ports, not the stack, so its ARP table stays.
//
// What the card does and the twin does not yet: live mirror input (the
// mirror TOE reads a frame.Source such as a pcap, not the network port).
package twin

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"sync"
	"time"

	"github.com/tickwire/tickwire/feed"
	"github.com/tickwire/tickwire/hwoffload"
	"github.com/tickwire/tickwire/internal/shm"
	"github.com/tickwire/tickwire/link/frame"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Defaults for Config.
const (
	// DefaultRingLog2 gives every ring 4096 slots (512 KiB).
	DefaultRingLog2 = 12
	// DefaultBatch is the number of frames read from the input at once.
	DefaultBatch = 32
	// SlotSize is the largest frame a batch slot holds; longer frames are
	// truncated and dropped by the mirror TOE (RX_DROPPED).
	SlotSize = 65536 + 20
)

// ErrConfig is wrapped by New's errors for a bad Config.
var ErrConfig = errors.New("twin: invalid config")

// Config configures a Twin.
type Config struct {
	// Region is the path of the region file the twin creates (it must not
	// exist; /dev/shm/NAME on Linux) and removes on Close. "" keeps the
	// region in Go memory: hand Region().Map() to hwoffload.OpenRegion.
	Region string
	// RingLog2 is every ring's LOG2_SLOTS, from hwoffload.MinLog2Slots (4)
	// to hwoffload.MaxLog2Slots (20); 0 means DefaultRingLog2.
	RingLog2 int
	// Input is the frames the engine consumes; the Twin reads it from its
	// engine goroutine and does not close it. nil: no input (LINK_UP
	// clear).
	Input frame.Source
	// Speed paces the input: 0 as fast as the engine takes frames, 1 the
	// recorded pace, x times the recorded pace.
	Speed float64
	// Addr gives IP_ADDR and NETMASK their initial values (a host write
	// before RUN wins). Optional.
	Addr netip.Prefix
	// Link is the host path's network port (a link/tap endpoint, one end
	// of a link/pipe): the twin's general TOE and UDP, a tickwire.Stack
	// made on it with IP_ADDR, NETMASK, GATEWAY and MAC_HI/LO when the
	// first host-path command runs, serve the command ring. The Twin owns
	// it from New on (Close closes it). nil: host-path commands complete
	// with NO_HOST_PATH.
	Link gstack.LinkEndpoint
	// Feed bounds the mirror TOE and the FAST decoder (flows, buffers).
	Feed feed.Config
	// Batch is the number of frames read at once (DefaultBatch when 0,
	// at most 1024); each costs SlotSize bytes.
	Batch int
}

// Twin is a running software engine. Its methods are safe for concurrent
// use.
type Twin struct {
	region *shm.Region
	path   string
	stop   chan struct{}
	done   chan struct{}
	eng    *engine

	closeOnce sync.Once
	err       error // Close's result, set in closeOnce
}

// New creates the region, sets every register (MAGIC last) and starts the
// engine. The engine consumes its input once the host sets RUN.
func New(cfg Config) (*Twin, error) {
	if cfg.RingLog2 == 0 {
		cfg.RingLog2 = DefaultRingLog2
	}
	if cfg.RingLog2 < hwoffload.MinLog2Slots || cfg.RingLog2 > hwoffload.MaxLog2Slots {
		return nil, fmt.Errorf("%w: RingLog2 %d not from %d to %d", ErrConfig, cfg.RingLog2, hwoffload.MinLog2Slots, hwoffload.MaxLog2Slots)
	}
	if cfg.Speed < 0 || math.IsNaN(cfg.Speed) || math.IsInf(cfg.Speed, 0) {
		return nil, fmt.Errorf("%w: Speed %v", ErrConfig, cfg.Speed)
	}
	if cfg.Batch == 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Batch < 0 || cfg.Batch > 1024 {
		return nil, fmt.Errorf("%w: Batch %d not from 1 to 1024", ErrConfig, cfg.Batch)
	}
	if cfg.Addr.IsValid() && !cfg.Addr.Addr().Is4() {
		return nil, fmt.Errorf("%w: Addr %v is not IPv4", ErrConfig, cfg.Addr)
	}
	ringBytes := (1 << cfg.RingLog2) * hwoffload.SlotBytes
	size := hwoffload.WindowBytes + hwoffload.NumRings*ringBytes + hostBytes
	var (
		r   *shm.Region
		err error
	)
	if cfg.Region == "" {
		r, err = shm.New(size)
	} else {
		r, err = shm.Create(cfg.Region, size)
	}
	if err != nil {
		return nil, fmt.Errorf("twin: %w", err)
	}
	e, err := newEngine(r, cfg)
	if err != nil {
		r.Close()
		return nil, err
	}
	t := &Twin{region: r, path: cfg.Region, stop: make(chan struct{}), done: make(chan struct{}), eng: e}
	go func() {
		defer close(t.done)
		e.run(t.stop)
	}()
	return t, nil
}

// Region returns the twin's own mapping of the region, valid until Close.
// Map it (Region().Map()) for a host in this process.
func (t *Twin) Region() *shm.Region { return t.region }

// Path returns the region file's path, "" for a region in Go memory.
func (t *Twin) Path() string { return t.path }

// Close stops the engine, waits for its goroutine, unmaps the region and
// removes its file. Mappings of the region made with Map stay valid.
// Later calls return the first one's result.
func (t *Twin) Close() error {
	t.closeOnce.Do(func() {
		close(t.stop)
		<-t.done
		t.eng.host.closeAll()
		t.err = t.region.Close()
	})
	return t.err
}

// pollEvery bounds the time between two looks at the host-writable
// registers while frames flow; idleSleep is the pause between looks when
// the engine has nothing to do.
const (
	pollEvery = 500 * time.Microsecond
	idleSleep = 200 * time.Microsecond
)

// run is the engine goroutine.
func (e *engine) run(stop <-chan struct{}) {
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	sleep := func(d time.Duration) bool {
		idle.Reset(d)
		select {
		case <-stop:
			idle.Stop()
			return false
		case <-idle.C:
			return true
		}
	}
	for {
		select {
		case <-stop:
			return
		default:
		}
		e.poll()
		wait := idleSleep
		if e.running && e.hasInput() {
			wait = e.step()
		}
		if wait > 0 && !sleep(wait) {
			return
		}
	}
}

// hasInput reports whether input frames remain to be consumed.
func (e *engine) hasInput() bool {
	return e.input != nil && !e.inputDone && !e.inputFailed
}

// step consumes frames for up to pollEvery and returns how long to wait
// before the next step (0: go on after a look at the registers).
func (e *engine) step() time.Duration {
	defer e.publishCounters()
	deadline := e.monoNow() + int64(pollEvery)
	for e.running {
		if e.next == e.n {
			if e.eof {
				e.endInput()
				return 0
			}
			if !e.read() {
				return idleSleep // nothing came: a live source is quiet
			}
			continue
		}
		f := &e.batch[e.next]
		now := e.monoNow()
		if e.cfg.Speed > 0 {
			if !e.paced {
				e.paced, e.paceMono, e.paceCap = true, now, f.Time
			}
			due := e.paceMono + int64(float64(f.Time-e.paceCap)/e.cfg.Speed)
			if due > now {
				return time.Duration(min(due-now, int64(pollEvery)))
			}
		}
		e.next++
		e.frame(f, now)
		if now >= deadline {
			return 0
		}
	}
	return 0
}

// read fills the batch from the input and reports whether frames came.
func (e *engine) read() bool {
	n, err := e.input.ReadFrames(e.batch)
	e.n, e.next = n, 0
	switch {
	case err == nil:
	case errors.Is(err, io.EOF):
		e.eof = true
	default:
		var te interface{ Timeout() bool }
		if errors.As(err, &te) && te.Timeout() {
			break
		}
		e.inputFailed = true
		e.fault(hwoffload.CodeInput)
		e.updateStatus()
	}
	return n > 0
}
