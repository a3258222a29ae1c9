//go:build linux && (amd64 || arm64)

package afxdp

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// ring is the part shared by the four rings: the kernel's producer,
// consumer and flags words, and our cached copies of the indexes. Each
// ring has one producer and one consumer, one of them the kernel; the
// other is one goroutine at a time (the reader for fill and RX, the holder
// of socket.txMu for TX and completion).
type ring struct {
	mem                []byte // the mapping, unmapped by socket.close
	producer, consumer *atomic.Uint32
	flags              *atomic.Uint32
	mask, size         uint32
	cachedProd         uint32 // our producer index, or the kernel's as last read
	cachedCons         uint32 // our consumer index, or the kernel's as last read
}

// available returns how many entries the kernel produced that we have not
// consumed; it reads the kernel's producer index (acquire) only when the
// cached one shows none.
func (r *ring) available() uint32 {
	if n := r.cachedProd - r.cachedCons; n > 0 {
		return n
	}
	r.cachedProd = r.producer.Load()
	return r.cachedProd - r.cachedCons
}

// release hands n consumed entries back to the kernel (a release store
// after the entries were read).
func (r *ring) release(n uint32) {
	r.cachedCons += n
	r.consumer.Store(r.cachedCons)
}

// free returns how many entries we may produce; it reads the kernel's
// consumer index only when the cached one shows fewer than want.
func (r *ring) free(want uint32) uint32 {
	if n := r.size - (r.cachedProd - r.cachedCons); n >= want {
		return n
	}
	r.cachedCons = r.consumer.Load()
	return r.size - (r.cachedProd - r.cachedCons)
}

// submit publishes the entries produced since the last submit (a release
// store after they were written).
func (r *ring) submit() { r.producer.Store(r.cachedProd) }

// needsWakeup reports whether the kernel asked for a system call to look
// at the ring (XDP_RING_NEED_WAKEUP).
func (r *ring) needsWakeup() bool { return r.flags.Load()&unix.XDP_RING_NEED_WAKEUP != 0 }

// socket is one AF_XDP socket bound to one queue, with its UMEM and rings.
//
// The UMEM holds 2*n frames of frameSize bytes: [0, n) are receive frames,
// always either in the fill ring, with the kernel, in the RX ring or being
// copied out by the reader, which puts each back in the fill ring (n
// entries: never full); [n, 2n) are send frames, free (txFree), in the TX
// ring or with the kernel until the completion ring (n entries) returns
// them.
//
// The reader methods (receive, wait) are called by one goroutine at a
// time; send takes txMu; close is called once, after both stopped.
type socket struct {
	fd         int
	queue      int
	umem       []byte
	frameSize  uint32
	n          uint32 // receive frames = send frames = entries per ring
	zeroCopy   bool
	needWakeup bool

	// The fill and RX rings belong to the reader.
	fill      ring
	rx        ring
	fillSlots []uint64
	rxSlots   []unix.XDPDesc

	// The TX and completion rings, and their slots, are used only with
	// txMu held (after openSocket).
	tx        ring
	comp      ring
	txSlots   []unix.XDPDesc
	compSlots []uint64

	rxFrames    atomic.Uint64
	rxBytes     atomic.Uint64
	rxTruncated atomic.Uint64
	rxInvalid   atomic.Uint64
	txFrames    atomic.Uint64
	txBytes     atomic.Uint64
	txDropped   atomic.Uint64

	txMu sync.Mutex
	// +checklocks:txMu
	txFree []uint64
	// +checklocks:txMu
	txClosed bool

	statsMu sync.Mutex
	// +checklocks:statsMu
	lastStats unix.XDPStatistics // frozen at close
	// +checklocks:statsMu
	closedStats bool
}

// openError maps a setup errno to the package's causes.
func openError(step string, err error) error {
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("%s: %w: %w", step, ErrPermission, err)
	case errors.Is(err, unix.EAFNOSUPPORT):
		return fmt.Errorf("%s: %w: %w", step, ErrNoKernelSupport, err)
	}
	return fmt.Errorf("%s: %w", step, err)
}

