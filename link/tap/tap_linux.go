//go:build linux

package tap

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/tickwire/tickwire/internal/rxclock"
	"github.com/tickwire/tickwire/link/internal/linkbase"
)

// frameSlack is what a read buffer holds beyond MTU + Ethernet header: room
// for one VLAN tag, plus one byte so that a longer frame, which the device
// would cut to the buffer, is recognised and dropped.
const frameSlack = 4 + 1

// Endpoint is a stack.LinkEndpoint on a TAP device. The stack side sends
// and receives Ethernet II frames; MTU reports the device's IP MTU.
//
// While a stack is attached, one goroutine reads the device and delivers
// each frame inline to the stack, in a buffer the packet then owns: a TSO
// segment of 32 KiB or more that follows another in the 64 KiB buffer it
// was read into, any other frame copied into a buffer of its own size.
// Attach(nil), which the stack does when it removes the link, stops it;
// Close joins it. Frames addressed to another unicast MAC are dropped and
// counted, as a NIC outside promiscuous mode does. WritePackets copies each
// frame into one reused buffer and writes it with one system call; a frame
// the device refuses (queue full, device down) is dropped and counted, never
// blocking the stack. All methods are safe for concurrent use.
//
// Lock order:
//
//	runMu
//	  writeMu
type Endpoint struct {
	linkbase.Endpoint

	name    string
	mac     net.HardwareAddr
	created bool
	gso     bool     // Config.NoTSO unset: TSO both ways
	file    *os.File // the device, read through the runtime poller

	writeMu sync.Mutex
	// +checklocks:writeMu
	fd int // the same descriptor, written with write(2)
	// +checklocks:writeMu
	writeBuf []byte
	// +checklocks:writeMu
	writeClosed bool

	runMu sync.Mutex
	// +checklocks:runMu
	readerDone chan struct{} // nil when no reader runs
	// +checklocks:runMu
	closed   bool
	stopping atomic.Bool // tells the reader that a deadline means stop

	// busyPoll (nanoseconds) is how long the reader retries a read that
	// found nothing before it parks in the runtime poller; 0: it parks at
	// once.
	busyPoll atomic.Int64
	// lockThread asks the reader to lock itself to its OS thread.
	lockThread atomic.Bool

	stats struct {
		rxFrames, rxBytes, rxOtherHost, rxTooLong, rxErrors atomic.Uint64
		rxDropped                                           [rxVerdicts]atomic.Uint64 // by checkFrame's verdict
		txFrames, txBytes, txDropped                        atomic.Uint64
	}
}

var (
	_ stack.LinkEndpoint = (*Endpoint)(nil)
	_ stack.GSOEndpoint  = (*Endpoint)(nil)
)

// writeBufLen is the size of the write buffer for an IP MTU of mtu: one
// frame and its virtio-net header, room for a VLAN tag, and with TSO a
// segment of up to maxGSOPacket bytes.
func (e *Endpoint) writeBufLen(mtu int) int {
	if e.gso {
		mtu = max(mtu, maxGSOPacket)
	}
	return vnetHdrLen + linkbase.HeaderLength + mtu + 4
}

// New opens the TAP device cfg.Name, creating it if it does not exist, and
// configures it as described in the package documentation. Errors name the
// step that failed; EPERM means the process lacks CAP_NET_ADMIN.
func New(cfg Config) (*Endpoint, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	mac := cfg.MAC
	if mac == nil {
		mac = make(net.HardwareAddr, 6)
		rand.Read(mac)
		mac[0] = mac[0]&^1 | 2 // unicast, locally administered
	}
	_, statErr := net.InterfaceByName(cfg.Name)

	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("tap: open /dev/net/tun: %w", err)
	}
	e := &Endpoint{name: cfg.Name, mac: mac, created: statErr != nil, fd: fd}
	if err := configure(fd, cfg); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if e.created {
		if err := setNoQueue(cfg.Name); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	// A non-blocking descriptor makes an os.File the runtime poller serves,
	// so a read deadline can interrupt the reader.
	e.file = os.NewFile(uintptr(fd), "/dev/net/tun:"+cfg.Name)
	e.Init(tcpip.LinkAddress(mac), uint32(cfg.MTU))
	e.gso = !cfg.NoTSO
	e.writeBuf = make([]byte, e.writeBufLen(cfg.MTU))
	return e, nil
}

