//go:build linux && (amd64 || arm64)

package afxdp

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// queues is what an Endpoint and a Source share: the sockets of the bound
// receive queues and the program that steers frames into them.
type queues struct {
	iface    string
	ifindex  int
	mtu      int
	mac      net.HardwareAddr
	socks    []*socket
	prog     *program
	wakeFD   int // eventfd that stop signals to end every wait
	promFD   int // packet socket holding promiscuous mode; -1: none
	stopping atomic.Bool
	busyPoll atomic.Int64 // ns of spinning before a wait blocks; 0: none
}

// openQueues opens cfg.Queues sockets from cfg.Queue on, loads the program
// build makes and attaches it. Errors are *Error values.
func openQueues(iface string, cfg *Config, name string, build func(*ebpf.Map) asm.Instructions) (_ *queues, err error) {
	fail := func(err error) (*queues, error) { return nil, &Error{Op: "open", Interface: iface, Err: err} }
	ifc, err := net.InterfaceByName(iface)
	if err != nil {
		return fail(fmt.Errorf("%w: %w", ErrNoInterface, err))
	}
	li, err := queryLink(ifc.Index)
	if err != nil {
		return fail(err)
	}
	if li.rxQueues > 0 && cfg.Queue+cfg.Queues > li.rxQueues {
		return fail(fmt.Errorf("%w: queues %d to %d asked, the interface has %d receive queues (0 to %d)",
			ErrQueueRange, cfg.Queue, cfg.Queue+cfg.Queues-1, li.rxQueues, li.rxQueues-1))
	}
	if need := ifc.MTU + 14 + 4; ifc.MTU > 0 && need > cfg.FrameSize-xdpHeadroom {
		return fail(&ConfigError{"FrameSize", fmt.Sprintf("%d holds frames up to %d bytes; the interface's MTU %d needs %d",
			cfg.FrameSize, cfg.FrameSize-xdpHeadroom, ifc.MTU, need)})
	}
	q := &queues{iface: iface, ifindex: ifc.Index, mtu: ifc.MTU, mac: ifc.HardwareAddr, wakeFD: -1, promFD: -1}
	defer func() {
		if err != nil {
			q.close()
		}
	}()
	q.wakeFD, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fail(fmt.Errorf("eventfd: %w", err))
	}
	if cfg.Promiscuous {
		if q.promFD, err = promiscuous(ifc.Index); err != nil {
			return fail(err)
		}
	}
	for i := range cfg.Queues {
		s, err := openSocket(ifc.Index, cfg.Queue+i, cfg)
		if err != nil {
			return fail(err)
		}
		q.socks = append(q.socks, s)
	}
	q.prog, err = loadProgram(name, max(li.rxQueues, cfg.Queue+cfg.Queues), build)
	if err != nil {
		return fail(err)
	}
	for _, s := range q.socks {
		if err := q.prog.insert(s.queue, s.fd); err != nil {
			return fail(err)
		}
	}
	if err := q.prog.attach(ifc.Index, cfg.Mode, cfg.Replace); err != nil {
		return nil, &Error{Op: "attach", Interface: iface, Err: err}
	}
	return q, nil
}

// stop makes every wait return, now and from now on.
func (q *queues) stop() {
	if q.stopping.Swap(true) {
		return
	}
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	unix.Write(q.wakeFD, one[:])
}

// close detaches the program and closes the sockets; every reader and
// writer has stopped.
// The sockets stay in q.socks for their frozen counters.
func (q *queues) close() {
	if q.prog != nil {
		var queues []int
		for _, s := range q.socks {
			queues = append(queues, s.queue)
		}
		q.prog.close(queues)
	}
	for _, s := range q.socks {
		s.close()
	}
	if q.wakeFD >= 0 {
		unix.Close(q.wakeFD)
		q.wakeFD = -1
	}
	if q.promFD >= 0 {
		unix.Close(q.promFD) // the kernel drops the promiscuous membership
		q.promFD = -1
	}
}

// promiscuous returns a packet socket that holds the interface in
// promiscuous mode until it is closed. Its protocol is 0, so it receives
// no frame.
func promiscuous(ifindex int) (int, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, openError("promiscuous mode: packet socket", err)
	}
	mreq := unix.PacketMreq{Ifindex: int32(ifindex), Type: unix.PACKET_MR_PROMISC}
	if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
		unix.Close(fd)
		return -1, openError("promiscuous mode", err)
	}
	return fd, nil
}

