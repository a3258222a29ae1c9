package tickwire

import (
	"cmp"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/header"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
)

// Defaults applied by New to zero Config fields: the figures of the hardware
// TCP offload engine tickwire models.
const (
	DefaultMTU            = 1500
	DefaultMSS            = 1408 // 22 x 64 bytes: full segments land 64-byte aligned
	DefaultSendBuffer     = 32 << 10
	DefaultReceiveBuffer  = 32 << 10
	DefaultCongestion     = "reno"
	DefaultMaxConnections = 64
	DefaultARPEntries     = 128
	DefaultARPTimeout     = 500 * time.Millisecond
	DefaultTimeWait       = 60 * time.Second // Linux's TCP_TIMEWAIT_LEN
	DefaultMaxTimeWait    = 65536

	// Keepalive finds a dead peer DefaultKeepaliveIdle +
	// DefaultKeepaliveCount x DefaultKeepaliveInterval = 55 s after it
	// last answered.
	DefaultKeepaliveIdle     = 30 * time.Second
	DefaultKeepaliveInterval = 5 * time.Second
	DefaultKeepaliveCount    = 5
)

// DefaultReceiveBufferMax is the receive window a connection may grow to
// (Config.ReceiveBufferMax): with DefaultMaxConnections, 64 MiB of windows
// at worst, twice that in netstack's accounting.
const DefaultReceiveBufferMax = 1 << 20

// DefaultSendBufferMax is the send buffer a connection may grow to
// (Config.SendBufferMax).
const DefaultSendBufferMax = 1 << 20

// Limits enforced by New.
const (
	// MaxConnectionsLimit is the largest MaxConnections New accepts.
	MaxConnectionsLimit = 1 << 20
	// MaxTimeWaitLimit is the largest MaxTimeWait New accepts: about
	// 100 MiB of records.
	MaxTimeWaitLimit = 1 << 20
	// MaxARPEntries is the largest ARPEntries New accepts: netstack's own
	// neighbor table holds 512 entries per interface.
	MaxARPEntries = gstack.NeighborCacheSize
	minMTU        = 576 // the IPv4 minimum reassembly size (RFC 791)
	minMSS        = 536 // the TCP default MSS (RFC 1122)
	maxMTU        = 65535
	minARPTimeout = 3 * time.Millisecond // three probes, netstack's 1 ms minimum apart
	maxARPTimeout = time.Minute
	maxBusyPoll   = time.Second
	// Keepalive bounds: Linux's MAX_TCP_KEEPIDLE, MAX_TCP_KEEPINTVL and
	// MAX_TCP_KEEPCNT, and a floor well under any useful probe rate.
	minKeepalive      = 10 * time.Millisecond
	maxKeepalive      = 32767 * time.Second
	maxKeepaliveCount = 127
	minIdleTimeout    = 100 * time.Millisecond
	minTimeWait       = time.Second
	maxTimeWait       = 4 * time.Minute // 2 x the MSL of RFC 9293
	maxIdleTimeout    = 24 * time.Hour
)

