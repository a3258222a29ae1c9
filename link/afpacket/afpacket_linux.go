//go:build linux

package afpacket

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	gafpacket "github.com/gopacket/gopacket/afpacket"
	"golang.org/x/sys/unix"

	"github.com/tickwire/tickwire/link/frame"
)

// Source is a live capture from one interface through an AF_PACKET
// TPACKET_V2 ring. It implements frame.Source.
//
// ReadFrames must not be called from several goroutines at once; Close and
// Stats may be called from any goroutine, also while ReadFrames is blocked.
//
// Lock order:
//
//	mu
//	  gopacket's own TPacket locks
type Source struct {
	iface string
	cfg   Config

	// mu is held for reading by ReadFrames and Stats while they use tp, and
	// for writing by Close, so the ring is never unmapped under a reader.
	mu sync.RWMutex
	// +checklocks:mu
	tp      *gafpacket.TPacket
	ringFD  int // owned by tp; only polled here
	wakeFD  int // eventfd that Close signals
	closing atomic.Bool

	frames      atomic.Uint64
	truncated   atomic.Uint64
	kernelDrops atomic.Uint64
}

// New opens a capture on the interface named iface. It needs root or
// CAP_NET_RAW. Close releases the ring and, with Config.Promiscuous, ends
// promiscuous mode.
func New(iface string, cfg Config) (*Source, error) {
	fail := func(err error) (*Source, error) {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			err = fmt.Errorf("%w (AF_PACKET capture needs root or CAP_NET_RAW)", err)
		}
		return nil, &Error{Op: "open", Interface: iface, Err: err}
	}
	if iface == "" {
		return fail(errors.New("no interface name"))
	}
	if _, err := net.InterfaceByName(iface); err != nil {
		return fail(err)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return fail(err)
	}
	blockSize, numBlocks := ringGeometry(cfg.FrameSize, cfg.RingFrames, unix.Getpagesize())
	tp, err := gafpacket.NewTPacket(
		gafpacket.OptInterface(iface),
		gafpacket.TPacketVersion2,
		gafpacket.OptFrameSize(cfg.FrameSize),
		gafpacket.OptBlockSize(blockSize),
		gafpacket.OptNumBlocks(numBlocks),
		// A zero poll timeout makes gopacket's read non-blocking: this
		// package does the waiting (see the package doc).
		gafpacket.OptPollTimeout(0),
		gafpacket.OptAddVLANHeader(cfg.KeepVLANTags),
	)
	if err != nil {
		return fail(err)
	}
	ringFD, err := socketFD(tp)
	if err != nil {
		tp.Close()
		return fail(err)
	}
	if cfg.Promiscuous {
		if err := tp.SetPromiscuous(true); err != nil {
			tp.Close()
			return fail(fmt.Errorf("promiscuous mode: %w", err))
		}
	}
	wakeFD, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		tp.Close()
		return fail(fmt.Errorf("eventfd: %w", err))
	}
	return &Source{iface: iface, cfg: cfg, tp: tp, ringFD: ringFD, wakeFD: wakeFD}, nil
}

func (c Config) withDefaults() (Config, error) {
	if c.FrameSize == 0 {
		c.FrameSize = DefaultFrameSize
	}
	if c.RingFrames == 0 {
		c.RingFrames = DefaultRingFrames
	}
	switch {
	case c.FrameSize < 256 || c.FrameSize%unix.TPACKET_ALIGNMENT != 0:
		return c, fmt.Errorf("frame size %d: want a multiple of %d, at least 256", c.FrameSize, unix.TPACKET_ALIGNMENT)
	case c.FrameSize > 1<<20:
		return c, fmt.Errorf("frame size %d: larger than 1 MiB", c.FrameSize)
	case c.RingFrames < 1:
		return c, fmt.Errorf("ring frames %d: want at least 1", c.RingFrames)
	case int64(c.RingFrames)*int64(c.FrameSize) > 1<<30:
		return c, fmt.Errorf("ring of %d frames of %d bytes: larger than 1 GiB", c.RingFrames, c.FrameSize)
	case c.ReadTimeout < 0:
		return c, fmt.Errorf("negative read timeout %v", c.ReadTimeout)
	}
	return c, nil
}

