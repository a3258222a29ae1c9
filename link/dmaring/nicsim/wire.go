package nicsim

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/internal/linkbase"
	"github.com/tickwire/tickwire/link/pipe"
	"github.com/tickwire/tickwire/link/tap"
)

// Wire is the device's port: where transmitted frames go and received ones
// come from.
type Wire interface {
	// Start begins delivering received frames to d.Receive.
	Start(d *Device) error
	// Transmit sends frame, which the device transmitted at ts (Unix ns on
	// the device clock). It does NOT take ownership of frame: the bytes are
	// reused after the call returns. It must not block for long.
	Transmit(frame []byte, ts int64)
	// Close stops delivering; after it returns, Receive is not called.
	Close() error
}

// PipeWire puts the device on one end of a link/pipe: frames the device
// transmits are sent to the other end (a stack, or another device's
// PipeWire), and frames the other end sends are received.
type PipeWire struct {
	ep      *pipe.Endpoint
	dev     atomic.Pointer[Device]
	scratch sync.Pool
	txErrs  atomic.Uint64
}

// NewPipeWire returns a wire on ep, one end of a pipe.New pair.
func NewPipeWire(ep *pipe.Endpoint) *PipeWire { return &PipeWire{ep: ep} }

// Start implements Wire.
func (w *PipeWire) Start(d *Device) error {
	w.dev.Store(d)
	w.ep.Attach(&wireDispatcher{dev: &w.dev, scratch: &w.scratch})
	return nil
}

// Transmit implements Wire: the frame is copied and delivered to the other
// end inline.
func (w *PipeWire) Transmit(f []byte, _ int64) {
	if w.ep.Send(f) != nil {
		w.txErrs.Add(1)
	}
}

// TxErrors returns the frames the pipe refused (longer than its MTU).
func (w *PipeWire) TxErrors() uint64 { return w.txErrs.Load() }

// Close implements Wire. It detaches from the pipe end; it does not close
// it.
func (w *PipeWire) Close() error {
	w.ep.Attach(nil)
	w.dev.Store(nil)
	return nil
}

// wireDispatcher takes frames a link endpoint received and hands them to
// the device.
type wireDispatcher struct {
	dev      *atomic.Pointer[Device]
	scratch  *sync.Pool
	complete bool // complete partial transport checksums (TAP)
}

var _ stack.NetworkDispatcher = (*wireDispatcher)(nil)

// DeliverNetworkPacket implements stack.NetworkDispatcher.
func (w *wireDispatcher) DeliverNetworkPacket(_ tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	d := w.dev.Load()
	if d == nil {
		return
	}
	bp, _ := w.scratch.Get().(*[]byte)
	if bp == nil {
		b := make([]byte, 0, 65536+linkbase.HeaderLength)
		bp = &b
	}
	f := (*bp)[:0]
	views, off := pkt.AsViewList()
	for v := views.Front(); v != nil; v = v.Next() {
		s := v.AsSlice()
		if off >= len(s) {
			off -= len(s)
			continue
		}
		f = append(f, s[off:]...)
		off = 0
	}
	if w.complete {
		linkbase.CompleteChecksums(f)
	}
	d.Receive(f, 0)
	*bp = f[:0]
	w.scratch.Put(bp)
}

// DeliverLinkPacket implements stack.NetworkDispatcher.
func (w *wireDispatcher) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

// TapWire puts the device on a TAP device (link/tap): the kernel is the
// peer. Give the TAP endpoint the host endpoint's MAC (tap.Config.MAC), so
// that the kernel addresses the frames it sends to the device. Linux only:
// elsewhere NewTapWire returns tap.ErrNotSupported.
type TapWire struct {
	ep  *tap.Endpoint
	dev atomic.Pointer[Device]
	mu  sync.Mutex
	// +checklocks:mu
	closed bool
	pool   sync.Pool
}

// NewTapWire opens (creating when needed) the TAP device of cfg, with
// cfg.NoTSO set: the device model takes frames within the MTU.
func NewTapWire(cfg tap.Config) (*TapWire, error) {
	cfg.NoTSO = true // the device's rings take frames within the MTU
	ep, err := tap.New(cfg)
	if err != nil {
		return nil, err
	}
	return &TapWire{ep: ep}, nil
}

// Endpoint returns the TAP endpoint (its Stats, name).
func (w *TapWire) Endpoint() *tap.Endpoint { return w.ep }

// Start implements Wire.
func (w *TapWire) Start(d *Device) error {
	w.dev.Store(d)
	w.ep.Attach(&wireDispatcher{dev: &w.dev, scratch: &w.pool, complete: true})
	return nil
}