// Config configures a Stack. The zero value of every field except Link and
// Addr means its default.
type Config struct {
	// Link is the link the stack sends and receives Ethernet frames on
	// (link/pipe, link/tap, ...). It must deliver frames with the Ethernet
	// header parsed (stack.LinkEndpoint.ParseHeader done, protocol = the
	// EtherType), as gVisor's Ethernet links do. The Stack owns it from New
	// on: Close closes it. Required.
	Link gstack.LinkEndpoint
	// MAC is the stack's link address. Default: Link.LinkAddress(); required
	// when that is empty. Must be a 6-byte unicast address.
	MAC net.HardwareAddr
	// Addr is the stack's IPv4 address and netmask, e.g. 10.0.0.2/24. The
	// prefix is the on-link subnet. Required.
	Addr netip.Prefix
	// Gateway, when valid, is the next hop of the default route. It must lie
	// in Addr's subnet.
	Gateway netip.Addr

	// MTU is the largest IPv4 packet sent, excluding the Ethernet header.
	// Default 1500; 576 to 65535, at least MSS+40, at most Link.MTU().
	MTU int
	// MSS is the TCP maximum segment size, advertised in SYN and SYN-ACK and
	// the exact payload of every full segment sent (the peer's MSS option is
	// clamped to it, and TCP timestamps are not negotiated, so no option
	// bytes are taken from the payload). Default 1408; 536 to MTU-40. With SACK enabled,
	// netstack reserves 36 bytes of option space per segment and full
	// segments carry MSS-36 bytes; a connection established through a SYN
	// cookie (under a SYN flood) uses the cookie's coarser MSS (1300 for
	// 1408).
	MSS int

	// SendBuffer and ReceiveBuffer are the per-connection TCP buffer sizes
	// in bytes (SO_SNDBUF and SO_RCVBUF). ReceiveBuffer is the receive
	// window advertised: the unread data the connection accepts. Counted
	// with the bookkeeping of the segments that carried it, a connection
	// whose program does not read holds up to twice ReceiveBuffer; an idle
	// one holds none. Default 32 KiB each; 4 KiB to 4 MiB.
	SendBuffer    int
	ReceiveBuffer int
	// ReceiveBufferMax bounds receive-buffer auto-tuning, as the maximum of
	// Linux's tcp_rmem does: every connection starts with a window of
	// ReceiveBuffer, and one whose program read more in a round trip than
	// in the one before (and more than 20 segments) grows it to over twice
	// that (netstack's ModerateRecvBuf, after Linux's
	// tcp_rcv_space_adjust), up to ReceiveBufferMax; it never shrinks
	// back. A window holds memory only while unread data fills it, so idle
	// connections and request/reply traffic hold none whatever the bound;
	// the worst case is every connection grown and its program not
	// reading: MaxConnections x 2 x ReceiveBufferMax in netstack's
	// accounting (128 MiB with the defaults). The window scale offered in
	// the handshake is sized for ReceiveBufferMax, so windows are
	// advertised in steps of 64 bytes at the default (scale 6). SetReadBuffer
	// fixes a connection's window and turns its growth off, as SO_RCVBUF
	// does on Linux. Default 1 MiB (or ReceiveBuffer, if larger), enough for
	// one stream at the kernel's speed over a veth pair; at most 4 MiB; a
	// negative value or one at most ReceiveBuffer turns growth off.
	ReceiveBufferMax int
	// SendBufferMax bounds send-buffer auto-tuning, as the maximum of
	// Linux's tcp_wmem does: every connection starts with a send buffer of
	// SendBuffer, and as its congestion window opens, netstack grows the
	// buffer to twice the window's bytes (when ACKs free room), up to
	// SendBufferMax; it never shrinks back. Written data the peer has not
	// acknowledged stays in it, so a stream in flight is not cut to
	// SendBuffer per round trip: one stream over link/pipe, 64 KiB writes,
	// went from 28 to 33-37 Gb/s with 1 MiB, two streams on two cores from
	// 42-45 to 66-70 Gb/s (bench rows tcp_bulk, tcp_bulk_2cores). The
	// buffer holds memory only while written data waits in it, so a
	// program that writes no faster than the peer reads holds little; the
	// worst case is every connection's peer not reading:
	// MaxConnections x SendBufferMax (64 MiB with the defaults).
	// SetWriteBuffer fixes a connection's buffer and turns its growth
	// off, as SO_SNDBUF does on Linux. Default 1 MiB (or SendBuffer, if
	// larger); at most 4 MiB; a negative value or one at most SendBuffer
	// turns growth off.
	SendBufferMax int
	// DisableNoDelay turns Nagle's algorithm on. By default TCP_NODELAY is
	// set: a segment leaves as soon as it is written.
	DisableNoDelay bool
	// Congestion is the TCP congestion control: "reno" (default: slow start,
	// congestion avoidance, fast retransmit and recovery) or "cubic". The
	// initial congestion window is 10 segments (netstack's tcp.InitialCwnd).
	Congestion string
	// SlowStartAfterIdle takes a connection that sent nothing for longer
	// than its retransmission timeout (at least 200 ms) back to the initial
	// congestion window, as RFC 5681 section 4.1 recommends and netstack
	// and Linux (net.ipv4.tcp_slow_start_after_idle=1) do. Off by default:
	// the window survives idle periods, as with Linux's setting 0, so that
	// a connection written now and then (one of thousands) sends a 16 KiB
	// write in one segment instead of 10 segments, a round trip, then the
	// rest. A connection's Write pays a clock reading, and, when its last
	// mark is 100 ms old, a lock of the endpoint.
	SlowStartAfterIdle bool
	// SACK enables selective acknowledgements. Off by default, as in the
	// modelled offload engine, so full segments carry exactly MSS bytes.
	SACK bool

	// MaxConnections bounds the established TCP connections, accepted plus
	// dialed, not yet closed by the program. An accept beyond it is reset
	// and a dial fails with ErrTooManyConnections; both count in
	// Stats.ConnsRefused. Inbound half-open connections do not count (they
	// live in the listener's SYN queue or SYN cookies); a dial holds its slot
	// from the start of the handshake. Connections that completed the
	// handshake wait in the listener's accept queue (see Bounds in the
	// package doc) and are counted, or reset, when Accept takes them.
	// Default 64; at most MaxConnectionsLimit.
	MaxConnections int
	// MaxConnectionsPerSource bounds the accepted connections from one
	// remote IPv4 address, so that one host (one that opened its share and
	// vanished, a runaway reconnect loop) cannot take every slot and lock
	// the others out. An accept beyond it is reset and counts in
	// Stats.ConnsRefusedPerSource (one beyond MaxConnections as well counts
	// in ConnsRefused instead). Dialed connections
	// are not counted: the program chooses whom it dials, and
	// MaxConnections bounds them. Clients behind one address (a NAT, a test
	// whose clients share an address) need it raised. Default
	// MaxConnections/2, at least 1; 1 to MaxConnections (MaxConnections
	// turns the limit off).
	MaxConnectionsPerSource int

	// KeepaliveIdle, KeepaliveInterval and KeepaliveCount set TCP keepalive
	// on every accepted and dialed connection, so that a peer that vanished
	// (powered off, unplugged, its traffic dropped) is found and its
	// connection, with its MaxConnections slot, does not live on forever.
	// Once nothing has arrived from the peer for KeepaliveIdle, and none of
	// our data awaits its acknowledgement, a probe is sent every
	// KeepaliveInterval; after KeepaliveCount unanswered probes the
	// connection is reset. Data that stays unacknowledged for as long,
	// KeepaliveIdle + KeepaliveCount x KeepaliveInterval, resets it too
	// (netstack's TCP_USER_TIMEOUT, as gRPC sets it; this also bounds a zero
	// receive window the peer never opens). Either way Read and Write then
	// fail with an error wrapping syscall.ETIMEDOUT, and
	// Stats.TCPPeerTimeouts counts it; the program's Close frees the slot.
	// Defaults 30 s, 5 s and 5 probes: a dead peer is found within 55 s.
	// KeepaliveIdle and KeepaliveInterval 10 ms to 32767 s, KeepaliveCount
	// 1 to 127 (Linux's bounds); a negative KeepaliveIdle turns keepalive
	// and the user timeout off (netstack's retransmissions alone then give
	// up on a dead peer, after minutes, and only while data is in flight).
	KeepaliveIdle     time.Duration
	KeepaliveInterval time.Duration
	KeepaliveCount    int

	// IdleTimeout, when positive, resets a connection on which no data was
	// read (by Read or an OnReceive handler) or written (by Write) for that
	// long, whatever TCP keepalive says: a connection whose peer answers
	// probes but sends nothing is idle. Read and Write then fail with an
	// error wrapping ErrIdleTimeout, an OnReceive handler gets its last
	// call with it, Stats.ConnsIdleClosed counts it, and the program's
	// Close frees the slot. A per-Stack goroutine checks every
	// IdleTimeout/4, so a connection goes after IdleTimeout to 1.25 x
	// IdleTimeout of silence; Read and Write cost one atomic add more while
	// it is on. Default 0: off; else 100 ms to 24 h.
	IdleTimeout time.Duration

	// TimeWait is how long a connection that this stack closed first
	// stays in TIME-WAIT after the peer's FIN, answering the peer's
	// retransmitted FIN with an ACK (our last ACK may have been lost) and
	// keeping its 4-tuple from a new connection whose segments an old
	// duplicate could corrupt (RFC 9293 3.6). A new SYN from the peer with
	// a higher sequence number ends it early (RFC 6191), as does a dial
	// of ours that takes the same local port (as Linux's tcp_tw_reuse).
	// A connection in TIME-WAIT is a record of about 100 bytes, not a
	// netstack endpoint: it holds no MaxConnections slot and no buffer.
	// Default 60 s (Linux's fixed length); 1 s to 4 min. Shorter trades
	// that protection for fewer records under heavy connection churn.
	TimeWait time.Duration
	// MaxTimeWait bounds the connections held in TIME-WAIT, as Linux's
	// tcp_max_tw_buckets does: one that would exceed it closes at once
	// without TIME-WAIT, counted in Stats.TCPTimeWaitOverflow. Default
	// 65536 (about 7 MiB; at 1,000 closes a second, 60 s of TIME-WAIT
	// holds 60,000); 1 to MaxTimeWaitLimit.
	MaxTimeWait int

	// ARPEntries bounds the dynamic ARP table. An ARP request from an
	// unknown host that finds the table full is dropped (Stats.ARPTableFull)
	// and an entry evicted (Stats.ARPEvictions), so the host gets in on its
	// next try; entries netstack creates to resolve an outgoing packet are
	// trimmed the same way right after. Eviction takes the oldest idle entry
	// (Stale, Incomplete, Unreachable) before any in use (Reachable, Delay,
	// Probe). Static entries do not count. Default 128; at most
	// MaxARPEntries.
	ARPEntries int
	// ARPTimeout is how long an unanswered ARP request is retried (three
	// requests, ARPTimeout/3 apart) before the address is declared
	// unreachable and waiting connections fail with EHOSTUNREACH. Default
	// 500 ms; 3 ms to 1 minute.
	ARPTimeout time.Duration
	// StaticARP lists permanent IPv4-to-MAC entries, each in Addr's subnet.
	StaticARP map[netip.Addr]net.HardwareAddr

	// Latency turns latency mode on, trading the simplicity of netstack's
	// threading for round-trip time: TCP segments of established
	// connections are processed on the goroutine that delivers the frame,
	// OnReceive handlers run right after that processing on the same
	// goroutine, and pure ACKs wait (1 ms at most) for the next segment to
	// carry them. Off by default. Without BusyPoll it costs no CPU beyond
	// the stock mode's, but a slow handler delays every connection behind
	// it on the delivering goroutine. The package doc (Latency mode) gives
	// the whole contract.
	Latency bool
	// BusyPoll is how long, in latency mode, a Read or Write that would
	// block, a handler's goroutine and the link's reader (a link.BusyPoller
	// such as link/tap) spin before they sleep. Each spinning goroutine
	// keeps a core busy for up to BusyPoll per wait: it pays only on cores
	// nobody else needs. Default 0: no busy-poll; 0 to 1 s. Ignored when
	// Latency is off.
	BusyPoll time.Duration

	// LockOSThread locks the goroutines that carry received data to the
	// program to their OS threads (runtime.LockOSThread): the link's reader
	// (a link.ThreadLocker such as link/tap), which in latency mode also
	// runs TCP and the handlers, and each OnReceive handler's goroutine, so
	// that the program can pin those threads to cores (sched_setaffinity,
	// taskset) and keep the scheduler from moving the hot path between
	// them. netstack's own goroutines (its TCP processors and timers) are
	// not locked: with Latency, they carry only the segments that cannot
	// be processed on the reader. Off by default. The cost: a locked goroutine that parks is
	// woken on its own thread, a futex wake-up and a thread switch more
	// than an unlocked one, tens of microseconds per round trip on a loaded
	// machine: bench/README.md (tcp_rtt_64B_locked,
	// tap_tcp_rtt_64B_latency_locked) has the figures. A goroutine that
	// busy-polls (BusyPoll) does not park while it spins. Lock only with
	// cores to pin the threads to.
	LockOSThread bool

	// UDPReceiveBuffer bounds the bytes each UDP socket holds unread, as
	// SO_RCVBUF does: a datagram counts its payload rounded up to 8 bytes
	// plus 32 (so 1 MiB holds 10,922 datagrams of 64 bytes, 697 of 1472),
	// and one arriving while the socket holds UDPReceiveBuffer bytes or
	// more (or UDPReceiveQueue datagrams) is dropped and counted in
	// Stats.DropUDPBufferFull. A socket's queue is allocated as it fills
	// (4 KiB first, then doubling) and takes at most UDPReceiveBuffer plus
	// two of the largest datagrams (link MTU - 28 bytes each). Default
	// DefaultUDPReceiveBuffer (1 MiB), or, when UDPReceiveQueue is set,
	// room for that many datagrams of MTU - 28 bytes if that is more;
	// MinUDPReceiveBuffer to MaxUDPReceiveBuffer.
	UDPReceiveBuffer int

	// UDPReceiveQueue bounds the datagrams each UDP socket holds unread,
	// beside UDPReceiveBuffer's bound in bytes. Default
	// DefaultUDPReceiveQueue (65,536: the bytes bind first); 1 to
	// MaxUDPReceiveQueue.
	UDPReceiveQueue int

	// Logger, when not nil, receives the stack's events (accepts reset by
	// MaxConnections or MaxConnectionsPerSource, at level Warn, one record
	// each; and, summarised in at most one record per kind a second with
	// the count, ARP resolutions given up with the addresses, connections
	// reset by keepalive, the user timeout or IdleTimeout, handshakes
	// dropped by a full accept queue, SYN cookies sent, segments and
	// datagrams dropped by full queues, fragments discarded and link write
	// errors: a goroutine compares the counters every second, so the data
	// path pays nothing) and
	// netstack's own log (its warnings, such as the failures it meets under
	// a SYN flood), at most 10 records a second: the rest are counted in
	// Stats.LogSuppressed and the count is attached to the next record that
	// passes ("suppressed"). netstack's log is process-wide and names no
	// stack: while several Stacks have Loggers, each distinct Logger gets
	// all of it. Nil (the default) is silent; from the first New on,
	// netstack's log goes only to Loggers, never to stderr.
	Logger *slog.Logger
}

