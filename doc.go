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
//	ln, err := s.ListenTCP(7)                                           // net.Listener
//	c, err := s.DialTCP(ctx, netip.MustParseAddrPort("10.0.0.1:9000")) // net.Conn
//	pc, err := s.ListenUDP(7)                                           // net.PacketConn
//	st := s.Stats()
//	s.Close()
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
//     [ConnsRefused].
//   - Per TCP connection: Config.SendBuffer and Config.ReceiveBuffer, 32 KiB
//     each; the receive window advertised is half the receive buffer.
//   - Per listener: a SYN queue and an accept queue of
//     min(max(MaxConnections, 16), 1024) each; SYNs beyond the SYN queue are
//     answered with SYN cookies [TCPSYNCookiesTx], handshakes beyond the
//     accept queue dropped [DropTCPListenFull].
//   - Per UDP socket: Config.UDPReceiveQueue datagrams, default 128, each at
//     most the link MTU - 28 bytes [DropUDPBufferFull].
//   - Dynamic ARP entries: Config.ARPEntries, default 128 [ARPTableFull,
//     ARPEvictions]; an unanswered resolution is given up after
//     Config.ARPTimeout [ARPTimeouts]. While resolving, netstack holds at
//     most 256 packets for each of at most 64 addresses.
//   - IPv4 reassembly: netstack keeps at most 4 MiB of fragments, each
//     datagram at most 30 s [DropIPv4Malformed].
//   - link/pipe: 1024 frames per direction waiting behind a delivery in
//     progress (pipe.Stats.Dropped).
//
// # Latency mode, and net.Conn or the fast API
//
// Config.Latency (off by default) makes TCP run on the goroutine that
// delivers each frame instead of netstack's processor goroutines, holds the
// frames written inside a netstack call until it returns, and runs OnReceive
// handlers right where the segment was processed; Config.BusyPoll adds an
// opt-in spin before sleeping. See Config.Latency for the CPU cost. The
// suite runs in both modes (TICKWIRE_LATENCY=1 forces latency mode on in
// every stack, for any test or benchmark).
//
// Use net.Conn (Read and Write on a goroutine per connection) for anything
// that is not on the hot path: it is the familiar interface, and each
// message costs a goroutine wake-up. Use the fast API for the hot path:
// TCPConn.OnReceive, or Stack.ServeTCP, hands received bytes to a handler
// that may Write the answer at once; in latency mode no goroutine is woken
// between the link and the handler, and over link/pipe a whole request and
// reply runs inside the requester's Write, and the answer carries the ACK
// netstack would have sent alone. Handlers must not block (a handler's
// Write on a full send buffer returns ErrWouldBlock instead of waiting).
// Both paths allocate nothing per TCP round trip. UDP datagrams bypass
// netstack's UDP endpoint in both modes (see UDPConn): Stack.ServeUDP and
// UDPConn.OnReceive handlers, ReadFromUDPAddrPort and WriteToUDPAddrPort
// allocate nothing per datagram; ReadFrom allocates the address it returns.
//
// What it buys, measured on a shared 2-vCPU machine (64-byte TCP
// ping-pong, go run ./bench -only rtt, ratios within one run, quiet
// machine): through the fast API over link/pipe, p50 8.1 us against 17.0 us
// for Linux loopback (0.47x; 1.0x before ACKs were delayed and left unbuilt
// and segments of held connections skipped netstack's network layer), p99
// 15 us (1.8x its p50); a kernel client over TAP to a ServeTCP handler
// 17.2 us against 17.4 us kernel to kernel over veth (0.99x; seven more
// runs gave 0.987 to 0.995x); net.Conn on both sides over link/pipe in
// stock mode 21.7 us (1.27x). Over TAP the two sides are nearly the same
// work: two wake-ups and the kernel's own TCP on the client; tickwire wins
// by its share (netstack plus one read and one write on the device)
// costing a little less than the kernel server's TCP and system calls,
// after the device was made to cost what a veth does (link/tap: no qdisc,
// checksum offload both ways). A round trip through the fast API is one
// goroutine's CPU time (about 56,000 instructions, callgrind), nearly all
// of it netstack's own TCP processing of the two segments a request/reply
// costs. Figures move by 20 to 30% with the machine's load; tails follow
// it, as the kernel's do. Busy-polling did not help there and made
// kernel-to-stack round trips over TAP worse (the spinning goroutines
// starve the kernel's side), so it is off unless asked for.
//
// # Concurrency
//
// A Stack and the connections it returns are safe for concurrent use.
// tickwire adds one goroutine per Stack (the ARP evictor), one per
// connection with an OnReceive handler (it runs the handler when the
// synchronous path did not) and one per ServeTCP listener (it accepts);
// netstack runs its TCP processors and timers. Close joins them all.
package tickwire
