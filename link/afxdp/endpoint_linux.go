//go:build linux && (amd64 || arm64)

package afxdp

import (
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/tickwire/tickwire/internal/rxclock"
	"github.com/tickwire/tickwire/link"
	"github.com/tickwire/tickwire/link/internal/linkbase"
)

// rxBatch is the most frames a reader takes from its RX ring before it
// returns their UMEM frames to the fill ring.
const rxBatch = 64

// Endpoint is a stack.LinkEndpoint on AF_XDP sockets bound to receive
// queues of an interface. The stack sends and receives Ethernet II frames;
// MTU is the interface's.
//
// From the first Attach until Close, one goroutine per queue waits on its
// RX ring, parked in the runtime poller (epoll on a duplicate of the
// socket; poll(2) on a blocked thread took twice as long per round trip),
// and delivers each frame inline to the stack, copied out of the UMEM into
// a pooled buffer the packet then owns; frames that arrive while
// no stack is attached are dropped and counted (Stats.RxInvalid).
// WritePackets copies each frame into a free UMEM send frame of the first
// queue's socket and queues it on the TX ring, with one kick per call; a
// frame that finds no free send frame is dropped and counted
// (Stats.TxDropped), never blocking the stack. All methods are safe for
// concurrent use.
//
// Lock order:
//
//	mu
//	  socket.txMu
type Endpoint struct {
	linkbase.Endpoint

	q   *queues
	mac net.HardwareAddr

	mu sync.Mutex
	// +checklocks:mu
	started bool
	// +checklocks:mu
	closed bool
	// files are the readers' pollable duplicates of the sockets, for
	// Close to wake them.
	// +checklocks:mu
	files   []*os.File
	readers sync.WaitGroup
	closing atomic.Bool
}

var (
	_ stack.LinkEndpoint = (*Endpoint)(nil)
	_ link.BusyPoller    = (*Endpoint)(nil)
)

// New opens AF_XDP sockets on cfg.Queues receive queues of the interface
// named iface, from cfg.Queue on, and attaches the XDP program that steers
// IPv4 frames to cfg.Addr, and ARP for it, to them (see the package doc).
// Errors are *Error values whose cause is a *ConfigError, an
// *AttachedError, or wraps ErrPermission, ErrNoKernelSupport,
// ErrNoInterface or ErrQueueRange.
func New(iface string, cfg Config) (*Endpoint, error) {
	if err := cfg.validateEndpoint(); err != nil {
		return nil, &Error{Op: "open", Interface: iface, Err: err}
	}
	addr := cfg.Addr.As4()
	q, err := openQueues(iface, &cfg, endpointProgram, func(m *ebpf.Map) asm.Instructions {
		return endpointInstructions(m, addr)
	})
	if err != nil {
		return nil, err
	}
	mac := cfg.MAC
	if mac == nil {
		mac = q.mac
	}
	e := &Endpoint{q: q, mac: mac}
	e.Init(tcpip.LinkAddress(mac), uint32(q.mtu))
	return e, nil
}

// MAC returns the stack's Ethernet address: Config.MAC or the interface's.
func (e *Endpoint) MAC() net.HardwareAddr { return e.mac }

// Interface returns the interface name.
func (e *Endpoint) Interface() string { return e.q.iface }

// ZeroCopy reports whether every socket runs in zero-copy mode (false:
// copy mode).
func (e *Endpoint) ZeroCopy() bool { return e.q.zeroCopy(e.q.socks) }

// AttachMode returns the mode the XDP program was attached in:
// AttachDriver or AttachGeneric.
func (e *Endpoint) AttachMode() AttachMode { return e.q.prog.mode }

// Stats returns the endpoint's counters; the kernel's are frozen at Close.
func (e *Endpoint) Stats() Stats { return e.q.stats(e.q.socks) }

// Queues returns the number of receive queues bound, one socket each.
func (e *Endpoint) Queues() int { return len(e.q.socks) }

// QueueStats returns the counters of the socket of the i-th queue bound
// (Config.Queue + i), zero for i out of range: the reader goroutine's
// receive figures and the sends WritePackets spread to it by hash.
func (e *Endpoint) QueueStats(i int) Stats { return e.q.queueStats(i) }

// SetBusyPoll makes each reader spin on its RX ring, with no system call,
// for up to d after its ring runs empty before it parks in the runtime
// poller; 0, the default, parks at once. Spinning saves the wake-up from poll (a few
// to tens of microseconds) for every frame that arrives within d, at the
// price of one core per queue kept busy for up to d after every frame: on
// a steady feed, a core per queue. A spinning reader keeps its thread
// from the runtime's network poller: a goroutine of the same process that
// waits on a socket (a kernel client in a benchmark) is found only when
// the spin ends, which made a same-process round trip 3.5x slower (see
// DESIGN.md). It implements link.BusyPoller.
func (e *Endpoint) SetBusyPoll(d time.Duration) { e.q.busyPoll.Store(int64(max(d, 0))) }

// Attach implements stack.LinkEndpoint.Attach. The first dispatcher starts
// the readers, which run until Close; nil detaches (frames are then
// dropped and counted).
func (e *Endpoint) Attach(d stack.NetworkDispatcher) {
	e.Endpoint.Attach(d)
	if d == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started || e.closed {
		return
	}
	e.started = true
	for _, s := range e.q.socks {
		f, err := pollable(s.fd)
		if err == nil {
			e.files = append(e.files, f)
		} // else the reader blocks in poll(2)
		e.readers.Add(1)
		go e.read(s, f)
	}
}

