// Package tickwire is a trimmed, trading-oriented network stack: gVisor's
// netstack restricted to IPv4, ARP, ICMPv4, UDP and TCP, configured with the
// figures of a hardware TCP offload engine (MSS 1408, 32 KiB buffers per
// connection, at most 64 connections, 128 ARP entries, 500 ms ARP timeout),
// every bound counted, and the standard net interfaces on top.
//
//	a, b := pipe.New(pipe.Options{})
//	s, err := tickwire.New(tickwire.Config{
//		Link: a,
//		MAC:  a.MAC(),
//		Addr: netip.MustParsePrefix("10.0.0.2/24"),
//	})
//	ln, err := s.ListenTCP(7)                                           // *TCPListener, a net.Listener
//	c, err := s.DialTCP(ctx, netip.MustParseAddrPort("10.0.0.1:9000")) // *TCPConn, a net.Conn
//	pc, err := s.ListenUDP(7)                                           // *UDPConn, a net.PacketConn
//	d := &tickwire.Dialer{Stack: s, Timeout: 5 * time.Second}          // for http.Transport.DialContext, gRPC
//	nc, err := d.DialContext(ctx, "tcp", "10.0.0.1:8080")
//	st := s.Stats()
//	err = s.Shutdown(ctx) // or s.Close()
//
// # What netstack does and what tickwire adds
//
// netstack verifies IPv4 header, TCP and UDP checksums, answers ICMP echo and
// ARP, and runs TCP (SYN cookies under a SYN flood, Reno or CUBIC, optional
// SACK). tickwire wraps the link with its own endpoint that:
//   - drops, and counts, frames that are neither IPv4 nor ARP, and IPv4
//     packets whose header checksum is wrong;
//   - rewrites the options of TCP SYN segments, both ways, so that every
//     connection uses segments of exactly Config.MSS payload bytes: it
//     removes the timestamps option (netstack offers no switch for it, and it
//     would take 12 bytes from every segment) and clamps the peer's MSS
//     option to Config.MSS (MSS clamping, as routers do);
//   - keeps the dynamic ARP table within Config.ARPEntries (see Config);
//   - reassembles IPv4 datagrams from their fragments itself, within
//     bounds it counts, and passes them on whole: netstack never sees a
//     fragment (its reassembly discards datagrams at its memory limit
//     without a count);
//   - counts frames and bytes per protocol.
//
// The Stack counts established connections against Config.MaxConnections;
// half-open connections live in netstack's SYN queue and SYN cookies, and do
// not use the budget.
//
// # Bounds
//
// Every table and buffer is bounded; the Stats field that counts hitting
// the bound is in brackets.
//   - Established TCP connections: Config.MaxConnections, default 64
//     [ConnsRefused]; accepted ones from one remote address:
//     Config.MaxConnectionsPerSource, default half of MaxConnections
//     [ConnsRefusedPerSource], so that one host cannot lock the others out.
//   - A connection's life after its peer vanished: TCP keepalive probes it
//     after Config.KeepaliveIdle of silence, every KeepaliveInterval, and
//     resets it after KeepaliveCount unanswered probes; data left
//     unacknowledged as long resets it too. Defaults 30 s, 5 s, 5: 55 s
//     [TCPPeerTimeouts]. With Config.IdleTimeout (off by default), a
//     connection on which nothing was read or written for that long is
//     reset [ConnsIdleClosed]. Either way the program's Close frees the
//     slots, as after any reset.
//   - Per TCP connection: Config.SendBuffer and Config.ReceiveBuffer, 32 KiB
//     each; the receive window advertised is the receive buffer, which
//     auto-tuning grows, for a program that reads faster than its window
//     per round trip, up to Config.ReceiveBufferMax (default 1 MiB); the
//     send buffer grows with the congestion window up to
//     Config.SendBufferMax (default 1 MiB).
//     Inbound segments waiting for processing or reading: twice the receive
//     buffer, and 64 KiB more for segments without payload (ACKs, RSTs),
//     in netstack's accounting, about 800 bytes for such a segment
//     [DropTCPQueueFull].
//   - Connections in TIME-WAIT (closed by this stack first): a record of
//     about 100 bytes each, not the netstack endpoint, kept for
//     Config.TimeWait (default 60 s); at most Config.MaxTimeWait (default
//     65536), beyond which a connection closes without TIME-WAIT
//     [TCPTimeWaitOverflow; TCPTimeWait is the gauge].
//   - Frames waiting in the link (a link.TxBacklogger such as link/pipe):
//     a TCP Write waits while more than half the link's queue, at most
//     1024 frames, wait [TCPWritesHeld], until the link has sent half of
//     them or for 20 ms at most, so that a queue longer than TCP's
//     retransmission timeout does not build up.
//   - Per listener: a SYN queue and an accept queue of
//     min(max(MaxConnections, 16), 1024) each; SYNs beyond the SYN queue are
//     answered with SYN cookies [TCPSYNCookiesTx], handshakes beyond the
//     accept queue dropped [DropTCPListenFull]. Inbound segments waiting
//     for processing: 256 KiB (about 300 segments), of which segments
//     without payload may fill the last 64 KiB only when they repeat one
//     refused in the last second or two, as a client's retransmission does
//     and a flood's segments do not [DropTCPQueueFull, TCPQueueRetries].
//     Once its queue has been full, a listener is flooded until a second
//     after the last segment it refused, and takes at most 2,000 segments
//     without payload a second (bursts of 256) beside the retries
//     [DropTCPQueueFull]: a flood's SYN costs netstack a SYN cookie and a
//     SYN-ACK, and the bound leaves the CPU to the link's reader.
//     So a SYN or ACK flood costs a constant amount of memory and CPU,
//     whatever its rate: what the stack cannot process in time is dropped
//     and counted, like a full kernel backlog, and a real client, whose
//     retransmissions get in first, is still served, a retransmission
//     (about a second) later than without the flood. Under such a flood, a segment for the
//     full listener is refused before netstack's IPv4 layer, at the cost of
//     one demultiplexer lookup.
//   - Per UDP socket: Config.UDPReceiveBuffer bytes, default 1 MiB (each
//     datagram counts its payload, at most the link MTU - 28 bytes, plus
//     32), and Config.UDPReceiveQueue datagrams [DropUDPBufferFull].
//   - UDP sockets: one per port, so at most 65,535 per Stack, in the
//     stack's own port table (paged: 2 KiB per 256 ports in use, 512 KiB
//     at most). An idle listener costs about 0.9 KB of heap: 65,535 open
//     in about half a second and under 64 MiB (bench rows udp_listen_64k
//     and udp_listen_64k_mem). Its receive ring (4 KiB, doubling as it
//     fills) is allocated when a datagram first waits in it,
//     and a netstack endpoint (about 14 KB) only when the socket needs one:
//     a connected socket (DialUDP), a multicast membership, a send to a
//     broadcast, local or looped-back multicast address, or a datagram
//     left to netstack (IP options, larger than the link MTU - 28). A ServeUDP
//     socket has a goroutine of its own.
//   - Dynamic ARP entries: Config.ARPEntries, default 128 [ARPTableFull,
//     ARPEvictions]; an unanswered resolution is given up after
//     Config.ARPTimeout [ARPTimeouts]. While resolving, netstack holds at
//     most 256 packets for each of at most 64 addresses.
//   - IPv4 reassembly: at most 64 datagrams and 1 MiB of fragments (each
//     counted as its frame plus a PacketBuffer, as netstack counts it);
//     the oldest datagrams are discarded to make room for a newer one
//     [DropIPv4FragEvicted]. A datagram has 30 s from its first fragment
//     [DropIPv4FragTimeout], and at most 128 fragments and 65535 bytes
//     [DropIPv4Malformed].
//   - link/pipe: 1024 frames per direction waiting behind a delivery in
//     progress (pipe.Stats.Dropped).
//   - Config.Logger: at most 10 records a second per Logger, the stack's
//     events and netstack's log together [LogSuppressed].
//
// # Dialing, accepting, options and shutdown as in package net
//
// Dialer is tickwire's net.Dialer: its DialContext(ctx, network, address)
// is what http.Transport and gRPC take, for "tcp", "tcp4", "udp" and
// "udp4" and numeric IPv4 addresses (the stack resolves no names), with
// Timeout, Deadline, LocalAddr, KeepAlive and KeepAliveConfig as net.Dialer
// has them. TCPListener.AcceptContext and TCPListener.SetDeadline bound an
// Accept as net.TCPListener's SetDeadline does, failing with errors whose
// Timeout method reports true. A TCPConn has net.TCPConn's options:
// SetKeepAlive, SetKeepAlivePeriod, SetKeepAliveConfig, SetLinger,
// SetNoDelay, SetReadBuffer, SetWriteBuffer, and SetTOS for the IPv4 TOS
// byte (the DSCP) of its segments; UDPConn.SetTOS marks datagrams.
// Stack.Shutdown(ctx) stops a stack gracefully, as http.Server.Shutdown
// stops a server: it stops accepting, sends every connection's written
// bytes and FIN, waits for the peers to acknowledge them until ctx ends,
// then resets what is left and closes.
//
// # net.Conn or the handler API
//
// Use net.Conn (Read and Write on a goroutine per connection) for anything
// that is not on the hot path: it is the familiar interface, and each
// message costs a goroutine wake-up. In stock mode a Read that waits is
// handed the segments that arrive for it and runs their TCP processing
// itself, instead of netstack's processor goroutine doing it and then
// waking the reader; the ACK for them waits, at most 1 ms, for the
// program's next Write to carry it (as latency mode's ACKs do), unless
// more than one full segment is unacknowledged. Use the handler API for the hot path:
// TCPConn.OnReceive, or Stack.ServeTCP, hands received bytes to a handler
// that may Write the answer at once. Handlers must not block: a handler's
// Write on a full send buffer returns ErrSendBufferFull instead of waiting.
// Both paths allocate nothing per TCP round trip. UDP datagrams are
// delivered directly, past netstack's UDP endpoint, in both modes (see
// UDPConn): Stack.ServeUDP and UDPConn.OnReceive handlers,
// ReadFromUDPAddrPort and WriteToUDPAddrPort allocate nothing per
// datagram; ReadFrom allocates the address it returns.
//
// # Receive times
//
// Every inbound frame carries the time its link received it: link/tap's
// read, link/pipe's send, a replay's capture time (pcap.TimestampInjector),
// a NIC's own stamp (link.TimestampDispatcher); a frame from a link that
// stamps nothing is stamped when it reaches the stack. The clock is the
// real-time clock time.Now reads, which PTP or NTP keep in step with the
// exchange's, so the times compare with the timestamps in market data.
// UDPConn.RxTime gives the time of the datagram a handler is handling or a
// read returned; TCPConn.RxTime the time of the newest segment with
// payload, which in a handler is the one that brought its bytes. Neither
// allocates; stamping costs one reading of the monotonic clock per frame,
// on the link's reader (the real-time offset is refreshed every 100 ms):
// tens of nanoseconds where the clock is read from user space, 100 to
// 250 ns on a virtual machine whose clock source needs a system call.
//
// # Latency mode
//
// Config.Latency (off by default) trades the simplicity of netstack's
// threading for round-trip time. In latency mode
//   - inbound TCP segments of established connections are processed on the
//     goroutine that delivers the frame (the link's reader, or the writer on
//     the other end of link/pipe) instead of one of netstack's TCP processor
//     goroutines; segments that arrived while the program's Read or Write
//     held the connection are processed when it returns;
//   - frames written inside a netstack call (a Read, a Write, the
//     processing and the handler run after it) leave when the call returns,
//     so that a reply arriving inline never finds the connection held;
//   - segments of the connections the program holds (from DialTCP or
//     Accept, until Close) skip netstack's IPv4 layer and demultiplexer,
//     which decide nothing for them;
//   - OnReceive handlers run right after the processing, on the same
//     goroutine, without waking a reader; over link/pipe a whole request
//     and reply runs inside the requester's Write;
//   - pure ACKs are delayed, as by a TCP with delayed ACKs, for at most
//     1 ms, and never sent when the connection's next segment (the
//     handler's answer, the next request) carries the acknowledgement
//     first: a request/reply exchange costs two segments instead of three.
//     Duplicate ACKs and window updates are never delayed, and a bulk
//     sender still gets an ACK for every other full segment; a Read that
//     frees most of the receive buffer (the window it opens is at least
//     twice what the sender may still send) announces it at once, as
//     Linux's read path does, so that a bulk transfer (a snapshot, a
//     recovery burst) keeps the stock mode's rate;
//   - netstack's clock is read once for a TCP segment of a held connection
//     (until a handler runs) and once per Write, as Linux stamps a segment
//     once: a reading on another goroutine meanwhile may be that many
//     microseconds in the past;
//   - with Config.BusyPoll > 0, a Read or Write that would block, a
//     handler's goroutine and the link's reader (a link.BusyPoller) spin for
//     up to BusyPoll before they sleep.
//
// Cost: without BusyPoll, no CPU beyond the stock mode's (the same TCP work
// runs on other goroutines, with fewer wake-ups and fewer segments built),
// but the delivering goroutine now also runs TCP and the handlers, so a slow
// handler delays every connection behind it. While ACKs wait, a timer ticks
// every 0.5 ms (none when idle). With BusyPoll, each waiting goroutine keeps
// a core busy for up to BusyPoll per wait. Latency mode changes who runs
// TCP and when, never what TCP does: whatever cannot go the synchronous way
// goes through netstack's processors. bench/README.md has the round trips
// it buys; DESIGN.md says why it is built this way and what was measured.
//
// # Concurrency
//
// A Stack and the listeners and connections it returns are safe for
// concurrent use.
// tickwire adds one goroutine per Stack (the ARP evictor), one more with
// Config.IdleTimeout (the idle sweeper), one per connection with an
// OnReceive handler (it runs the handler when the synchronous path did not)
// and one per ServeTCP listener (it accepts), and a timer while fragments
// await reassembly; netstack runs its TCP processors and timers. Close
// joins them all. Shutdown and a lingering Close wait on the caller's
// goroutine. With Config.LockOSThread, the link's reader (link.ThreadLocker)
// and the OnReceive goroutines are locked to their OS threads.
package tickwire
