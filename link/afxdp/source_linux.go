//go:build linux && (amd64 || arm64)

package afxdp

import (
	"errors"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/tickwire/tickwire/internal/rxclock"
	"github.com/tickwire/tickwire/link/frame"
)

// Source is a live capture over AF_XDP sockets of the frames that match
// Config.Filter: a frame.Source for mirror and feed, as link/afpacket's
// Source is. The kernel no longer sees the frames it captures.
//
// ReadFrames takes the frames ready on every bound queue, round robin, in
// the calling goroutine. It must not be called from several goroutines at
// once; Close and Stats may be called from any goroutine, also while
// ReadFrames is blocked.
type Source struct {
	q   *queues
	cfg Config

	// mu is held for reading by ReadFrames while it uses the rings, and
	// for writing by Close, so the rings are never unmapped under it.
	mu sync.RWMutex
	// +checklocks:mu
	closed bool

	// The batch being filled, for the receive callback (made once, so
	// that reading allocates nothing).
	batch   []frame.Frame
	n       int
	rx      int64
	cur     *socket
	fillFn  func([]byte)
	nextSoc int
	fds     []unix.PollFd

	// file is an epoll descriptor watching the sockets and q.wakeFD for
	// input, served by the runtime poller (nil: wait in poll(2)).
	file    *os.File
	raw     syscall.RawConn
	readyFn func(uintptr) bool
}

// NewSource opens AF_XDP sockets on cfg.Queues receive queues of the
// interface named iface, from cfg.Queue on, and attaches the XDP program
// that steers the frames matching cfg.Filter (required) to them. Errors
// are as New's.
func NewSource(iface string, cfg Config) (*Source, error) {
	if err := cfg.validateSource(); err != nil {
		return nil, &Error{Op: "open", Interface: iface, Err: err}
	}
	f := cfg.Filter
	q, err := openQueues(iface, &cfg, captureProgram, func(m *ebpf.Map) asm.Instructions {
		return captureInstructions(m, f)
	})
	if err != nil {
		return nil, err
	}
	s := &Source{q: q, cfg: cfg, fds: make([]unix.PollFd, len(q.socks)+1)}
	s.fillFn = s.fill
	s.readyFn = s.ready
	if f, err := q.pollFile(); err == nil {
		if raw, err := f.SyscallConn(); err == nil {
			s.file, s.raw = f, raw
		} else {
			f.Close()
		}
	} // else ReadFrames blocks in poll(2)
	return s, nil
}

// ready reports, for the runtime poller, whether ReadFrames can stop
// waiting: a frame or Close.
func (s *Source) ready(uintptr) bool {
	if s.q.stopping.Load() {
		return true
	}
	for _, k := range s.q.socks {
		if k.rx.available() > 0 {
			return true
		}
	}
	return false
}

// waitPoller waits in the runtime poller, as q.wait does in poll(2):
// true when a frame may be ready, false at the deadline.
func (s *Source) waitPoller(deadline time.Time) (bool, error) {
	s.q.spin(s.q.socks)
	if !deadline.IsZero() {
		s.file.SetReadDeadline(deadline)
	}
	if err := s.raw.Read(s.readyFn); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// fill copies one frame into the next slot of the batch.
func (s *Source) fill(b []byte) {
	f := &s.batch[s.n]
	f.N = copy(f.Buf, b)
	f.WireLen = len(b)
	f.Time = s.rx
	f.LinkType = frame.LinkTypeEthernet
	f.ChecksumVerified = false // copy mode: the frame's rx checksum status does not reach the socket
	s.cur.rxFrames.Add(1)
	s.cur.rxBytes.Add(uint64(len(b)))
	if f.N < len(b) {
		s.cur.rxTruncated.Add(1)
	}
	s.n++
}

// ReadFrames implements frame.Source.ReadFrames. It copies every frame
// that is ready, up to len(frames), into the caller's buffers and returns
// without waiting for more; only when no queue has a frame does it block,
// until one arrives, Config.ReadTimeout passes (0, ErrTimeout) or Close is
// called (0, io.EOF). It allocates nothing.
func (s *Source) ReadFrames(frames []frame.Frame) (int, error) {
	var deadline time.Time
	if s.cfg.ReadTimeout > 0 {
		deadline = time.Now().Add(s.cfg.ReadTimeout)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for {
		if s.closed || s.q.stopping.Load() {
			return 0, io.EOF
		}
		if n := s.take(frames); n > 0 {
			return n, nil
		}
		var ok bool
		var err error
		if s.raw != nil {
			ok, err = s.waitPoller(deadline)
		} else {
			ok, err = s.q.wait(s.q.socks, s.fds, deadline)
		}
		switch {
		case s.q.stopping.Load():
			return 0, io.EOF
		case err != nil:
			return 0, &Error{Op: "read", Interface: s.q.iface, Err: err}
		case !ok:
			return 0, ErrTimeout
		}
	}
}

// take fills frames from the queues' RX rings, starting with the queue
// after the one that started last time, so no queue starves another.
func (s *Source) take(frames []frame.Frame) int {
	s.batch, s.n = frames, 0
	s.rx = rxclock.Now()
	socks := s.q.socks
	for i := range socks {
		if s.n == len(frames) {
			break
		}
		s.cur = socks[(s.nextSoc+i)%len(socks)]
		s.cur.receive(len(frames)-s.n, s.fillFn)
	}
	s.nextSoc = (s.nextSoc + 1) % len(socks)
	n := s.n
	s.batch, s.cur = nil, nil
	return n
}

// SetBusyPoll makes ReadFrames spin on the RX rings, with no system call,
// for up to d when they are empty before it blocks (parked in the runtime
// poller, or in poll(2) where an epoll descriptor could not be made); 0,
// the default, blocks at once. It saves the wake-up for every frame
// that arrives within d, at the price of the reading core kept busy for up
// to d after every batch: on a steady feed, a whole core.
func (s *Source) SetBusyPoll(d time.Duration) { s.q.busyPoll.Store(int64(max(d, 0))) }

// ZeroCopy reports whether every socket runs in zero-copy mode.
func (s *Source) ZeroCopy() bool { return s.q.zeroCopy(s.q.socks) }

// AttachMode returns the mode the XDP program was attached in.
func (s *Source) AttachMode() AttachMode { return s.q.prog.mode }

// Stats returns the counters; the kernel's are frozen at Close.
func (s *Source) Stats() Stats { return s.q.stats(s.q.socks) }

// Queues returns the number of receive queues bound, one socket each.
func (s *Source) Queues() int { return len(s.q.socks) }

// QueueStats returns the counters of the socket of the i-th queue bound
// (Config.Queue + i), zero for i out of range.
func (s *Source) QueueStats(i int) Stats { return s.q.queueStats(i) }

// Close implements frame.Source.Close. It wakes a blocked ReadFrames,
// which returns io.EOF, waits for it to leave, detaches the XDP program
// (the kernel sees every frame again) and releases the sockets. Calling it
// again does nothing.
func (s *Source) Close() error {
	s.q.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.file != nil {
		s.file.Close()
	}
	s.q.close()
	return nil
}