// configure attaches fd to the device and sets MTU, address and flags.
func configure(fd int, cfg Config) error {
	ifr, err := unix.NewIfreq(cfg.Name)
	if err != nil {
		return fmt.Errorf("tap: %s: %w", cfg.Name, err)
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		return fmt.Errorf("tap: %s: TUNSETIFF: %w", cfg.Name, err)
	}
	offload := tunFCsum
	if !cfg.NoTSO {
		offload |= tunFTSO4
	}
	if err := unix.IoctlSetInt(fd, tunSetOffload, offload); err != nil {
		return fmt.Errorf("tap: %s: TUNSETOFFLOAD: %w", cfg.Name, err)
	}

	// Interface ioctls go through any socket of the device's namespace.
	sock, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("tap: socket: %w", err)
	}
	defer unix.Close(sock)
	ioctl := func(step string, req uint, set func(*unix.Ifreq) error) (*unix.Ifreq, error) {
		r, _ := unix.NewIfreq(cfg.Name)
		if set != nil {
			if err := set(r); err != nil {
				return nil, fmt.Errorf("tap: %s: %s: %w", cfg.Name, step, err)
			}
		}
		if err := unix.IoctlIfreq(sock, req, r); err != nil {
			return nil, fmt.Errorf("tap: %s: %s: %w", cfg.Name, step, err)
		}
		return r, nil
	}
	if _, err := ioctl("set MTU", unix.SIOCSIFMTU, func(r *unix.Ifreq) error { r.SetUint32(uint32(cfg.MTU)); return nil }); err != nil {
		return err
	}
	if cfg.Host.IsValid() {
		addr := cfg.Host.Addr().As4()
		mask := net.CIDRMask(cfg.Host.Bits(), 32)
		if _, err := ioctl("set address", unix.SIOCSIFADDR, func(r *unix.Ifreq) error { return r.SetInet4Addr(addr[:]) }); err != nil {
			return err
		}
		if _, err := ioctl("set netmask", unix.SIOCSIFNETMASK, func(r *unix.Ifreq) error { return r.SetInet4Addr(mask) }); err != nil {
			return err
		}
	}
	flags, err := ioctl("get flags", unix.SIOCGIFFLAGS, nil)
	if err != nil {
		return err
	}
	up := flags.Uint16() | unix.IFF_UP | unix.IFF_RUNNING
	if _, err := ioctl("bring up", unix.SIOCSIFFLAGS, func(r *unix.Ifreq) error { r.SetUint16(up); return nil }); err != nil {
		return err
	}
	return nil
}

// Name returns the device name.
func (e *Endpoint) Name() string { return e.name }

// MAC returns the stack side's Ethernet address: give it to the stack as
// its own address.
func (e *Endpoint) MAC() net.HardwareAddr { return e.mac }

// Created reports whether New created the device, in which case it
// disappears when the endpoint closes.
func (e *Endpoint) Created() bool { return e.created }

// Stats returns the endpoint's counters.
func (e *Endpoint) Stats() Stats {
	s := &e.stats
	return Stats{
		RxFrames: s.rxFrames.Load(), RxBytes: s.rxBytes.Load(), RxOtherHost: s.rxOtherHost.Load(),
		RxTooLong: s.rxTooLong.Load(), RxErrors: s.rxErrors.Load() + s.rxDropped[rxMalformed].Load(),
		RxBadIPv4Checksum: s.rxDropped[rxBadIPv4].Load(), RxBadTCPChecksum: s.rxDropped[rxBadTCP].Load(),
		RxBadUDPChecksum: s.rxDropped[rxBadUDP].Load(), RxBadICMPChecksum: s.rxDropped[rxBadICMP].Load(),
		TxFrames: s.txFrames.Load(), TxBytes: s.txBytes.Load(), TxDropped: s.txDropped.Load(),
	}
}