// openSocket creates a socket for queue q of interface ifindex with n
// receive and n send frames, maps its rings and binds it.
func openSocket(ifindex, q int, cfg *Config) (_ *socket, err error) {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, openError("socket", err)
	}
	s := &socket{fd: fd, queue: q, frameSize: uint32(cfg.FrameSize), n: uint32(cfg.RingFrames)}
	defer func() {
		if err != nil {
			s.unmap()
		}
	}()
	size := 2 * int(s.n) * int(s.frameSize)
	s.umem, err = unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, openError(fmt.Sprintf("map %d bytes of UMEM", size), err)
	}
	if err := registerUMEM(fd, s.umem, s.frameSize); err != nil {
		if errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.ENOMEM) {
			err = fmt.Errorf("%w (RLIMIT_MEMLOCK too low for %d bytes of UMEM? root has CAP_IPC_LOCK)", err, size)
		}
		return nil, openError("register UMEM", err)
	}
	for _, o := range []struct {
		opt  int
		name string
	}{{unix.XDP_UMEM_FILL_RING, "fill ring"}, {unix.XDP_UMEM_COMPLETION_RING, "completion ring"}, {unix.XDP_RX_RING, "RX ring"}, {unix.XDP_TX_RING, "TX ring"}} {
		if err := unix.SetsockoptInt(fd, unix.SOL_XDP, o.opt, int(s.n)); err != nil {
			return nil, openError("size "+o.name, err)
		}
	}
	off, err := mmapOffsets(fd)
	if err != nil {
		return nil, openError("XDP_MMAP_OFFSETS", err)
	}
	mapRing := func(r *ring, o unix.XDPRingOffset, pgoff int64, desc bool, name string) error {
		mem, err := unix.Mmap(fd, pgoff, ringBytes(o, s.n, desc), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			return openError("map "+name, err)
		}
		r.setWords(mem, o, s.n)
		return nil
	}
	if err := mapRing(&s.fill, off.Fr, unix.XDP_UMEM_PGOFF_FILL_RING, false, "fill ring"); err != nil {
		return nil, err
	}
	s.fillSlots = addrSlots(s.fill.mem, off.Fr, s.n)
	if err := mapRing(&s.comp, off.Cr, unix.XDP_UMEM_PGOFF_COMPLETION_RING, false, "completion ring"); err != nil {
		return nil, err
	}
	s.compSlots = addrSlots(s.comp.mem, off.Cr, s.n)
	if err := mapRing(&s.rx, off.Rx, unix.XDP_PGOFF_RX_RING, true, "RX ring"); err != nil {
		return nil, err
	}
	s.rxSlots = descSlots(s.rx.mem, off.Rx, s.n)
	if err := mapRing(&s.tx, off.Tx, unix.XDP_PGOFF_TX_RING, true, "TX ring"); err != nil {
		return nil, err
	}
	s.txSlots = descSlots(s.tx.mem, off.Tx, s.n)

	// Every receive frame goes to the fill ring before the bind, so the
	// first frame finds one.
	for i := uint32(0); i < s.n; i++ {
		s.fillSlots[(s.fill.cachedProd+i)&s.fill.mask] = uint64(i) * uint64(s.frameSize)
	}
	s.fill.cachedProd += s.n
	s.fill.submit()
	s.txMu.Lock()
	s.txFree = make([]uint64, 0, s.n)
	for i := s.n; i < 2*s.n; i++ {
		s.txFree = append(s.txFree, uint64(i)*uint64(s.frameSize))
	}
	s.txMu.Unlock()

	if err := s.bind(ifindex, cfg.Copy); err != nil {
		return nil, err
	}
	return s, nil
}

// bindBusyWait is how long bind retries a queue another socket holds: the
// kernel releases a closed socket's hold on its queue in a deferred work
// item, so a socket closed just before (by this process, or a Close and
// New in a row) can hold it for a moment.
const bindBusyWait = 2 * time.Second

