package tickwire

import (
	"context"
	"net"
	"syscall"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
)

// The per-connection options of a TCPConn, named as net.TCPConn names
// them. Each takes netstack's endpoint lock briefly; none is meant for the
// data path, and none changes what Read and Write cost.

// keepAlive is a connection's keepalive: whether it is on, and its
// parameters (kept while it is off).
type keepAlive struct {
	on             bool
	idle, interval time.Duration
	count          int
}

// configKeepAlive returns the keepalive Config gives every connection; its
// parameters are the defaults when Config turns keepalive off.
func (c *Config) configKeepAlive() keepAlive {
	k := keepAlive{on: c.KeepaliveIdle > 0, idle: c.KeepaliveIdle, interval: c.KeepaliveInterval, count: c.KeepaliveCount}
	if !k.on {
		k.idle = DefaultKeepaliveIdle
	}
	return k
}

// readKeepAlive returns ep's keepalive.
func readKeepAlive(ep tcpip.Endpoint) keepAlive {
	k := keepAlive{on: ep.SocketOptions().GetKeepAlive()}
	var idle tcpip.KeepaliveIdleOption
	if err := ep.GetSockOpt(&idle); err == nil {
		k.idle = time.Duration(idle)
	}
	var interval tcpip.KeepaliveIntervalOption
	if err := ep.GetSockOpt(&interval); err == nil {
		k.interval = time.Duration(interval)
	}
	k.count, _ = ep.GetSockOptInt(tcpip.KeepaliveCountOption)
	return k
}

// valid reports whether k's parameters are within Config's bounds.
func (k keepAlive) valid() bool {
	return k.idle >= minKeepalive && k.idle <= maxKeepalive &&
		k.interval >= minKeepalive && k.interval <= maxKeepalive &&
		k.count >= 1 && k.count <= maxKeepaliveCount
}

// apply sets k on ep, with the TCP user timeout that goes with it (see
// Config.KeepaliveIdle): idle + count x interval when on, none when off.
func (k keepAlive) apply(ep tcpip.Endpoint) tcpip.Error {
	o := k.opts()
	return o.set(ep)
}

// keepAliveOpts are the socket options that set a keepAlive. SetSockOpt
// takes them as interfaces, so options on the caller's stack escape, one
// allocation each: the Stack keeps its Config's in one place for every
// connection it makes (Stack.setKeepalive).
type keepAliveOpts struct {
	idle     tcpip.KeepaliveIdleOption
	interval tcpip.KeepaliveIntervalOption
	user     tcpip.TCPUserTimeoutOption
	count    int
	on       bool
}

func (k keepAlive) opts() *keepAliveOpts {
	o := &keepAliveOpts{
		idle:     tcpip.KeepaliveIdleOption(k.idle),
		interval: tcpip.KeepaliveIntervalOption(k.interval),
		count:    k.count,
		on:       k.on,
	}
	if k.on {
		o.user = tcpip.TCPUserTimeoutOption(k.idle + time.Duration(k.count)*k.interval)
	}
	return o
}

// set sets o on ep. It only reads o, so one o may serve many calls at
// once.
func (o *keepAliveOpts) set(ep tcpip.Endpoint) tcpip.Error {
	if err := ep.SetSockOpt(&o.idle); err != nil {
		return err
	}
	if err := ep.SetSockOpt(&o.interval); err != nil {
		return err
	}
	if err := ep.SetSockOptInt(tcpip.KeepaliveCountOption, o.count); err != nil {
		return err
	}
	if err := ep.SetSockOpt(&o.user); err != nil {
		return err
	}
	ep.SocketOptions().SetKeepAlive(o.on)
	return nil
}

// setKeepAlive validates and applies k.
func (c *TCPConn) setKeepAlive(k keepAlive) error {
	if !k.valid() {
		return c.opError("set", syscall.EINVAL)
	}
	if err := k.apply(c.ep); err != nil {
		return c.opError("set", c.cause(err))
	}
	return nil
}

// SetKeepAlive turns TCP keepalive, and the user timeout that goes with it
// (see Config.KeepaliveIdle), on or off, keeping the connection's
// parameters: Config's, or what SetKeepAlivePeriod or SetKeepAliveConfig
// set (the default ones when Config turned keepalive off).
func (c *TCPConn) SetKeepAlive(keepalive bool) error {
	k := readKeepAlive(c.ep)
	k.on = keepalive
	return c.setKeepAlive(k)
}

// SetKeepAlivePeriod sets how long the connection must be silent before
// the first keepalive probe, as net.TCPConn's does; it does not turn
// keepalive on. d is 10 ms to 32767 s (else the error wraps
// syscall.EINVAL).
func (c *TCPConn) SetKeepAlivePeriod(d time.Duration) error {
	k := readKeepAlive(c.ep)
	k.idle = d
	return c.setKeepAlive(k)
}

