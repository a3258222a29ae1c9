package tickwire

import "gvisor.dev/gvisor/pkg/tcpip/transport/tcp"

// Receive-buffer auto-tuning (Config.ReceiveBufferMax). netstack has the
// algorithm (tcp.Endpoint.ModerateRecvBuf, Linux's tcp_rcv_space_adjust:
// once per receiver-measured round trip, a connection whose program read
// more than in the round trip before gets a buffer of over twice that)
// but leaves calling it to the socket layer, after every read; tickwire's
// Read and handler drains are that layer here.
//
// ModerateRecvBuf takes the endpoint's lock (LockUser) and reads the clock
// on every call, so the bytes read are passed on in batches of at least a
// segment: a bulk reader's reads are larger than that and pass on every
// one, while a connection exchanging small messages pays an atomic add per
// read and the call once per segment's worth. The round-trip accounting
// only sums the bytes, so the batching changes nothing it decides: a
// batch lands in the round trip in which it completes, at most a segment
// late.

// moderate passes n bytes just read by the program (Read, a handler's
// drain) on to receive-buffer auto-tuning. It must not be called while
// the endpoint is held (ModerateRecvBuf locks it).
func (c *TCPConn) moderate(n int) {
	if n <= 0 || c.s.cfg.ReceiveBufferMax <= c.s.cfg.ReceiveBuffer {
		return
	}
	if c.unmoderated.Add(uint32(n)) < uint32(c.s.wire.mss) {
		return
	}
	if ep, ok := c.ep.(*tcp.Endpoint); ok {
		ep.ModerateRecvBuf(int(c.unmoderated.Swap(0)))
	}
}