// bind binds the socket, asking for need_wakeup and zero-copy and falling
// back to what the kernel and driver have.
func (s *socket) bind(ifindex int, copyOnly bool) error {
	tries := []uint16{unix.XDP_USE_NEED_WAKEUP, unix.XDP_USE_NEED_WAKEUP | unix.XDP_COPY, unix.XDP_COPY, 0}
	if copyOnly {
		tries = []uint16{unix.XDP_USE_NEED_WAKEUP | unix.XDP_COPY, unix.XDP_COPY}
	}
	step := fmt.Sprintf("bind queue %d", s.queue)
	var err error
	for _, flags := range tries {
		sa := &unix.SockaddrXDP{Flags: flags, Ifindex: uint32(ifindex), QueueID: uint32(s.queue)}
		err = unix.Bind(s.fd, sa)
		for wait, start := time.Millisecond, time.Now(); errors.Is(err, unix.EBUSY) && time.Since(start) < bindBusyWait; wait = min(2*wait, 100*time.Millisecond) {
			time.Sleep(wait)
			err = unix.Bind(s.fd, sa)
		}
		if err == nil {
			s.needWakeup = flags&unix.XDP_USE_NEED_WAKEUP != 0
			if opts, err := unix.GetsockoptInt(s.fd, unix.SOL_XDP, unix.XDP_OPTIONS); err == nil {
				s.zeroCopy = opts&unix.XDP_OPTIONS_ZEROCOPY != 0
			}
			return nil
		}
		if errors.Is(err, unix.EBUSY) {
			return openError(step, fmt.Errorf("%w (another AF_XDP socket has this queue)", err))
		}
		if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOTSUP) {
			return openError(step, err)
		}
	}
	if errors.Is(err, unix.EINVAL) && s.queue > 0 {
		// Every flag combination refused: what is left is the queue
		// (the kernel checks it against the active receive queues,
		// which rtnetlink does not report).
		return openError(step, fmt.Errorf("%w: the kernel refused queue %d (%w): the interface has fewer active receive queues (ethtool -l)", ErrQueueRange, s.queue, err))
	}
	return openError(step, err)
}

// receive takes up to max frames from the RX ring, calls handle for each
// with its bytes (valid only during the call), puts their frames back in
// the fill ring, and returns how many it took. It never blocks.
func (s *socket) receive(max int, handle func(b []byte)) int {
	n := s.rx.available()
	if n == 0 {
		return 0
	}
	if n > uint32(max) {
		n = uint32(max)
	}
	rxEnd := uint64(s.n) * uint64(s.frameSize)
	fmask := ^(uint64(s.frameSize) - 1)
	for i := uint32(0); i < n; i++ {
		d := s.rxSlots[(s.rx.cachedCons+i)&s.rx.mask]
		base := d.Addr & fmask
		if d.Addr >= rxEnd || d.Addr+uint64(d.Len) > base+uint64(s.frameSize) {
			// Not one of our receive frames, or crossing its end: a
			// kernel bug or a corrupted ring. Count it; if the base is
			// a receive frame it goes back, else it is not ours.
			s.rxInvalid.Add(1)
			if base >= rxEnd {
				continue
			}
		} else if d.Len < 14 {
			s.rxInvalid.Add(1)
		} else {
			handle(s.umem[d.Addr : d.Addr+uint64(d.Len)])
		}
		// The fill ring has room for every receive frame (see socket).
		s.fillSlots[s.fill.cachedProd&s.fill.mask] = base
		s.fill.cachedProd++
	}
	s.rx.release(n)
	s.fill.submit()
	if s.needWakeup && s.fill.needsWakeup() {
		wakeFill(s.fd)
	}
	return int(n)
}

