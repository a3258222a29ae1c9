// Package link declares the optional features a link endpoint may offer
// tickwire's Stack beyond stack.LinkEndpoint. The Stack checks for each with
// a type assertion on Config.Link, as io.Copy checks for io.WriterTo, and
// every wrapper in this module (link/pcap/recorder) forwards all of them.
//
//	var _ link.BusyPoller = (*tap.Endpoint)(nil)
//	if bp, ok := cfg.Link.(link.BusyPoller); ok {
//		bp.SetBusyPoll(20 * time.Microsecond)
//	}
//
// The links themselves live in the subpackages: pipe, tap, pcap (and its
// recorder), afpacket, afxdp, dmaring (NIC descriptor rings, with the
// software NIC that serves them in dmaring/nicsim); frame is the
// batch-of-frames interface of the frame sources.
package link

import (
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// BusyPoller is a link whose reader can spin before it sleeps. The Stack
// calls SetBusyPoll with Config.BusyPoll in latency mode when it is not 0.
type BusyPoller interface {
	// SetBusyPoll makes the reader retry a read that finds no frame for up
	// to d before it blocks; 0 turns spinning off. Safe to call while
	// traffic flows.
	SetBusyPoll(d time.Duration)
}

// ThreadLocker is a link with reader goroutines of its own, which it can
// lock to their OS threads (runtime.LockOSThread), so that a program can
// pin those threads to cores (sched_setaffinity, taskset, isolcpus) and
// keep them there. The Stack calls SetLockOSThread(true) when
// Config.LockOSThread is set.
type ThreadLocker interface {
	// SetLockOSThread has the reader goroutines lock themselves to their
	// threads (true) or unlock (false) before they read their next frame.
	// Safe to call while traffic flows.
	SetLockOSThread(lock bool)
}

// ChecksumDropCounter is a link that verifies checksums itself (receive
// checksum offload) and drops the frames that fail, which the Stack then
// never sees. The Stack adds the counts to its own Stats (DropIPv4Checksum,
// DropTCPChecksum, DropUDPChecksum, DropICMPInvalid).
type ChecksumDropCounter interface {
	// RxChecksumDrops returns the frames dropped so far for a wrong IPv4
	// header, TCP, UDP or ICMP checksum. The counts only grow.
	RxChecksumDrops() (ipv4, tcp, udp, icmp uint64)
}

// TimestampDispatcher is a stack.NetworkDispatcher that takes, with each
// inbound frame, the time its link received it. A link that stamps its
// frames (link/tap when its read returns, link/pipe when the peer sends, a
// pcap replay with the capture time, a NIC ring with its completion's
// stamp) delivers through DeliverNetworkPacketAt when its dispatcher offers
// it; the Stack's dispatcher does, and every wrapper in this module
// forwards it. A frame delivered without a stamp is stamped by the Stack
// when it arrives.
type TimestampDispatcher interface {
	stack.NetworkDispatcher
	// DeliverNetworkPacketAt is DeliverNetworkPacket with rx, the time the
	// link received the frame in nanoseconds since the Unix epoch, on the
	// system's real-time clock (CLOCK_REALTIME: what time.Now reads) or,
	// for a NIC that stamps frames itself, the clock the NIC keeps in step
	// with it (PTP). 0 means unknown: the Stack stamps the frame itself.
	DeliverNetworkPacketAt(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer, rx int64)
}

// GSOReceiver is a stack.NetworkDispatcher that takes whole TCP segments
// larger than its link's MTU (up to 64 KiB, as GSO builds them), whose
// checksums the link vouches for (stack.CapabilityRXChecksumOffload): a
// stack does, since it enforces no MTU on what it receives. An in-process
// link (link/pipe) lets the sending stack build such segments only when the
// dispatcher at the other end is a GSOReceiver that says so, so that a
// device model whose rings take wire-sized frames never receives one. The
// Stack's dispatcher is one, and every wrapper in this module forwards it.
type GSOReceiver interface {
	stack.NetworkDispatcher
	// ReceivesGSO reports whether the dispatcher takes such segments.
	ReceivesGSO() bool
}

// TxBacklogger is a link whose transmit side queues frames before they
// leave (link/pipe queues a writer's frames behind the goroutine that is
// delivering). The Stack holds a connection's Write while the backlog is
// long (see TCPConn.Write), so that TCP senders do not build a queue longer
// than their retransmission timeout, and the link wakes the held Writes
// when it has drained.
type TxBacklogger interface {
	// TxBacklog returns the frames accepted for transmission that have
	// not left yet. It is called on every TCP Write: one or two atomic
	// loads, no lock.
	TxBacklog() int
	// TxQueueLen returns how many frames the link queues before it drops
	// what it is given (link/pipe's Options.QueueLen), 0 for no bound or
	// none known. The Stack holds Writes well below it.
	TxQueueLen() int
	// NotifyTxBacklog asks the link to call fn once, on the goroutine that
	// transmits, as soon as its backlog is n frames or fewer; it returns
	// false, and will not call fn, when the backlog is that low already.
	// A request replaces the one before it. fn must not block or
	// transmit; a link calls it outside its own locks. A frame's cost
	// while no request waits is one atomic load.
	NotifyTxBacklog(n int, fn func()) bool
}

// InlineDeliverer is a link that delivers a frame to its peer on the
// writing goroutine, before the write returns (link/pipe, whose peer is
// another stack in the same process): a stack's write then runs the peer
// stack's inbound path, and the answers it sends back, on the writer's
// goroutine stack. The Stack makes room on that stack in one step before
// the writes a fresh goroutine is likely to make (dialing and closing a TCP
// connection), rather than leave the runtime to double it, copying every
// frame of the chain each time, from inside the delivery.
type InlineDeliverer interface {
	// DeliversInline reports whether writes deliver inline.
	DeliversInline() bool
}
