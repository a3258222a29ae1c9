package tickwire

import (
	"io"
	"reflect"
	"strconv"
	"sync/atomic"

	"github.com/tickwire/tickwire/link"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// Stats is a snapshot of a Stack's counters, all monotonic except the
// ARPEntries, TCPTimeWait and ConnsOpen gauges. Frame and byte counts are taken at the
// link (Bytes count whole Ethernet frames, header included, FCS excluded), so
// they include frames netstack later drops; the rest come from netstack's
// own counters or from tickwire's bounds.
type Stats struct {
	// Frames per protocol at the link. IPv4 counts all IPv4 frames; ICMP,
	// UDP and TCP count the IPv4 frames carrying them (by the IPv4 protocol
	// field, first fragments and later ones alike).
	EthernetRxPackets, EthernetRxBytes, EthernetTxPackets, EthernetTxBytes uint64
	IPv4RxPackets, IPv4RxBytes, IPv4TxPackets, IPv4TxBytes                 uint64
	ARPRxPackets, ARPRxBytes, ARPTxPackets, ARPTxBytes                     uint64
	ICMPRxPackets, ICMPRxBytes, ICMPTxPackets, ICMPTxBytes                 uint64
	UDPRxPackets, UDPRxBytes, UDPTxPackets, UDPTxBytes                     uint64
	TCPRxPackets, TCPRxBytes, TCPTxPackets, TCPTxBytes                     uint64

	// Drops by reason.
	DropEtherType     uint64 // frames neither IPv4 nor ARP (tickwire)
	DropIPv4Checksum  uint64 // IPv4 header checksum wrong (tickwire, or a link that verifies)
	DropIPv4Malformed uint64 // IPv4 packets found malformed: bad version, lengths or options (netstack); fragments with bad lengths, or overlapping or conflicting with others of their datagram, or making it over 128 fragments or 65535 bytes (tickwire, which discards the datagram with them)
	DropIPv4NotForUs  uint64 // IPv4 destination neither ours nor broadcast/multicast we accept
	DropIPv4Protocol  uint64 // IPv4 protocol other than ICMP, UDP or TCP
	DropARPMalformed  uint64 // ARP packets netstack found malformed
	DropICMPInvalid   uint64 // ICMP messages found invalid (short, bad checksum)
	DropUDPChecksum   uint64 // UDP datagrams with a bad checksum
	DropUDPMalformed  uint64 // UDP datagrams with bad lengths
	DropUDPNoListener uint64 // UDP datagrams to a port nobody listens on (answered with ICMP port unreachable)
	DropUDPBufferFull uint64 // UDP datagrams dropped because the socket's receive buffer was full
	DropTCPChecksum   uint64 // TCP segments with a bad checksum
	DropTCPInvalid    uint64 // TCP segments netstack rejected as malformed or out of state
	DropTCPListenFull uint64 // SYNs and handshake ACKs dropped because a listener's accept queue was full
	DropTCPQueueFull  uint64 // TCP segments dropped because their endpoint (a listener or a connection) already held its receive buffer, or 64 KiB beyond it for segments without payload: what bounds a SYN, ACK or RST flood (tickwire)
	DropTCPSYNSource  uint64 // SYNs nobody can answer: from a broadcast, multicast, unspecified or our own address, or from off the subnet without a Gateway (tickwire)
	DropTotal         uint64 // netstack's total of dropped packets (overlaps the above)

	// IPv4 reassembly, which tickwire does in place of netstack (fragments
	// dropped alone are in DropIPv4Malformed and DropIPv4NotForUs).
	IPv4Reassembled     uint64 // datagrams reassembled from fragments and passed on
	DropIPv4FragTimeout uint64 // datagrams discarded with their fragments, still incomplete 30 s after their first fragment
	DropIPv4FragEvicted uint64 // incomplete datagrams discarded with their fragments, oldest first, to keep reassembly within 64 datagrams and 1 MiB

	// ICMP.
	ICMPEchoRequestsRx, ICMPEchoRepliesTx uint64 // pings answered by the stack
	ICMPEchoRequestsTx, ICMPEchoRepliesRx uint64 // pings sent by Ping and their replies
	ICMPUnreachableTx                     uint64 // destination/port unreachable messages sent

	// ARP and the neighbor table.
	ARPRequestsRx, ARPRepliesRx, ARPRequestsTx, ARPRepliesTx uint64
	ARPMisses                                                uint64 // lookups that found no entry and started a resolution
	ARPTimeouts                                              uint64 // resolutions given up after Config.ARPTimeout
	ARPEvictions                                             uint64 // entries evicted to keep the table within Config.ARPEntries
	ARPTableFull                                             uint64 // ARP packets from unknown hosts dropped because the table was full
	ARPEntries                                               uint64 // current dynamic entries (gauge)

	// TCP.
	TCPRetransmits      uint64 // segments retransmitted
	TCPFastRetransmits  uint64 // fast retransmits (three duplicate ACKs)
	TCPTimeouts         uint64 // retransmission timer expiries
	TCPResetsTx         uint64
	TCPResetsRx         uint64
	TCPNoACKRx          uint64 // segments with none of SYN, ACK and RST (NULL and FIN scans), which TCP discards or answers with a RST on a closed port
	TCPQueueRetries     uint64 // segments a full listener queue took because they repeat one it refused in the last second or two: a client's retransmitted SYN or handshake data, which a flood's segments are not (tickwire)
	TCPSYNCookiesTx     uint64 // SYN-ACKs answered with a SYN cookie (SYN queue full)
	TCPSYNCookiesRx     uint64 // valid cookies that completed a handshake
	TCPSYNCookiesBad    uint64 // ACKs with an invalid cookie
	TCPPeerTimeouts     uint64 // established connections reset because the peer stopped answering: keepalive probes, or data unacknowledged past the user timeout or the retransmission limit
	TCPTimeWait         uint64 // connections in TIME-WAIT, held as records (gauge; see Config.TimeWait)
	TCPTimeWaitOverflow uint64 // connections closed without TIME-WAIT because Config.MaxTimeWait were held (tickwire)
	TCPWritesHeld       uint64 // Writes held because the link's transmit backlog was over half its queue, at most 1024 frames (link.TxBacklogger; tickwire)

	// Connections.
	ConnsOpen             uint64 // established connections holding a slot (gauge)
	ConnsAccepted         uint64 // connections returned by Accept
	ConnsDialed           uint64 // connections returned by DialTCP
	ConnsRefused          uint64 // accepts reset and dials refused by Config.MaxConnections
	ConnsRefusedPerSource uint64 // accepts reset by Config.MaxConnectionsPerSource (not in ConnsRefused)
	ConnsIdleClosed       uint64 // connections reset by Config.IdleTimeout
	ConnsFailed           uint64 // dials that failed (refused, unreachable, timed out, cancelled)

	// Latency mode (zero when it is off).
	LatencySyncRuns     uint64 // TCP processing runs on a delivering or calling goroutine instead of a netstack processor
	LatencyFallbacks    uint64 // segments of established connections left to a netstack processor because the pending list (64 endpoints) was full
	LatencyInlineRuns   uint64 // OnReceive handler runs on the delivering goroutine, right after the processing
	LatencyOutboxFull   uint64 // frames sent at once because 1024 frames were already waiting for netstack calls to return
	LatencyACKsMerged   uint64 // pure ACKs dropped because a later segment of the same connection (an answer, the next request, another ACK) carried the acknowledgement
	LatencyACKsHeld     uint64 // pure ACKs delayed (held past the batch they were written in)
	LatencyACKsLate     uint64 // delayed ACKs sent when their delay (0.5 to 1 ms) ran out, nothing having carried them
	LatencyACKEvictions uint64 // connections past the handshake whose delayed-ACK state another connection took (a 256-slot table): their next ACK is not delayed
	LatencyTCPDirect    uint64 // TCP segments of held connections queued straight to their endpoint, past netstack's IPv4 layer and demultiplexer

	// Logging.
	LogSuppressed uint64 // records not passed to Config.Logger because 10 had passed in that second (the Logger's count, shared by the Stacks that share it)
}

// statsNames are the names of Stats' fields, in field order. Every field
// is a uint64 (a Stats field of another type panics here, when the package
// loads), so Append reads them by index.
var statsNames = func() []string {
	t := reflect.TypeFor[Stats]()
	names := make([]string, t.NumField())
	for i := range names {
		f := t.Field(i)
		if f.Type.Kind() != reflect.Uint64 {
			panic("tickwire: Stats." + f.Name + " is not a uint64")
		}
		names[i] = f.Name
	}
	return names
}()

// Append appends the non-zero counters to b, one per line as the field
// name, a space and the decimal value, in field order, and returns the
// extended slice. It allocates only when b lacks room (at most 40 bytes a
// counter).
func (s Stats) Append(b []byte) []byte {
	fields := reflect.ValueOf(&s).Elem()
	for i := range statsNames {
		if v := fields.Field(i).Uint(); v != 0 {
			b = append(b, statsNames[i]...)
			b = append(b, ' ')
			b = strconv.AppendUint(b, v, 10)
			b = append(b, '\n')
		}
	}
	return b
}

// WriteTo writes the non-zero counters to w in Append's format with a
// single Write call. It implements io.WriterTo.
func (s Stats) WriteTo(w io.Writer) (int64, error) {
	// Room for every counter at full width, so the buffer is allocated once
	// (it escapes to w) and never grown.
	buf := make([]byte, 0, len(statsNames)*statsLineMax)
	n, err := w.Write(s.Append(buf))
	return int64(n), err
}

// statsLineMax bounds an Append line: the longest name, a space, 20
// digits and a newline.
const statsLineMax = 44

// counter pairs a packet count with a byte count.
type counter struct {
	packets, bytes atomic.Uint64
}

func (c *counter) add(n int) {
	c.packets.Add(1)
	c.bytes.Add(uint64(n))
}

// remove takes back an add(n).
func (c *counter) remove(n int) {
	c.packets.Add(^uint64(0))
	c.bytes.Add(^uint64(n - 1))
}

// wireCounters are the counters tickwire's link wrapper keeps.
type wireCounters struct {
	ethRx, ethTx, ipRx, ipTx, arpRx, arpTx     counter
	icmpRx, icmpTx, udpRx, udpTx, tcpRx, tcpTx counter
	dropEtherType, dropIPv4Checksum            atomic.Uint64
	tcpNoACK, dropSYNSource                    atomic.Uint64 // see wire.inboundTCP
	tcpDirect                                  atomic.Uint64 // latency mode: segments past netstack's network layer
	// tcpDeferred counts the endpoints wire.processDeferred processed,
	// tcpDeferredKicked those it left to a processor (this stack was
	// sending); tests read them.
	tcpDeferred, tcpDeferredKicked atomic.Uint64
}

// byIPProtocol returns the rx or tx counter of an IPv4 payload protocol, nil
// for others.
func (w *wireCounters) byIPProtocol(proto uint8, rx bool) *counter {
	switch proto {
	case uint8(header.ICMPv4ProtocolNumber):
		if rx {
			return &w.icmpRx
		}
		return &w.icmpTx
	case uint8(header.UDPProtocolNumber):
		if rx {
			return &w.udpRx
		}
		return &w.udpTx
	case uint8(header.TCPProtocolNumber):
		if rx {
			return &w.tcpRx
		}
		return &w.tcpTx
	}
	return nil
}

// Stats returns a snapshot of the stack's counters. It is safe to call
// concurrently with traffic and after Close.
func (s *Stack) Stats() Stats {
	w := &s.wire.counters
	ns := s.st.Stats()
	var st Stats
	st.EthernetRxPackets, st.EthernetRxBytes = w.ethRx.packets.Load(), w.ethRx.bytes.Load()
	st.EthernetTxPackets, st.EthernetTxBytes = w.ethTx.packets.Load(), w.ethTx.bytes.Load()
	st.IPv4RxPackets, st.IPv4RxBytes = w.ipRx.packets.Load(), w.ipRx.bytes.Load()
	st.IPv4TxPackets, st.IPv4TxBytes = w.ipTx.packets.Load(), w.ipTx.bytes.Load()
	st.ARPRxPackets, st.ARPRxBytes = w.arpRx.packets.Load(), w.arpRx.bytes.Load()
	st.ARPTxPackets, st.ARPTxBytes = w.arpTx.packets.Load(), w.arpTx.bytes.Load()
	st.ICMPRxPackets, st.ICMPRxBytes = w.icmpRx.packets.Load(), w.icmpRx.bytes.Load()
	st.ICMPTxPackets, st.ICMPTxBytes = w.icmpTx.packets.Load(), w.icmpTx.bytes.Load()
	st.UDPRxPackets, st.UDPRxBytes = w.udpRx.packets.Load(), w.udpRx.bytes.Load()
	st.UDPTxPackets, st.UDPTxBytes = w.udpTx.packets.Load(), w.udpTx.bytes.Load()
	st.TCPRxPackets, st.TCPRxBytes = w.tcpRx.packets.Load(), w.tcpRx.bytes.Load()
	st.TCPTxPackets, st.TCPTxBytes = w.tcpTx.packets.Load(), w.tcpTx.bytes.Load()

	st.DropEtherType = w.dropEtherType.Load()
	st.DropIPv4Checksum = w.dropIPv4Checksum.Load()
	// netstack never sees a fragment: its MalformedFragmentsReceived (which
	// it counted in MalformedPacketsReceived as well) stays 0.
	st.DropIPv4Malformed = ns.IP.MalformedPacketsReceived.Value() + s.wire.frags.malformed.Load()
	st.DropIPv4NotForUs = ns.IP.InvalidDestinationAddressesReceived.Value() + s.wire.frags.notForUs.Load()
	for _, proto := range ns.NICs.UnknownL4ProtocolRcvdPacketCounts.Keys() {
		if c, ok := ns.NICs.UnknownL4ProtocolRcvdPacketCounts.Get(proto); ok {
			st.DropIPv4Protocol += c.Value()
		}
	}
	st.DropARPMalformed = ns.ARP.MalformedPacketsReceived.Value()
	st.DropICMPInvalid = ns.ICMP.V4.PacketsReceived.Invalid.Value()
	st.DropUDPChecksum = ns.UDP.ChecksumErrors.Value()
	st.DropUDPMalformed = ns.UDP.MalformedPacketsReceived.Value()
	st.DropUDPNoListener = ns.UDP.UnknownPortErrors.Value()
	st.DropUDPBufferFull = ns.UDP.ReceiveBufferErrors.Value()
	st.DropTCPChecksum = ns.TCP.ChecksumErrors.Value()
	st.DropTCPInvalid = ns.TCP.InvalidSegmentsReceived.Value()
	st.DropTCPListenFull = ns.TCP.ListenOverflowSynDrop.Value() + ns.TCP.ListenOverflowAckDrop.Value()
	st.DropTCPSYNSource = w.dropSYNSource.Load()
	if s.tcp != nil {
		st.DropTCPQueueFull = s.tcp.queueFull.Load()
		st.TCPQueueRetries = s.tcp.retries.Load()
	}
	st.DropTotal = ns.DroppedPackets.Value()
	st.IPv4Reassembled = s.wire.frags.reassembled.Load()
	st.DropIPv4FragTimeout = s.wire.frags.timedOut.Load()
	st.DropIPv4FragEvicted = s.wire.frags.evicted.Load()
	if l, ok := s.cfg.Link.(link.ChecksumDropCounter); ok {
		ipv4, tcp, udp, icmp := l.RxChecksumDrops()
		st.DropIPv4Checksum += ipv4
		st.DropTCPChecksum += tcp
		st.DropUDPChecksum += udp
		st.DropICMPInvalid += icmp
	}

	st.ICMPEchoRequestsRx = ns.ICMP.V4.PacketsReceived.EchoRequest.Value()
	st.ICMPEchoRepliesTx = ns.ICMP.V4.PacketsSent.EchoReply.Value()
	st.ICMPEchoRequestsTx = ns.ICMP.V4.PacketsSent.EchoRequest.Value()
	st.ICMPEchoRepliesRx = ns.ICMP.V4.PacketsReceived.EchoReply.Value()
	st.ICMPUnreachableTx = ns.ICMP.V4.PacketsSent.DstUnreachable.Value()

	st.ARPRequestsRx = ns.ARP.RequestsReceived.Value()
	st.ARPRepliesRx = ns.ARP.RepliesReceived.Value()
	st.ARPRequestsTx = ns.ARP.OutgoingRequestsSent.Value()
	st.ARPRepliesTx = ns.ARP.OutgoingRepliesSent.Value()
	st.ARPMisses = s.arp.misses.Load()
	st.ARPTimeouts = s.arp.timeouts.Load()
	st.ARPEvictions = s.arp.evictions.Load()
	st.ARPTableFull = s.arp.full.Load()
	st.ARPEntries = uint64(s.arp.len())

	st.TCPRetransmits = ns.TCP.Retransmits.Value()
	st.TCPFastRetransmits = ns.TCP.FastRetransmit.Value()
	st.TCPTimeouts = ns.TCP.Timeouts.Value()
	st.TCPResetsTx = ns.TCP.ResetsSent.Value()
	st.TCPResetsRx = ns.TCP.ResetsReceived.Value()
	st.TCPNoACKRx = w.tcpNoACK.Load()
	st.TCPSYNCookiesTx = ns.TCP.ListenOverflowSynCookieSent.Value()
	st.TCPSYNCookiesRx = ns.TCP.ListenOverflowSynCookieRcvd.Value()
	st.TCPSYNCookiesBad = ns.TCP.ListenOverflowInvalidSynCookieRcvd.Value()
	st.TCPPeerTimeouts = ns.TCP.EstablishedTimedout.Value()
	if s.gate != nil {
		st.TCPWritesHeld = s.gate.holds.Load()
	}
	if tw := s.wire.tw; tw != nil {
		st.TCPTimeWait = uint64(tw.n.Load())
		st.TCPTimeWaitOverflow = tw.overflow.Load()
		st.DropTCPChecksum += tw.badSum.Load()
	}

	st.ConnsOpen = uint64(s.conns.open.Load())
	st.ConnsAccepted = s.conns.accepted.Load()
	st.ConnsDialed = s.conns.dialed.Load()
	st.ConnsRefused = s.conns.refused.Load()
	st.ConnsFailed = s.conns.failed.Load()
	st.ConnsRefusedPerSource = s.sources.refused.Load()
	if s.log != nil {
		st.LogSuppressed = s.log.suppressed.Load()
	}
	if s.idle != nil {
		st.ConnsIdleClosed = s.idle.closed.Load()
	}
	if sy := s.sy; sy != nil {
		st.LatencySyncRuns = sy.processed.Load()
		st.LatencyFallbacks = sy.fallbacks.Load()
		st.LatencyInlineRuns = sy.inline.Load()
		st.LatencyOutboxFull = s.wire.out.full.Load()
		st.LatencyACKsMerged = s.wire.out.merged.Load()
		st.LatencyACKsHeld = s.wire.out.held.Load()
		st.LatencyACKsLate = s.wire.out.expired.Load()
		st.LatencyACKEvictions = s.wire.out.evicted.Load()
		st.LatencyTCPDirect = s.wire.counters.tcpDirect.Load()
	}
	return st
}