// wait blocks until one of socks has a frame in its RX ring (true), stop
// is called or the deadline, when not zero, passes (false). With
// busy-polling set it first spins on the rings for that long, making no
// system call. fds is the caller's poll array, at least len(socks)+1
// long, reused so that waiting allocates nothing.
// spin spins on socks' RX rings for up to the busy-poll time, until one
// has a frame or stop.
func (q *queues) spin(socks []*socket) {
	spin := q.busyPoll.Load()
	if spin <= 0 {
		return
	}
	ready := func() bool {
		for _, s := range socks {
			if s.rx.available() > 0 {
				return true
			}
		}
		return false
	}
	start := time.Now()
	for !ready() && !q.stopping.Load() && time.Since(start) < time.Duration(spin) {
		runtime.Gosched()
	}
}

// pollFile returns an epoll descriptor that watches the sockets and the
// wake eventfd for input, as a non-blocking file the runtime poller
// serves: a reader waits in it as a parked goroutine, woken on the thread
// that runs the scheduler, instead of a thread blocked in poll(2). Only
// input is watched: the runtime asks for output readiness too, which
// every send completion would raise.
func (q *queues) pollFile() (*os.File, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	fds := []int{q.wakeFD}
	for _, s := range q.socks {
		fds = append(fds, s.fd)
	}
	for _, fd := range fds {
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
			unix.Close(ep)
			return nil, err
		}
	}
	if err := unix.SetNonblock(ep, true); err != nil {
		unix.Close(ep)
		return nil, err
	}
	return os.NewFile(uintptr(ep), "afxdp-epoll"), nil
}

func (q *queues) wait(socks []*socket, fds []unix.PollFd, deadline time.Time) (bool, error) {
	ready := func() bool {
		for _, s := range socks {
			if s.rx.available() > 0 {
				return true
			}
		}
		return false
	}
	q.spin(socks)
	for {
		if q.stopping.Load() {
			return false, nil
		}
		if ready() {
			return true, nil
		}
		timeoutMs := -1
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return false, nil
			}
			timeoutMs = int((left + time.Millisecond - 1) / time.Millisecond)
		}
		fds[0] = unix.PollFd{Fd: int32(q.wakeFD), Events: unix.POLLIN}
		for i, s := range socks {
			fds[1+i] = unix.PollFd{Fd: int32(s.fd), Events: unix.POLLIN}
		}
		_, err := unix.Poll(fds[:1+len(socks)], timeoutMs)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("poll: %w", err)
		}
		for _, f := range fds[1 : 1+len(socks)] {
			if f.Revents&(unix.POLLERR|unix.POLLNVAL) != 0 {
				return false, fmt.Errorf("poll: socket error (revents %#x)", f.Revents)
			}
		}
	}
}

// stats sums the sockets' counters and the kernel's.
func (q *queues) stats(socks []*socket) Stats {
	var st Stats
	for _, s := range socks {
		k := s.kernelStats()
		st.RxFrames += s.rxFrames.Load()
		st.RxBytes += s.rxBytes.Load()
		st.RxTruncated += s.rxTruncated.Load()
		st.RxInvalid += s.rxInvalid.Load()
		st.KernelDrops += k.Rx_dropped + k.Rx_ring_full
		st.FillRingEmpty += k.Rx_fill_ring_empty_descs
		st.TxFrames += s.txFrames.Load()
		st.TxBytes += s.txBytes.Load()
		st.TxDropped += s.txDropped.Load()
	}
	return st
}

// queueStats is stats of the i-th socket alone, zero out of range.
func (q *queues) queueStats(i int) Stats {
	if i < 0 || i >= len(q.socks) {
		return Stats{}
	}
	return q.stats(q.socks[i : i+1])
}

// zeroCopy reports whether every socket got zero-copy mode.
func (q *queues) zeroCopy(socks []*socket) bool {
	for _, s := range socks {
		if !s.zeroCopy {
			return false
		}
	}
	return len(socks) > 0
}