// Attach implements stack.LinkEndpoint.Attach: a dispatcher starts the
// reader; nil asks it to stop after the frame it may be delivering, without
// waiting for it (Close joins it). Waiting here could deadlock: netstack
// detaches with its stack lock held, and the frame being delivered may need
// that lock.
func (e *Endpoint) Attach(d stack.NetworkDispatcher) {
	e.Endpoint.Attach(d)
	e.runMu.Lock()
	defer e.runMu.Unlock()
	if d == nil {
		e.stopReaderLocked()
		return
	}
	if e.closed {
		return
	}
	if e.readerDone != nil {
		if !e.stopping.Load() {
			return // already reading
		}
		<-e.readerDone // re-attached while the old reader winds down
	}
	e.stopping.Store(false)
	e.file.SetReadDeadline(time.Time{})
	done := make(chan struct{})
	e.readerDone = done
	go e.read(done)
}

// stopReaderLocked asks the reader to stop, without waiting for it.
//
// +checklocks:e.runMu
func (e *Endpoint) stopReaderLocked() {
	if e.readerDone == nil || e.stopping.Load() {
		return
	}
	e.stopping.Store(true)
	e.file.SetReadDeadline(time.Now()) // wakes a blocked read
}

// Capabilities implements stack.LinkEndpoint.Capabilities: checksums of
// received frames are verified by the endpoint or trusted from the kernel
// (see vnet_linux.go), so the stack verifies none.
func (e *Endpoint) Capabilities() stack.LinkEndpointCapabilities {
	return e.Endpoint.Capabilities() | stack.CapabilityRXChecksumOffload
}

// SupportedGSO implements stack.GSOEndpoint.SupportedGSO: HostGSOSupported
// (the kernel segments what the stack sends; see vnet_linux.go) unless
// Config.NoTSO is set.
func (e *Endpoint) SupportedGSO() stack.SupportedGSO {
	if e.gso {
		return stack.HostGSOSupported
	}
	return stack.GSONotSupported
}

// GSOMaxSize implements stack.GSOEndpoint.GSOMaxSize: the largest TCP
// segment the stack may hand over with TSO, 64 KiB (0 with Config.NoTSO).
func (e *Endpoint) GSOMaxSize() uint32 {
	if e.gso {
		return maxGSOPacket
	}
	return 0
}

// RxChecksumDrops implements link.ChecksumDropCounter: the frames dropped
// for a wrong checksum, by kind (Stats has them too).
func (e *Endpoint) RxChecksumDrops() (ipv4, tcp, udp, icmp uint64) {
	d := &e.stats.rxDropped
	return d[rxBadIPv4].Load(), d[rxBadTCP].Load(), d[rxBadUDP].Load(), d[rxBadICMP].Load()
}

// Wait implements stack.LinkEndpoint.Wait. It does not block: netstack
// calls it with its stack lock held, which the reader may need to finish
// delivering a frame. Close joins the reader.
func (*Endpoint) Wait() {}

// SetBusyPoll makes the reader retry a read that finds no frame, with
// non-blocking read(2) calls, for up to d before it parks in the runtime
// poller (0, the default, parks at once). The reader never blocks a P in a
// syscall either way; busy-polling saves the poller's wake-up (a few to tens
// of microseconds) per frame that arrives within d, at the cost of keeping a
// core busy for up to d after every frame. It implements link.BusyPoller:
// tickwire's latency mode (Config.Latency) calls it with Config.BusyPoll.
func (e *Endpoint) SetBusyPoll(d time.Duration) { e.busyPoll.Store(int64(max(d, 0))) }

// SetLockOSThread has the reader lock itself to its OS thread
// (runtime.LockOSThread) before it reads its next frame (true), or unlock
// (false, the default). It implements link.ThreadLocker: tickwire's
// Config.LockOSThread calls it. A locked reader that parks waits for the
// wake-up of its own thread rather than of any; see Config.LockOSThread for
// what that costs.
func (e *Endpoint) SetLockOSThread(lock bool) { e.lockThread.Store(lock) }

