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
package tickwire