// Wait implements stack.LinkEndpoint.Wait. It does not block: netstack
// calls it with its stack lock held, which a reader may need to finish
// delivering a frame. Close joins the readers.
func (*Endpoint) Wait() {}

// reader is one queue's receive state, made once so that delivering a
// frame allocates nothing but the pooled buffer and packet.
type reader struct {
	e       *Endpoint
	s       *socket
	rx      int64 // the stamp of the batch being delivered
	deliver func([]byte)
}

func (r *reader) handle(b []byte) {
	v := buffer.NewViewSize(len(b))
	copy(v.AsSlice(), b)
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithView(v)})
	if r.e.DeliverFrameAt(pkt, r.rx) {
		r.s.rxFrames.Add(1)
		r.s.rxBytes.Add(uint64(len(b)))
	} else {
		r.s.rxInvalid.Add(1) // no stack attached
	}
	pkt.DecRef()
}

// pollable returns a duplicate of the socket as a non-blocking os.File
// that the runtime poller (epoll) serves, so a reader waits as a parked
// goroutine instead of a thread blocked in poll(2).
func pollable(fd int) (*os.File, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(dup, true); err != nil {
		unix.Close(dup)
		return nil, err
	}
	return os.NewFile(uintptr(dup), "afxdp"), nil
}

// read delivers s's frames until Close. With f it waits in the runtime
// poller, else in poll(2).
func (e *Endpoint) read(s *socket, f *os.File) {
	defer e.readers.Done()
	r := &reader{e: e, s: s}
	r.deliver = r.handle
	socks := []*socket{s}
	fds := make([]unix.PollFd, 2)
	var raw syscall.RawConn
	if f != nil {
		raw, _ = f.SyscallConn()
	}
	ready := func(uintptr) bool { return e.q.stopping.Load() || s.rx.available() > 0 }
	for {
		r.rx = rxclock.Now()
		if s.receive(rxBatch, r.deliver) > 0 {
			continue
		}
		if raw != nil {
			if spin := e.q.busyPoll.Load(); spin > 0 {
				start := time.Now()
				for s.rx.available() == 0 && !e.q.stopping.Load() && time.Since(start) < time.Duration(spin) {
					runtime.Gosched()
				}
			}
			if err := raw.Read(ready); err != nil || e.q.stopping.Load() {
				return // Close set a deadline
			}
			continue
		}
		ok, err := e.q.wait(socks, fds, time.Time{})
		if !ok || err != nil {
			if err != nil {
				s.rxInvalid.Add(1)
			}
			return
		}
	}
}

// WritePackets implements stack.LinkEndpoint.WritePackets. It does NOT
// take ownership of the packets. Frames that find no free send frame, or
// are longer than a UMEM frame, are dropped and counted but reported as
// written, like frames lost on a cable. With several queues a packet is
// sent from the socket of queue pkt.Hash mod N (netstack gives each
// connection its own hash), so the writers of different connections
// mostly take different locks; a run of packets for one socket is
// published with one kick.
func (e *Endpoint) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	if e.closing.Load() {
		return 0, &tcpip.ErrClosedForSend{}
	}
	all := pkts.AsSlice()
	n := uint32(len(e.q.socks))
	for len(all) > 0 {
		q := all[0].Hash % n
		run := 1
		for run < len(all) && all[run].Hash%n == q {
			run++
		}
		if !e.q.socks[q].writeRun(all[:run]) {
			return 0, &tcpip.ErrClosedForSend{}
		}
		all = all[run:]
	}
	return pkts.Len(), nil
}

// writeRun queues pkts on s's TX ring and kicks the kernel once; false
// when s is closed for sending.
func (s *socket) writeRun(pkts []*stack.PacketBuffer) bool {
	s.txMu.Lock()
	defer s.txMu.Unlock()
	if s.txClosed {
		return false
	}
	for _, pkt := range pkts {
		size := pkt.Size()
		dst, ok := s.reserveLocked(size)
		if !ok {
			continue
		}
		n := 0
		views, off := pkt.AsViewList()
		for v := views.Front(); v != nil; v = v.Next() {
			b := v.AsSlice()
			if off >= len(b) {
				off -= len(b)
				continue
			}
			n += copy(dst[n:], b[off:])
			off = 0
		}
		s.commitLocked(n)
	}
	s.flushLocked()
	return true
}

// Close implements stack.LinkEndpoint.Close. It stops the readers and
// waits for them, detaches the XDP program, and closes the sockets and
// unmaps their rings, leaving the interface as it was found. It is
// idempotent; it must not be called from inside a frame's delivery.
func (e *Endpoint) Close() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	files := e.files
	e.files = nil
	e.mu.Unlock()
	e.closing.Store(true)
	e.q.stop()
	for _, f := range files {
		f.SetReadDeadline(time.Now()) // wakes a reader in the poller
	}
	e.readers.Wait()
	for _, f := range files {
		f.Close()
	}
	e.q.close()
	e.Endpoint.Close()
}