// spinReader is the reader's state for the runtime poller's callback, made
// once per reader so that the callback does not allocate per frame.
type spinReader struct {
	e      *Endpoint
	raw    syscall.RawConn
	buf    []byte
	iov    []unix.Iovec // the read is readv(2) into these instead of buf while vec is set
	vec    bool
	n      int
	err    error
	budget time.Duration
	readFn func(fd uintptr) bool
}

// poll is the syscall.RawConn.Read callback: a non-blocking read, retried
// while SetBusyPoll's budget lasts, until a frame or an error other than
// EAGAIN (false sends the reader to the poller, which waits for
// readability and calls it again).
//
// The read is a raw system call: the descriptor never blocks, so the
// runtime's bookkeeping for a system call that might (handing the P to
// another thread if it takes long) is pure cost, paid twice per frame
// (the read with the frame and the one that finds the queue empty).
func (r *spinReader) poll(fd uintptr) bool {
	var start time.Time
	for {
		if r.vec {
			r.n, r.err = rawReadv(fd, r.iov)
		} else {
			r.n, r.err = rawRead(fd, r.buf)
		}
		if r.err != unix.EAGAIN {
			return true
		}
		if r.budget == 0 {
			return false
		}
		if start.IsZero() {
			start = time.Now()
		} else if time.Since(start) > r.budget || r.e.stopping.Load() {
			return false
		}
		runtime.Gosched()
	}
}