// SetKeepAliveConfig configures keepalive as net.TCPConn's does: on with
// cfg's Idle, Interval and Count when cfg.Enable, off otherwise. A zero
// field takes the Stack's Config value (the default when Config turned
// keepalive off), a negative one leaves the connection's value unchanged.
// Idle and Interval are 10 ms to 32767 s and Count 1 to 127, else the
// error wraps syscall.EINVAL. With keepalive on, data left unacknowledged
// for Idle + Count x Interval resets the connection too (the TCP user
// timeout); with it off, neither keepalive nor the user timeout resets it.
func (c *TCPConn) SetKeepAliveConfig(cfg net.KeepAliveConfig) error {
	k, def := readKeepAlive(c.ep), c.s.cfg.configKeepAlive()
	k.on = cfg.Enable
	switch {
	case cfg.Idle == 0:
		k.idle = def.idle
	case cfg.Idle > 0:
		k.idle = cfg.Idle
	}
	switch {
	case cfg.Interval == 0:
		k.interval = def.interval
	case cfg.Interval > 0:
		k.interval = cfg.Interval
	}
	switch {
	case cfg.Count == 0:
		k.count = def.count
	case cfg.Count > 0:
		k.count = cfg.Count
	}
	return c.setKeepAlive(k)
}

// SetNoDelay turns Nagle's algorithm off (true, the default unless
// Config.DisableNoDelay) or on (false): with it on, a segment shorter than
// Config.MSS waits while earlier data is unacknowledged, so small writes
// leave merged into fewer segments.
func (c *TCPConn) SetNoDelay(noDelay bool) error {
	c.ep.SocketOptions().SetDelayOption(!noDelay)
	return nil
}

// SetLinger sets what Close does with data not yet acknowledged, as
// net.TCPConn's does with SO_LINGER:
//   - sec < 0 (the default): Close returns at once, and the stack sends
//     the data and the FIN in the background;
//   - sec == 0: Close discards the data and resets the connection (RST);
//   - sec > 0: Close sends the FIN after the data and waits up to sec
//     seconds for the peer to acknowledge both; then, if it has not, it
//     resets the connection. Close called from the connection's OnReceive
//     handler does not wait, and behaves as with sec < 0.
func (c *TCPConn) SetLinger(sec int) error {
	c.ep.SocketOptions().SetLinger(tcpip.LingerOption{Enabled: sec == 0})
	if sec > 0 {
		c.linger.Store(int64(sec) * int64(time.Second))
	} else {
		c.linger.Store(0)
	}
	return nil
}

// lingerClose is Close's wait for SetLinger(sec > 0): it sends the FIN and
// waits for the peer to acknowledge all, resetting the connection at Close
// when it did not in time.
func (c *TCPConn) lingerClose() {
	d := time.Duration(c.linger.Load())
	if d <= 0 || c.recv.running.Load() || c.inScope.Load() || c.closed.Load() {
		return
	}
	if err := c.ep.Shutdown(tcpip.ShutdownWrite); err != nil {
		return // not connected: nothing to wait for
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if waitDrained(ctx, c.drained) != nil {
		c.ep.SocketOptions().SetLinger(tcpip.LingerOption{Enabled: true}) // Close resets
	}
}

// SetReadBuffer sets the connection's receive buffer (SO_RCVBUF) to bytes,
// 4 KiB to 4 MiB (else the error wraps syscall.EINVAL); Config.ReceiveBuffer
// is the default. As with Config.ReceiveBuffer, it is the window advertised,
// and it turns the connection's auto-tuning (Config.ReceiveBufferMax) off,
// as SO_RCVBUF does on Linux. The window scale, though, was agreed in the
// handshake from Config.ReceiveBufferMax (Config.ReceiveBuffer with growth
// off), so with a bound below 32 KiB the window the peer sees stays under
// 64 KiB whatever the buffer.
func (c *TCPConn) SetReadBuffer(bytes int) error {
	if bytes < tcp.MinBufferSize || bytes > tcp.MaxBufferSize {
		return c.opError("set", syscall.EINVAL)
	}
	c.ep.SocketOptions().SetReceiveBufferSize(int64(netstackReceiveBuffer(bytes)), true)
	return nil
}

// SetWriteBuffer sets the connection's send buffer (SO_SNDBUF) to bytes,
// 4 KiB to 4 MiB (else the error wraps syscall.EINVAL); Config.SendBuffer
// is the default. Write blocks while it is full. It turns the connection's
// auto-tuning (Config.SendBufferMax) off, as SO_SNDBUF does on Linux.
func (c *TCPConn) SetWriteBuffer(bytes int) error {
	if bytes < tcp.MinBufferSize || bytes > tcp.MaxBufferSize {
		return c.opError("set", syscall.EINVAL)
	}
	c.ep.SocketOptions().SetSendBufferSize(int64(bytes), true)
	return nil
}

// SetTOS sets the IPv4 type-of-service byte of the segments the connection
// sends from now on, as golang.org/x/net/ipv4's Conn.SetTOS does: the
// DSCP in its upper six bits (tos = dscp << 2; EF, DSCP 46, is 0xb8). The
// two ECN bits are sent as zero: netstack does not do ECN. tos is 0 to 255
// (else the error wraps syscall.EINVAL); the default is 0.
func (c *TCPConn) SetTOS(tos int) error {
	if tos < 0 || tos > 255 {
		return c.opError("set", syscall.EINVAL)
	}
	if err := c.ep.SetSockOptInt(tcpip.IPv4TOSOption, tos); err != nil {
		return c.opError("set", c.cause(err))
	}
	return nil
}