// withDefaults returns c with defaults applied and validated.
func (c Config) withDefaults() (Config, error) {
	if c.Link == nil {
		return c, configErrorf("Link", "missing")
	}
	if len(c.MAC) == 0 {
		c.MAC = net.HardwareAddr(c.Link.LinkAddress())
	}
	if err := checkMAC("MAC", c.MAC); err != nil {
		return c, err
	}
	if !c.Addr.IsValid() || !c.Addr.Addr().Is4() {
		return c, configErrorf("Addr", "%v is not an IPv4 prefix such as 10.0.0.2/24", c.Addr)
	}
	if a := c.Addr.Addr(); a.IsUnspecified() || a.IsMulticast() || a.IsLoopback() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return c, configErrorf("Addr", "%v is not a unicast host address", a)
	}
	if c.Gateway.IsValid() {
		if !c.Gateway.Is4() || !c.Addr.Masked().Contains(c.Gateway) || c.Gateway == c.Addr.Addr() {
			return c, configErrorf("Gateway", "%v is not another IPv4 address in %v", c.Gateway, c.Addr.Masked())
		}
	}

	if c.MTU == 0 {
		c.MTU = DefaultMTU
	}
	if c.MSS == 0 {
		c.MSS = DefaultMSS
	}
	linkMTU := int(c.Link.MTU())
	if c.MTU < minMTU || c.MTU > maxMTU {
		return c, configErrorf("MTU", "%d out of range [%d, %d]", c.MTU, minMTU, maxMTU)
	}
	if linkMTU != 0 && c.MTU > linkMTU {
		return c, configErrorf("MTU", "%d exceeds the link's MTU %d", c.MTU, linkMTU)
	}
	if maxMSS := c.MTU - header.IPv4MinimumSize - header.TCPMinimumSize; c.MSS < minMSS || c.MSS > maxMSS {
		return c, configErrorf("MSS", "%d out of range [%d, %d] (MTU %d)", c.MSS, minMSS, maxMSS, c.MTU)
	}

	for _, b := range []struct {
		name string
		v    *int
		def  int
	}{{"SendBuffer", &c.SendBuffer, DefaultSendBuffer}, {"ReceiveBuffer", &c.ReceiveBuffer, DefaultReceiveBuffer}} {
		if *b.v == 0 {
			*b.v = b.def
		}
		if *b.v < tcp.MinBufferSize || *b.v > tcp.MaxBufferSize {
			return c, configErrorf(b.name, "%d out of range [%d, %d]", *b.v, tcp.MinBufferSize, tcp.MaxBufferSize)
		}
	}

	// The auto-tuning bounds: 0 is the default (at least the buffer), a
	// value below the buffer turns growth off.
	for _, b := range []struct {
		name     string
		v        *int
		buf, def int
	}{{"ReceiveBufferMax", &c.ReceiveBufferMax, c.ReceiveBuffer, DefaultReceiveBufferMax},
		{"SendBufferMax", &c.SendBufferMax, c.SendBuffer, DefaultSendBufferMax}} {
		switch {
		case *b.v == 0:
			*b.v = max(b.def, b.buf)
		case *b.v < b.buf: // growth off
			*b.v = b.buf
		case *b.v > tcp.MaxBufferSize:
			return c, configErrorf(b.name, "%d out of range [%d, %d] (negative: no growth)", *b.v, b.buf, tcp.MaxBufferSize)
		}
	}

	switch c.Congestion {
	case "":
		c.Congestion = DefaultCongestion
	case "reno", "cubic":
	default:
		return c, configErrorf("Congestion", "%q is neither \"reno\" nor \"cubic\"", c.Congestion)
	}

	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.MaxConnections < 1 || c.MaxConnections > MaxConnectionsLimit {
		return c, configErrorf("MaxConnections", "%d out of range [1, %d]", c.MaxConnections, MaxConnectionsLimit)
	}
	if c.MaxConnectionsPerSource == 0 {
		c.MaxConnectionsPerSource = max(c.MaxConnections/2, 1)
	}
	if c.MaxConnectionsPerSource < 1 || c.MaxConnectionsPerSource > c.MaxConnections {
		return c, configErrorf("MaxConnectionsPerSource", "%d out of range [1, %d] (MaxConnections)", c.MaxConnectionsPerSource, c.MaxConnections)
	}
	if c.KeepaliveIdle == 0 {
		c.KeepaliveIdle = DefaultKeepaliveIdle
	}
	if c.KeepaliveIdle > 0 && (c.KeepaliveIdle < minKeepalive || c.KeepaliveIdle > maxKeepalive) {
		return c, configErrorf("KeepaliveIdle", "%v out of range [%v, %v] (negative: off)", c.KeepaliveIdle, minKeepalive, maxKeepalive)
	}
	if c.KeepaliveInterval == 0 {
		c.KeepaliveInterval = DefaultKeepaliveInterval
	}
	if c.KeepaliveInterval < minKeepalive || c.KeepaliveInterval > maxKeepalive {
		return c, configErrorf("KeepaliveInterval", "%v out of range [%v, %v]", c.KeepaliveInterval, minKeepalive, maxKeepalive)
	}
	if c.KeepaliveCount == 0 {
		c.KeepaliveCount = DefaultKeepaliveCount
	}
	if c.KeepaliveCount < 1 || c.KeepaliveCount > maxKeepaliveCount {
		return c, configErrorf("KeepaliveCount", "%d out of range [1, %d]", c.KeepaliveCount, maxKeepaliveCount)
	}
	if c.IdleTimeout != 0 && (c.IdleTimeout < minIdleTimeout || c.IdleTimeout > maxIdleTimeout) {
		return c, configErrorf("IdleTimeout", "%v out of range [%v, %v] (0: off)", c.IdleTimeout, minIdleTimeout, maxIdleTimeout)
	}
	c.TimeWait, c.MaxTimeWait = cmp.Or(c.TimeWait, DefaultTimeWait), cmp.Or(c.MaxTimeWait, DefaultMaxTimeWait)
	switch {
	case c.TimeWait < minTimeWait || c.TimeWait > maxTimeWait:
		return c, configErrorf("TimeWait", "%v out of range [%v, %v]", c.TimeWait, minTimeWait, maxTimeWait)
	case c.MaxTimeWait < 1 || c.MaxTimeWait > MaxTimeWaitLimit:
		return c, configErrorf("MaxTimeWait", "%d out of range [1, %d]", c.MaxTimeWait, MaxTimeWaitLimit)
	}
	if c.ARPEntries == 0 {
		c.ARPEntries = DefaultARPEntries
	}
	if c.ARPEntries < 1 || c.ARPEntries > MaxARPEntries {
		return c, configErrorf("ARPEntries", "%d out of range [1, %d]", c.ARPEntries, MaxARPEntries)
	}
	if c.ARPTimeout == 0 {
		c.ARPTimeout = DefaultARPTimeout
	}
	if c.ARPTimeout < minARPTimeout || c.ARPTimeout > maxARPTimeout {
		return c, configErrorf("ARPTimeout", "%v out of range [%v, %v]", c.ARPTimeout, minARPTimeout, maxARPTimeout)
	}
	if c.BusyPoll < 0 || c.BusyPoll > maxBusyPoll {
		return c, configErrorf("BusyPoll", "%v out of range [0, %v]", c.BusyPoll, maxBusyPoll)
	}
	if !c.Latency {
		c.BusyPoll = 0
	}
	if c.UDPReceiveQueue < 0 || c.UDPReceiveQueue > MaxUDPReceiveQueue {
		return c, configErrorf("UDPReceiveQueue", "%d out of range [1, %d]", c.UDPReceiveQueue, MaxUDPReceiveQueue)
	}
	if c.UDPReceiveBuffer == 0 {
		// A program that sized its sockets in datagrams keeps the room it had.
		c.UDPReceiveBuffer = min(max(DefaultUDPReceiveBuffer, c.UDPReceiveQueue*udpRecordSize(c.MTU-28)), MaxUDPReceiveBuffer)
	}
	if c.UDPReceiveQueue == 0 {
		c.UDPReceiveQueue = DefaultUDPReceiveQueue
	}
	if c.UDPReceiveBuffer < MinUDPReceiveBuffer || c.UDPReceiveBuffer > MaxUDPReceiveBuffer {
		return c, configErrorf("UDPReceiveBuffer", "%d out of range [%d, %d]", c.UDPReceiveBuffer, MinUDPReceiveBuffer, MaxUDPReceiveBuffer)
	}
	if len(c.StaticARP) > MaxARPEntries {
		return c, configErrorf("StaticARP", "%d entries, at most %d", len(c.StaticARP), MaxARPEntries)
	}
	for ip, mac := range c.StaticARP {
		field := fmt.Sprintf("StaticARP[%v]", ip)
		if !ip.Is4() || !c.Addr.Masked().Contains(ip) {
			return c, configErrorf(field, "address is not in %v", c.Addr.Masked())
		}
		if err := checkMAC(field, mac); err != nil {
			return c, err
		}
	}
	return c, nil
}

func checkMAC(field string, mac net.HardwareAddr) error {
	if len(mac) != header.EthernetAddressSize {
		return configErrorf(field, "%q is not a 6-byte MAC address", mac.String())
	}
	if mac[0]&1 != 0 {
		return configErrorf(field, "%v is a multicast address", mac)
	}
	return nil
}
