package tickwire

import (
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
)

// TCPInfo is a snapshot of one TCP connection's state, as Linux's
// TCP_INFO gives it for a kernel socket. Durations are zero until netstack
// has measured a round trip (it samples data segments, not the handshake).
type TCPInfo struct {
	State  string        // the TCP state, as netstack names it: "ESTABLISHED", "CLOSE-WAIT", "CLOSED"...
	RTT    time.Duration // smoothed round-trip time (RFC 6298 SRTT)
	RTTVar time.Duration // round-trip time variation (RTTVAR)
	RTO    time.Duration // retransmission timeout

	// CongestionWindow is the congestion window in segments (of
	// Config.MSS bytes); 10 on a new connection (RFC 6928). SlowStartThreshold
	// is the threshold between slow start and congestion avoidance, in
	// segments (a very large value until the first loss).
	CongestionWindow   uint32
	SlowStartThreshold uint32
	// Recovery tells whether the sender is recovering from a loss (after a
	// retransmission timeout, three duplicate ACKs or SACK blocks), and
	// ReorderSeen whether it has seen reordering.
	Recovery    bool
	ReorderSeen bool

	// ReceiveQueued is the number of bytes received and not yet read.
	ReceiveQueued int
	// ReceiveBuffer is the receive window the connection may advertise
	// now: Config.ReceiveBuffer (or SetReadBuffer's) at first, grown by
	// auto-tuning up to Config.ReceiveBufferMax.
	ReceiveBuffer int
	// SendBuffer is the send buffer the connection has now:
	// Config.SendBuffer (or SetWriteBuffer's) at first, grown by
	// auto-tuning up to Config.SendBufferMax.
	SendBuffer int

	// BytesSent and BytesReceived count the payload bytes the program
	// wrote (accepted into the send buffer) and read (by Read or handed to
	// the OnReceive handler).
	BytesSent, BytesReceived uint64
	// SegmentsSent and SegmentsReceived count the TCP segments netstack
	// sent and accepted on the connection, handshake and ACKs included;
	// Retransmits counts the segments it sent again (fast retransmits
	// included) and Timeouts its retransmission timer expiries.
	SegmentsSent, SegmentsReceived uint64
	Retransmits, Timeouts          uint64
}

// Info returns a snapshot of the connection's TCP state and counters. It
// allocates nothing, takes netstack's endpoint lock briefly, and may be
// called at any time, from an OnReceive handler too, and after Close (the
// byte counts then stay as they were, and State follows the close:
// "FIN-WAIT1", then "CLOSED"; a connection that enters TIME-WAIT shows
// "TIME-WAIT" only for a moment, since the stack keeps TIME-WAIT as a
// record of its own and closes the endpoint: see Config.TimeWait).
func (c *TCPConn) Info() TCPInfo {
	info := TCPInfo{
		BytesSent:     c.bytesTx.Load(),
		BytesReceived: c.bytesRx.Load(),
	}
	tep, ok := c.ep.(*tcp.Endpoint)
	if !ok {
		return info
	}
	var opt tcpip.TCPInfoOption
	_ = tep.GetSockOpt(&opt) // a TCPInfoOption never fails
	info.State = tcp.EndpointState(opt.State).String()
	info.RTT, info.RTTVar, info.RTO = opt.RTT, opt.RTTVar, opt.RTO
	info.CongestionWindow, info.SlowStartThreshold = opt.SndCwnd, opt.SndSsthresh
	info.Recovery = opt.CcState != tcpip.Open && opt.CcState != tcpip.Disorder
	info.ReorderSeen = opt.ReorderSeen
	if n, err := tep.GetSockOptInt(tcpip.ReceiveQueueSizeOption); err == nil {
		info.ReceiveQueued = n
	}
	info.ReceiveBuffer = int(tep.SocketOptions().GetReceiveBufferSize()) / 2 // see netstackReceiveBuffer
	info.SendBuffer = int(tep.SocketOptions().GetSendBufferSize())
	if st, ok := tep.Stats().(*tcp.Stats); ok {
		info.SegmentsSent = st.SegmentsSent.Value()
		info.SegmentsReceived = st.SegmentsReceived.Value()
		info.Retransmits = st.SendErrors.Retransmits.Value()
		info.Timeouts = st.SendErrors.Timeouts.Value()
	}
	return info
}

// received and sent count n payload bytes read or written, and note the
// call for the idle sweeper when it moved data.
func (c *TCPConn) received(n int) {
	if n > 0 {
		c.bytesRx.Add(uint64(n))
		c.moved()
	}
}

func (c *TCPConn) sent(n int) {
	if n > 0 {
		c.bytesTx.Add(uint64(n))
		c.moved()
	}
}
