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
//   - Per UDP socket: netstack's 32 KiB receive buffer [DropUDPBufferFull].
//   - Dynamic ARP entries: Config.ARPEntries, default 128 [ARPTableFull,
//     ARPEvictions]; an unanswered resolution is given up after
//     Config.ARPTimeout [ARPTimeouts]. While resolving, netstack holds at
//     most 256 packets for each of at most 64 addresses.
//   - IPv4 reassembly: netstack keeps at most 4 MiB of fragments, each
//     datagram at most 30 s [DropIPv4Malformed].
//   - link/pipe: 1024 frames per direction waiting behind a delivery in
//     progress (pipe.Stats.Dropped).
//
// # Concurrency
//
// A Stack and the connections it returns are safe for concurrent use.
// tickwire adds one goroutine per Stack (the ARP evictor); netstack runs its
// TCP processors and timers. Close joins them all.
package tickwire
