// Package mirror reassembles TCP byte streams passively, from frames copied
// by a switch's mirror (SPAN) port or read from a capture file. The receiver
// cannot take part in the connection: it cannot handshake, acknowledge or ask
// for a retransmission. It puts segments back in order and hands the in-order
// bytes of every flow direction to a Handler with the lowest possible latency,
// and it never waits forever or loses bytes silently: a hole that will not be
// filled is skipped and reported as a gap.
//
// A typical loop feeds frames with their capture timestamps:
//
//	a, err := mirror.New(mirror.Config{}, handler)
//	...
//	for each frame {
//		a.HandleFrame(frame, ts) // per-frame errors are counted in Stats
//	}
//	a.Close() // end of input: report the remaining gaps, end every flow
//
// # Semantics
//
// Each TCP flow direction (FlowKey) is reassembled on its own. Its stream
// offset 0 is the byte after its own SYN (ISN+1) when the SYN or SYN-ACK was
// seen; otherwise the first segment with payload sets offset 0 (mid-stream
// pickup). Segments without payload never set the start and carry no data.
// Bytes before the start are dropped: they are neither data nor a gap.
// Sequence numbers wrap around at 2^32; stream offsets are 64-bit.
//
// The first copy of every byte wins, in capture order, also over bytes held
// out of order (this is what the real receiver, Linux, keeps). A later segment
// still fills bytes that nobody has covered yet. A segment with no new byte is
// a duplicate; one whose bytes differ from the copy already held (or, with
// Config.History, already delivered) is an overlap anomaly. Both are counted
// in Stats.
//
// A hole is skipped, and reported once through Handler.Gap, when the
// out-of-order buffer of its flow direction is full, when it is older than
// Config.HoleTimeout in capture time, when the flow ends (RST, a FIN whose
// preceding data does not arrive within HoleTimeout, eviction) or at Close.
// Data after the hole is still delivered. Every maximal missing run between
// offset 0 and the last delivered byte is reported as exactly one gap, in
// increasing offset order, so for every flow direction the delivered bytes and
// the reported gaps tile the stream from offset 0 without overlap: delivered
// bytes + gaps = the stream. Missing bytes after the last delivered byte are
// not a gap.
//
// A FIN ends its direction once every byte before it has been delivered; if
// some are missing, the direction waits at most HoleTimeout of capture time
// for them (a mirror often sees the FIN before the retransmission of a lost
// segment) and then skips the holes. An RST ends its direction at once. After
// the end, segments without payload are dropped and do not start a new flow;
// a SYN with a new initial sequence number does.
//
// # Checksums
//
// A mirror port also copies frames that the real receiver dropped for a bad
// checksum; delivering them would let a corrupt first copy win over the good
// retransmission. ChecksumVerify drops every segment whose IPv4 header or TCP
// checksum is wrong. ChecksumAuto, the default, does the same, except that a
// flow direction whose segments fail the TCP checksum while their IPv4 headers
// are good, and which has not shown a single good TCP checksum, is treated as
// checksum-offloaded (captures taken on the sending host carry unfilled TCP
// checksums): its segments are accepted, counted in Stats.ChecksumOffloaded and
// the direction is listed by OffloadedFlows. A direction is taken as offloaded
// on its first failing segment when the checksum field holds what an
// offloading stack leaves there (the pseudo-header sum, its complement, or
// zero), and otherwise after 3 consecutive failing data segments; the failing
// segments before that decision are dropped. Once a direction has shown a good
// TCP checksum it is never offloaded, so a corrupt copy cannot win there.
// ChecksumIgnore accepts every segment.
//
// # Bounds
//
// Memory is bounded by the Config: at most BufferPerFlow bytes held out of
// order per flow direction, in at most 32 separate runs; at most MaxFlows
// flow directions (an ended one is reused, or else the least recently
// active one is evicted, and counted, to make room for a new one); and at
// most MaxBufferTotal bytes of reassembly buffers across all directions
// (64 MiB by default), free ones kept for reuse included. A direction
// holds a buffer only while it holds bytes out of order (with History,
// while it lives and a buffer is to be had), so an idle direction costs its
// flow state alone, 192 bytes allocated once in New. When every
// buffer is taken and a direction must hold bytes, the least recently
// active of the directions that have held theirs longest gives its buffer
// up: its holes are skipped and reported as gaps (Stats.BufferTotalSkips),
// like those of a full per-direction buffer, so the streams stay tiled by
// data and gaps. In all: about 200 bytes of flow state per MaxFlows and
// MaxBufferTotal bytes of buffers (plus 800 bytes of bookkeeping each);
// steady-state processing allocates nothing.
//
// A multi-queue source runs one Assembler per receive queue; a Budget
// (Config.Budget) bounds their flow directions and buffers together, so
// that the configured figures hold for the source as a whole however
// unevenly RSS spreads the flows.
//
// IPv4 fragments are not reassembled: they are counted in Stats.Fragments and
// dropped, so their bytes become holes (market-data and most TCP traffic is
// sent with Don't Fragment). IPv6 is not handled (counted as NonTCP).
//
// # Performance
//
// In-order data goes to Handler.Data straight from the frame. The TCP
// checksum, which reads every payload byte, is the largest cost per segment
// (a vector loop on amd64 with AVX2); ChecksumIgnore removes it when the NIC
// or the capture already guarantees checksums.
//
// HandleFrame takes the common segment (untagged, IPv4 without options, no
// SYN, FIN or RST, of a started flow, with good checksums) through a
// straight path of its own, and asks for the frame's cache lines before it
// checks the headers; HandleIPv4 and tagged frames take the general path,
// with the same results. The flow of the previous segment and a small
// cache of recent flows are tried before the hash table, so a few
// interleaved flows cost little more than one.
//
// # Link types
//
// HandleFrame takes Ethernet frames (with up to two VLAN tags) and
// HandleIPv4 bare IPv4 packets. HandleLinkFrame takes a frame with its pcap
// link type, as link/frame's Frame carries it (Frame.LinkType, with the
// constants of link/frame): Ethernet, Linux cooked captures (LINUX_SLL, as
// tcpdump -i any writes, and LINUX_SLL2) and raw IP (RAW and IPV4). The same
// packets give the same streams, gaps and counters whatever their link
// type; a frame of another link type is counted in Stats.UnsupportedLink.
// A loop over a frame.Source:
//
//	n, err := src.ReadFrames(batch)
//	for _, f := range batch[:n] {
//		a.HandleLinkFrame(f.LinkType, f.Data(), f.Time)
//	}
//
// The package has no dependency on the netstack or on link/*: it takes frames
// and packets as byte slices, and link types as numbers.
package mirror
