package tickwire

import (
	"bytes"
	"net"
	"net/netip"
	"sync"
	"syscall"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// udpConn is the net.PacketConn of ListenUDP and the net.Conn of DialUDP: a
// thin wrapper over a netstack UDP endpoint. All methods are safe for
// concurrent use; concurrent reads (and concurrent writes) are serialised.
// The wrapper allocates nothing per datagram except the address ReadFrom
// returns; ReadFromUDPAddrPort and WriteToUDPAddrPort avoid that, as on
// *net.UDPConn.
type udpConn struct {
	sock
	laddr *net.UDPAddr
	raddr *net.UDPAddr // nil when not connected

	readMu sync.Mutex
	// +checklocks:readMu
	rw tcpip.SliceWriter

	writeMu sync.Mutex
	// +checklocks:writeMu
	wr bytes.Reader
	// +checklocks:writeMu
	to tcpip.FullAddress
}

var (
	_ net.PacketConn = (*udpConn)(nil)
	_ net.Conn       = (*udpConn)(nil)
)

// udpEndpoint opens a UDP socket bound to local and, when remote is not nil,
// connected to it.
func (s *Stack) udpEndpoint(local tcpip.FullAddress, remote *tcpip.FullAddress) (*udpConn, error) {
	if s.closed.Load() {
		return nil, net.ErrClosed
	}
	wq := new(waiter.Queue)
	ep, err := s.st.NewEndpoint(udp.ProtocolNumber, ipv4.ProtocolNumber, wq)
	if err != nil {
		return nil, convertError(err)
	}
	if err := ep.Bind(local); err != nil {
		ep.Close()
		return nil, convertError(err)
	}
	if remote != nil {
		if err := ep.Connect(*remote); err != nil {
			ep.Close()
			return nil, convertError(err)
		}
	}
	c := &udpConn{}
	c.init(wq, ep, s.cfg.BusyPoll)
	if a, err := ep.GetLocalAddress(); err == nil {
		c.laddr = &net.UDPAddr{IP: s.cfg.Addr.Addr().AsSlice(), Port: int(a.Port)}
	}
	if remote != nil {
		c.raddr = &net.UDPAddr{IP: remote.Addr.AsSlice(), Port: int(remote.Port)}
	}
	return c, nil
}

func (c *udpConn) opError(op string, addr net.Addr, err error) error {
	if addr == nil && c.raddr != nil {
		addr = c.raddr
	}
	return opError(op, "udp", c.laddr, addr, err)
}

// read receives one datagram into b (truncating it to len(b)).
func (c *udpConn) read(b []byte, from *tcpip.FullAddress) (int, error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	expired := c.rd.expired()
	spin := spinner{budget: c.busyPoll}
	for {
		if err := c.check(expired); err != nil {
			return 0, err
		}
		c.rw = b
		res, err := c.ep.Read(&c.rw, tcpip.ReadOptions{NeedRemoteAddr: from != nil})
		c.rw = nil
		switch err.(type) {
		case nil:
			if from != nil {
				*from = res.RemoteAddr
			}
			return res.Count, nil
		case *tcpip.ErrWouldBlock:
			if !spin.again() {
				c.wait(c.readCh, expired)
			}
		default:
			return 0, c.cause(err)
		}
	}
}

// ReadFrom receives one datagram; a datagram longer than b is truncated.
func (c *udpConn) ReadFrom(b []byte) (int, net.Addr, error) {
	var from tcpip.FullAddress
	n, err := c.read(b, &from)
	if err != nil {
		return 0, nil, c.opError("read", nil, err)
	}
	return n, &net.UDPAddr{IP: from.Addr.AsSlice(), Port: int(from.Port)}, nil
}

// ReadFromUDPAddrPort is ReadFrom without allocating the address, as on
// *net.UDPConn: reach it with a type assertion on the net.PacketConn.
func (c *udpConn) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	var from tcpip.FullAddress
	n, err := c.read(b, &from)
	if err != nil {
		return 0, netip.AddrPort{}, c.opError("read", nil, err)
	}
	return n, netip.AddrPortFrom(netip.AddrFrom4(from.Addr.As4()), from.Port), nil
}

// Read receives one datagram on a connected socket.
func (c *udpConn) Read(b []byte) (int, error) {
	n, err := c.read(b, nil)
	if err != nil {
		return 0, c.opError("read", nil, err)
	}
	return n, nil
}

// write sends b as one datagram, to the connected peer when to is nil.
func (c *udpConn) write(b []byte, to *net.UDPAddr) (int, error) {
	if to == nil {
		return c.send(b, nil)
	}
	ip := to.IP.To4()
	if ip == nil {
		return 0, syscall.EAFNOSUPPORT
	}
	return c.writeTo(b, tcpip.FullAddress{NIC: nicID, Addr: tcpip.AddrFrom4Slice(ip), Port: uint16(to.Port)})
}

// writeTo sends b as one datagram to full.
func (c *udpConn) writeTo(b []byte, full tcpip.FullAddress) (int, error) {
	return c.send(b, &full)
}

// send sends b as one datagram, to the connected peer when to is nil.
func (c *udpConn) send(b []byte, to *tcpip.FullAddress) (int, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	opts := tcpip.WriteOptions{}
	if to != nil {
		c.to = *to // a field, so that opts.To does not escape to the heap
		opts.To = &c.to
	}
	expired := c.wd.expired()
	spin := spinner{budget: c.busyPoll}
	for {
		if err := c.check(expired); err != nil {
			return 0, err
		}
		c.wr.Reset(b)
		n, err := c.ep.Write(&c.wr, opts)
		c.wr.Reset(nil)
		switch err.(type) {
		case nil:
			return int(n), nil
		case *tcpip.ErrWouldBlock:
			if !spin.again() {
				c.wait(c.writeCh, expired)
			}
		default:
			return 0, c.cause(err)
		}
	}
}

// WriteToUDPAddrPort is WriteTo with a netip.AddrPort, as on *net.UDPConn.
func (c *udpConn) WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	if !addr.Addr().Is4() {
		return 0, c.opError("write", net.UDPAddrFromAddrPort(addr), syscall.EAFNOSUPPORT)
	}
	n, err := c.writeTo(b, tcpip.FullAddress{NIC: nicID, Addr: tcpip.AddrFrom4(addr.Addr().As4()), Port: addr.Port()})
	if err != nil {
		return n, c.opError("write", net.UDPAddrFromAddrPort(addr), err)
	}
	return n, nil
}

// WriteTo sends b as one datagram to addr, a *net.UDPAddr.
func (c *udpConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	ua, ok := addr.(*net.UDPAddr)
	if !ok {
		return 0, c.opError("write", addr, syscall.EINVAL)
	}
	n, err := c.write(b, ua)
	if err != nil {
		return n, c.opError("write", addr, err)
	}
	return n, nil
}

// Write sends b as one datagram on a connected socket.
func (c *udpConn) Write(b []byte) (int, error) {
	n, err := c.write(b, nil)
	if err != nil {
		return n, c.opError("write", nil, err)
	}
	return n, nil
}

// Close closes the socket; blocked calls return net.ErrClosed.
func (c *udpConn) Close() error {
	if !c.shut() {
		return c.opError("close", nil, net.ErrClosed)
	}
	return nil
}

// LocalAddr returns the local address.
func (c *udpConn) LocalAddr() net.Addr { return c.laddr }

// RemoteAddr returns the connected peer, nil for a listening socket.
func (c *udpConn) RemoteAddr() net.Addr {
	if c.raddr == nil {
		return nil
	}
	return c.raddr
}