// Transmit implements Wire: the frame is written to the TAP device.
func (w *TapWire) Transmit(f []byte, _ int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(f)})
	var l stack.PacketBufferList
	l.PushBack(pkt)
	w.ep.WritePackets(l)
	pkt.DecRef()
}

// Close implements Wire: it closes the TAP endpoint (removing a device it
// created).
func (w *TapWire) Close() error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.ep.Attach(nil)
	w.ep.Close()
	w.dev.Store(nil)
	return nil
}

// ReplayConfig configures NewReplay.
type ReplayConfig struct {
	// Paced replays at the capture's recorded pace; otherwise as fast as
	// the RX ring takes the frames.
	Paced bool
	// CaptureTime stamps each completion with the frame's capture time
	// instead of the device clock's, so a consumer sees the capture's times
	// (as it would reading the file).
	CaptureTime bool
	// Lossless waits for a free RX descriptor instead of dropping a frame
	// that finds the ring empty. Default false: drop and count, as a NIC.
	Lossless bool
	// BatchSize is the frames read from the source at once. Default 64.
	BatchSize int
	// SnapLen is the largest frame; longer ones are truncated. Default
	// 65535.
	SnapLen int
}

// Replay is a wire that receives the frames of a frame.Source (a pcap
// file) and discards what the device transmits.
type Replay struct {
	src  frame.Source
	cfg  ReplayConfig
	stop chan struct{}
	done chan struct{}
	err  error // set before done closes
	once sync.Once

	started atomic.Bool

	frames, dropped, discarded atomic.Uint64
}

// NewReplay returns a wire replaying src, which it closes when done.
func NewReplay(src frame.Source, cfg ReplayConfig) *Replay {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 64
	}
	if cfg.SnapLen <= 0 {
		cfg.SnapLen = 65535
	}
	return &Replay{src: src, cfg: cfg, stop: make(chan struct{}), done: make(chan struct{})}
}

// Start implements Wire: replay begins.
func (r *Replay) Start(d *Device) error {
	if !r.started.CompareAndSwap(false, true) {
		return errors.New("nicsim: replay already started")
	}
	go r.run(d)
	return nil
}

// Done is closed when the source is exhausted or the replay stopped; Err
// then says why (nil at the source's end).
func (r *Replay) Done() <-chan struct{} { return r.done }

// Err returns the source's error, nil after a clean end. Valid after Done.
func (r *Replay) Err() error { return r.err }

// Counts returns the frames received into the rings and the frames
// dropped (no descriptor, queue not running, not Ethernet).
func (r *Replay) Counts() (frames, dropped uint64) { return r.frames.Load(), r.dropped.Load() }

func (r *Replay) run(d *Device) {
	defer close(r.done)
	defer r.src.Close()
	batch := frame.NewBatch(r.cfg.BatchSize, r.cfg.SnapLen)
	var first, firstDev int64
	for {
		n, err := r.src.ReadFrames(batch)
		for i := range batch[:n] {
			f := &batch[i]
			if f.LinkType != frame.LinkTypeEthernet && f.LinkType != 0 {
				r.dropped.Add(1) // the device's wire is Ethernet
				continue
			}
			if r.cfg.Paced && f.Time != 0 {
				if first == 0 {
					first, firstDev = f.Time, d.clock.Now()
				}
				if !r.wait(d, firstDev+(f.Time-first)) {
					return
				}
			}
			ts := int64(0)
			if r.cfg.CaptureTime {
				ts = f.Time
			}
			if !r.receive(d, f.Data(), ts) {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				r.err = err
			}
			return
		}
		select {
		case <-r.stop:
			return
		default:
		}
	}
}

// wait sleeps until the device clock reaches at; false when stopped.
func (r *Replay) wait(d *Device, at int64) bool {
	for {
		dt := at - d.clock.Now()
		if dt <= 0 {
			return true
		}
		t := time.NewTimer(time.Duration(dt))
		select {
		case <-r.stop:
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// receive hands one frame to the device, retrying while Lossless and the
// ring is empty; false when stopped.
func (r *Replay) receive(d *Device, f []byte, ts int64) bool {
	backoff := time.Microsecond
	for {
		err := d.Receive(f, ts)
		if err == nil {
			r.frames.Add(1)
			return true
		}
		if !r.cfg.Lossless || !errors.Is(err, ErrNoDescriptor) {
			r.dropped.Add(1)
			return true
		}
		select {
		case <-r.stop:
			return false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Millisecond)
	}
}

// Transmit implements Wire: the frame is discarded (counted).
func (r *Replay) Transmit([]byte, int64) { r.discarded.Add(1) }

// Close implements Wire: it stops the replay and waits for it.
func (r *Replay) Close() error {
	r.once.Do(func() { close(r.stop) })
	if r.started.Load() {
		<-r.done
	}
	return nil
}