// rawRead is read(2) without the runtime's system call bookkeeping; fd must
// be non-blocking.
func rawRead(fd uintptr, b []byte) (int, error) {
	n, _, errno := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// rawReadv is readv(2) without the runtime's system call bookkeeping; fd
// must be non-blocking.
func rawReadv(fd uintptr, iov []unix.Iovec) (int, error) {
	n, _, errno := unix.RawSyscall(unix.SYS_READV, fd, uintptr(unsafe.Pointer(unsafe.SliceData(iov))), uintptr(len(iov)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// rawWrite is write(2) without the runtime's system call bookkeeping; fd
// must be non-blocking. A write to the device runs the kernel's receive
// path for the frame before it returns, a few microseconds, during which
// this goroutine keeps its P, as it would computing.
func rawWrite(fd int, b []byte) error {
	_, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	if errno != 0 {
		return errno
	}
	return nil
}

// readFrame reads one frame into b, busy-polling first when SetBusyPoll
// asked for it.
func (e *Endpoint) readFrame(r *spinReader, b []byte) (int, error) {
	if r.raw == nil {
		return e.file.Read(b)
	}
	r.budget = time.Duration(e.busyPoll.Load())
	r.buf = b
	err := r.raw.Read(r.readFn)
	r.buf = nil

	if err != nil {
		return 0, err
	}
	if r.err != nil {
		return 0, r.err
	}
	if r.n == 0 {
		return 0, io.EOF
	}
	return r.n, nil
}

// handOverFrame is the smallest frame handed to the stack in the view it
// was read into: a frame that fills at least half of the 64 KiB view
// (a TSO segment of a stream with a large window) skips a copy of its
// bytes, and the view it holds while the stack queues it is at most twice
// its size; a smaller frame is copied into a view of its own size.
const handOverFrame = maxGSOPacket / 2

// splitFrame is the size above which a TCP frame's headers get a view of
// their own (see read): only TSO segments, so that frames up to the MTU,
// a round trip's, pay nothing more.
const splitFrame = 4 << 10

// tcpHeadersLen returns the length of the Ethernet, IPv4 and TCP headers
// (options included) at the start of f, or 0 when f is not an unfragmented
// TCP/IPv4 frame whose headers it holds whole.
func tcpHeadersLen(f []byte) int {
	if len(f) < header.EthernetMinimumSize+header.IPv4MinimumSize || header.Ethernet(f).Type() != header.IPv4ProtocolNumber {
		return 0
	}
	ip := header.IPv4(f[header.EthernetMinimumSize:])
	ihl := int(ip.HeaderLength())
	if ip.Protocol() != uint8(header.TCPProtocolNumber) || ihl < header.IPv4MinimumSize || ip.More() || ip.FragmentOffset() != 0 ||
		len(ip) < ihl+header.TCPMinimumSize {
		return 0
	}
	doff := int(header.TCP(ip[ihl:]).DataOffset())
	if doff < header.TCPMinimumSize || len(ip) < ihl+doff {
		return 0
	}
	return header.EthernetMinimumSize + ihl + doff
}

// read delivers frames until stopped or the device fails.
func (e *Endpoint) read(done chan struct{}) {
	defer close(done)
	r := &spinReader{e: e}
	r.readFn = r.poll
	// The device hands over TCP segments of up to maxGSOPacket bytes
	// (TSO4). With the runtime poller's raw descriptor, after a frame of at
	// least handOverFrame bytes the next one is read (readv) into a 64 KiB
	// view from netstack's pool, its virtio-net header into scratch and
	// anything past 64 KiB into tail: a frame of at least handOverFrame
	// bytes is delivered in that view, a smaller one copied into a view of
	// its own size (the big view is then read into again). Other frames,
	// and all without the raw descriptor, are read into scratch and
	// copied: a readv of three buffers costs a small frame's round trip
	// about a microsecond more than a read of one (two calls per frame,
	// one of which finds nothing).
	scratch := make([]byte, vnetHdrLen+linkbase.HeaderLength+maxGSOPacket+frameSlack)
	var tail [linkbase.HeaderLength + frameSlack]byte
	var big *buffer.View
	wantBig := false // the last frame was a large one: read the next into big
	defer func() {
		if big != nil {
			big.Release()
		}
	}()
	if raw, err := e.file.SyscallConn(); err == nil {
		r.raw = raw
		r.iov = make([]unix.Iovec, 3)
		r.iov[0].Base = &scratch[0]
		r.iov[0].SetLen(vnetHdrLen)
		r.iov[2].Base = &tail[0]
		r.iov[2].SetLen(len(tail))
	}
	locked := false
	defer func() {
		if locked {
			runtime.UnlockOSThread()
		}
	}()
	for {
		if lock := e.lockThread.Load(); lock != locked {
			if lock {
				runtime.LockOSThread()
			} else {
				runtime.UnlockOSThread()
			}
			locked = lock
		}
		size := len(scratch)
		if r.vec = r.iov != nil && wantBig; r.vec {
			if big == nil {
				big = buffer.NewViewSize(maxGSOPacket)
			}
			b := big.AsSlice()
			r.iov[1].Base = &b[0]
			r.iov[1].SetLen(len(b))
		}
		n, err := e.readFrame(r, scratch)
		rx := rxclock.Now() // the frame's stamp: when the read returned
		if err != nil {
			if e.stopping.Load() || errors.Is(err, os.ErrClosed) {
				return
			}
			e.stats.rxErrors.Add(1)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return // the device went away (EBADFD, EIO): nothing more to read
		}
		if n == size {
			e.stats.rxTooLong.Add(1)
			continue
		}
		if n < vnetHdrLen {
			e.stats.rxErrors.Add(1)
			continue
		}
		hdr, f := scratch[:vnetHdrLen], scratch[vnetHdrLen:n]
		inBig := false
		if r.vec {
			if fl := n - vnetHdrLen; fl <= maxGSOPacket {
				f, inBig = big.AsSlice()[:fl], true
			} else { // it ran into tail: make it one slice
				copy(scratch[vnetHdrLen:], big.AsSlice())
				copy(scratch[vnetHdrLen+maxGSOPacket:], tail[:fl-maxGSOPacket])
			}
		}
		wantBig = len(f) >= handOverFrame
		if len(f) >= linkbase.HeaderLength {
			dst := tcpip.LinkAddress(f[:header.EthernetAddressSize])
			if !header.IsMulticastEthernetAddress(dst) && dst != header.EthernetBroadcastAddress && dst != e.LinkAddress() {
				e.stats.rxOtherHost.Add(1)
				continue
			}
		}
		if hdr[1] == 0 && len(f) > linkbase.HeaderLength+int(e.MTU())+frameSlack-1 {
			e.stats.rxTooLong.Add(1) // only a TSO segment may exceed the MTU
			continue
		}
		if verdict := checkFrame(hdr, f); verdict != rxDeliver {
			e.stats.rxDropped[verdict].Add(1)
			continue
		}
		n -= vnetHdrLen
		// A TCP segment above the MTU goes in two views, its headers in a
		// small one of their own: netstack's IPv4 layer holds a view of
		// the network header while it reads the header again, and a read
		// of a chunk that another view shares copies the whole chunk
		// first (buffer.PullUp's copy-on-write), 64 KiB for a TSO frame.
		head := 0
		if len(f) > splitFrame {
			head = tcpHeadersLen(f)
		}
		var v *buffer.View
		if inBig && len(f) >= handOverFrame {
			v, big = big, nil
			v.TrimFront(head)
			v.CapLength(len(f) - head)
		} else {
			v = buffer.NewViewWithData(f[head:])
		}
		var payload buffer.Buffer
		if head > 0 {
			payload = buffer.MakeWithView(buffer.NewViewWithData(f[:head]))
			payload.Append(v) // cannot fail: v is not empty
		} else {
			payload = buffer.MakeWithView(v)
		}
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: payload})
		if e.DeliverFrameAt(pkt, rx) {
			e.stats.rxFrames.Add(1)
			e.stats.rxBytes.Add(uint64(n))
		} else if !e.stopping.Load() {
			e.stats.rxErrors.Add(1) // a runt
		}
		pkt.DecRef()
	}
}

// WritePackets implements stack.LinkEndpoint.WritePackets. It does NOT take
// ownership of the packets. Frames the device refuses are dropped and
// counted but reported as written, like frames lost on a cable.
func (e *Endpoint) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	if e.writeClosed {
		return 0, &tcpip.ErrClosedForSend{}
	}
	for _, pkt := range pkts.AsSlice() {
		size := pkt.Size()
		if vnetHdrLen+size > len(e.writeBuf) {
			e.stats.txDropped.Add(1)
			continue
		}
		n := vnetHdrLen
		views, off := pkt.AsViewList()
		for v := views.Front(); v != nil; v = v.Next() {
			s := v.AsSlice()
			if off >= len(s) {
				off -= len(s)
				continue
			}
			n += copy(e.writeBuf[n:], s[off:])
			off = 0
		}
		var mss uint16
		if pkt.GSOOptions.Type == stack.GSOTCPv4 {
			mss = pkt.GSOOptions.MSS
		}
		putTxHeader(e.writeBuf[:vnetHdrLen], e.writeBuf[vnetHdrLen:n], mss)
		if err := rawWrite(e.fd, e.writeBuf[:n]); err != nil {
			e.stats.txDropped.Add(1)
			continue
		}
		e.stats.txFrames.Add(1)
		e.stats.txBytes.Add(uint64(n - vnetHdrLen))
	}
	return pkts.Len(), nil
}

// SetMTU implements stack.LinkEndpoint.SetMTU. It changes what the stack
// is told, not the device's MTU.
func (e *Endpoint) SetMTU(mtu uint32) {
	e.writeMu.Lock()
	if need := e.writeBufLen(int(mtu)); need > len(e.writeBuf) {
		e.writeBuf = make([]byte, need)
	}
	e.writeMu.Unlock()
	e.Endpoint.SetMTU(mtu)
}

// Close implements stack.LinkEndpoint.Close. It stops the reader and waits
// for it to return (if a stack is still attached, it stops receiving),
// closes the descriptor, and so removes the device if New created it. It is
// idempotent; the stack calls it, without its locks held, when it removes
// the link. It must not be called from inside a frame's delivery.
func (e *Endpoint) Close() {
	e.runMu.Lock()
	if e.closed {
		e.runMu.Unlock()
		return
	}
	e.closed = true
	e.stopReaderLocked()
	done := e.readerDone
	e.readerDone = nil
	e.runMu.Unlock()
	if done != nil {
		<-done
	}
	e.writeMu.Lock()
	e.writeClosed = true
	if !e.created {
		// The device outlives us: its next reader may not expect partial
		// checksums (the offload setting is the device's, not ours).
		unix.IoctlSetInt(e.fd, tunSetOffload, 0)
	}
	e.writeMu.Unlock()
	e.file.Close()
	e.Endpoint.Close()
}