// ringGeometry picks a block size that is a multiple of both the page size
// and the frame size (the kernel's rule: frames never straddle blocks), at
// least 128 KiB so the block count stays small, and enough blocks for at
// least ringFrames frames.
func ringGeometry(frameSize, ringFrames, pageSize int) (blockSize, numBlocks int) {
	blockSize = frameSize / gcd(frameSize, pageSize) * pageSize
	if blockSize < 128<<10 {
		blockSize *= (128<<10 + blockSize - 1) / blockSize
	}
	perBlock := blockSize / frameSize
	numBlocks = (ringFrames + perBlock - 1) / perBlock
	return blockSize, numBlocks
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// socketFD returns the descriptor of the ring's socket, which gopacket does
// not export. Reading an unexported int field with reflection is allowed and
// needs no unsafe; if a gopacket upgrade renames the field, New fails here
// and TestLiveCapture says so.
func socketFD(tp *gafpacket.TPacket) (int, error) {
	v := reflect.ValueOf(tp).Elem().FieldByName("fd")
	if !v.IsValid() || v.Kind() != reflect.Int {
		return -1, errors.New("cannot find the socket descriptor in gopacket's TPacket (gopacket changed?)")
	}
	fd := int(v.Int())
	if fd < 0 {
		return -1, errors.New("gopacket's TPacket has no open socket")
	}
	return fd, nil
}

// ReadFrames implements frame.Source.ReadFrames. It copies every frame that
// is ready in the ring, up to len(frames), into the caller's buffers and
// returns without waiting for more; only when the ring is empty does it
// block, until a frame arrives, Config.ReadTimeout passes (0, ErrTimeout) or
// Close is called (0, io.EOF). It allocates nothing (unless
// Config.KeepVLANTags re-inserts a tag).
func (s *Source) ReadFrames(frames []frame.Frame) (int, error) {
	// Configuration and errors are handled outside the lock: only the ring
	// needs it.
	var deadline time.Time
	if s.cfg.ReadTimeout > 0 {
		deadline = time.Now().Add(s.cfg.ReadTimeout)
	}
	s.mu.RLock()
	n, res, err := s.readLocked(frames, deadline)
	s.mu.RUnlock()
	s.frames.Add(uint64(n))
	switch res {
	case readClosed:
		return 0, io.EOF
	case readTimeout:
		return 0, ErrTimeout
	case readFailed:
		return n, &Error{Op: "read", Interface: s.iface, Err: err}
	}
	return n, nil
}

type readResult int

const (
	readOK readResult = iota
	readClosed
	readTimeout
	readFailed
)

// readLocked fills frames from the ring, waiting (until deadline when not
// zero) only while it has nothing to return.
//
// +checklocksread:s.mu
func (s *Source) readLocked(frames []frame.Frame, deadline time.Time) (int, readResult, error) {
	if s.closing.Load() {
		return 0, readClosed, nil
	}
	n := 0
	for n < len(frames) {
		data, ci, err := s.tp.ZeroCopyReadPacketData()
		if err == nil {
			f := &frames[n]
			f.N = copy(f.Buf, data)
			f.WireLen = max(ci.Length, len(data))
			f.Time = ci.Timestamp.UnixNano()
			f.LinkType = frame.LinkTypeEthernet
			f.ChecksumVerified = false // TP_STATUS_CSUM_VALID does not reach gopacket's CaptureInfo
			if f.Truncated() {
				s.truncated.Add(1)
			}
			n++
			continue
		}
		if err != gafpacket.ErrTimeout {
			return n, readFailed, err
		}
		if n > 0 {
			break // the ring is drained: hand over what we have now
		}
		ready, err := s.wait(deadline)
		switch {
		case s.closing.Load():
			return 0, readClosed, nil
		case err != nil:
			return 0, readFailed, err
		case !ready:
			return 0, readTimeout, nil
		}
	}
	return n, readOK, nil
}

// wait blocks until the ring socket or the wake eventfd is readable, or the
// deadline (when not zero) passes; ready is false on the deadline.
func (s *Source) wait(deadline time.Time) (ready bool, err error) {
	for {
		timeoutMs := -1
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return false, nil
			}
			timeoutMs = int((left + time.Millisecond - 1) / time.Millisecond)
		}
		fds := [2]unix.PollFd{
			{Fd: int32(s.ringFD), Events: unix.POLLIN},
			{Fd: int32(s.wakeFD), Events: unix.POLLIN},
		}
		n, err := unix.Poll(fds[:], timeoutMs)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return false, fmt.Errorf("poll: %w", err)
		case n == 0:
			continue // the deadline check above decides
		case fds[0].Revents&(unix.POLLERR|unix.POLLNVAL) != 0:
			return false, fmt.Errorf("poll: socket error (revents %#x)", fds[0].Revents)
		}
		return true, nil
	}
}

// Close implements frame.Source.Close. It wakes a blocked ReadFrames, which
// returns io.EOF, waits for it to leave, and releases the ring. Calling it
// again does nothing.
func (s *Source) Close() error {
	if s.closing.Swap(true) {
		return nil
	}
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, werr := unix.Write(s.wakeFD, one[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updateKernelDrops()
	s.tp.Close()
	cerr := unix.Close(s.wakeFD)
	if werr != nil {
		return &Error{Op: "close", Interface: s.iface, Err: werr}
	}
	if cerr != nil {
		return &Error{Op: "close", Interface: s.iface, Err: cerr}
	}
	return nil
}

// Stats returns the counters. KernelDrops is read from the socket while the
// Source is open and frozen at Close.
func (s *Source) Stats() Stats {
	s.mu.RLock()
	if !s.closing.Load() {
		s.updateKernelDrops()
	}
	s.mu.RUnlock()
	return Stats{
		Frames:      s.frames.Load(),
		Truncated:   s.truncated.Load(),
		KernelDrops: s.kernelDrops.Load(),
	}
}

// updateKernelDrops reads PACKET_STATISTICS, which gopacket accumulates
// (the kernel clears it on every read).
//
// +checklocksread:s.mu
func (s *Source) updateKernelDrops() {
	if v2, _, err := s.tp.SocketStats(); err == nil {
		s.kernelDrops.Store(uint64(v2.Drops()))
	}
}