// reserveLocked returns a free send frame for a frame of size bytes, to
// be filled and then queued with commitLocked; ok is false, and a drop
// counted, when the frame does not fit one or none is free even after the
// kernel was made to send what it holds.
//
// +checklocks:s.txMu
func (s *socket) reserveLocked(size int) (dst []byte, ok bool) {
	if s.txClosed {
		return nil, false
	}
	if size > int(s.frameSize) {
		s.txDropped.Add(1)
		return nil, false
	}
	if len(s.txFree) == 0 || s.tx.free(1) == 0 {
		s.reclaimLocked()
		if len(s.txFree) == 0 || s.tx.free(1) == 0 {
			s.tx.submit()
			s.kickLocked()
			s.reclaimLocked()
			if len(s.txFree) == 0 || s.tx.free(1) == 0 {
				s.txDropped.Add(1)
				return nil, false
			}
		}
	}
	addr := s.txFree[len(s.txFree)-1]
	return s.umem[addr : addr+uint64(size)], true
}

// commitLocked queues the frame reserveLocked returned, its first n bytes.
//
// +checklocks:s.txMu
func (s *socket) commitLocked(n int) {
	addr := s.txFree[len(s.txFree)-1]
	s.txFree = s.txFree[:len(s.txFree)-1]
	s.txSlots[s.tx.cachedProd&s.tx.mask] = unix.XDPDesc{Addr: addr, Len: uint32(n)}
	s.tx.cachedProd++
	s.txFrames.Add(1)
	s.txBytes.Add(uint64(n))
}

// flushLocked publishes the queued TX entries and kicks the kernel when it
// needs a kick (always in copy mode; in zero-copy mode when it asked).
//
// +checklocks:s.txMu
func (s *socket) flushLocked() {
	s.tx.submit()
	s.kickLocked()
	s.reclaimLocked()
}

// +checklocks:s.txMu
func (s *socket) kickLocked() {
	if s.zeroCopy && s.needWakeup && !s.tx.needsWakeup() {
		return
	}
	for range 3 {
		switch kick(s.fd) {
		case 0, unix.EAGAIN, unix.EBUSY, unix.ENOBUFS:
			// Sent, or the kernel will get to the rest on the next kick.
			return
		case unix.EINTR:
			continue
		default:
			return // ENETDOWN and the like: the frames stay queued
		}
	}
}

// reclaimLocked returns the send frames the kernel finished with.
//
// +checklocks:s.txMu
func (s *socket) reclaimLocked() {
	n := s.comp.available()
	if n == 0 {
		return
	}
	fmask := ^(uint64(s.frameSize) - 1)
	lo, hi := uint64(s.n)*uint64(s.frameSize), 2*uint64(s.n)*uint64(s.frameSize)
	for i := uint32(0); i < n; i++ {
		addr := s.compSlots[(s.comp.cachedCons+i)&s.comp.mask] & fmask
		if addr < lo || addr >= hi || len(s.txFree) == cap(s.txFree) {
			s.rxInvalid.Add(1) // not a send frame of ours
			continue
		}
		s.txFree = append(s.txFree, addr)
	}
	s.comp.release(n)
}

// kernelStats returns XDP_STATISTICS, frozen at close.
func (s *socket) kernelStats() unix.XDPStatistics {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	if !s.closedStats {
		if st, err := statistics(s.fd); err == nil {
			s.lastStats = st
		}
	}
	return s.lastStats
}

// close releases the socket: the caller has stopped the reader and holds
// no send in progress.
func (s *socket) close() {
	s.kernelStats()
	s.statsMu.Lock()
	s.closedStats = true
	s.statsMu.Unlock()
	s.txMu.Lock()
	s.txClosed = true
	s.txMu.Unlock()
	s.unmap()
}

// unmap closes the descriptors and unmaps what was mapped.
func (s *socket) unmap() {
	for _, r := range []*ring{&s.fill, &s.comp, &s.rx, &s.tx} {
		if r.mem != nil {
			unix.Munmap(r.mem)
			r.mem = nil
		}
	}
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
	if s.umem != nil {
		unix.Munmap(s.umem) // after the socket: the kernel unpins it then
		s.umem = nil
	}
}
