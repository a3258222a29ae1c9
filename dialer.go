package tickwire

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// Dialer connects to addresses given as strings, as net.Dialer does, over a
// Stack: its DialContext has the signature http.Transport.DialContext and
// gRPC's dialer option take, so they run over tickwire unchanged:
//
//	d := &tickwire.Dialer{Stack: s, Timeout: 5 * time.Second}
//	client := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
//
// The stack resolves no host names: an address is an IPv4 literal and a
// numeric port ("10.0.0.2:8080"). A Dialer's fields must not change while
// it dials; it is safe for concurrent use otherwise. The zero value of every
// field but Stack is its default.
type Dialer struct {
	// Stack is the stack to dial from. Required.
	Stack *Stack

	// Timeout bounds a dial (ARP resolution and the TCP handshake); 0
	// means none beyond the context's and the stack's own (Config.ARPTimeout,
	// TCP's SYN retransmissions). Deadline, when not zero, is the time by
	// which the dial must end. Either, when it passes, fails the dial with
	// an error whose Timeout method reports true.
	Timeout  time.Duration
	Deadline time.Time

	// LocalAddr, when not nil, chooses the local port (a *net.TCPAddr for
	// TCP, a *net.UDPAddr for UDP, as net.Dialer takes it): its IP must be
	// nil, unspecified or the stack's address, and port 0 picks a free
	// port as when LocalAddr is nil.
	LocalAddr net.Addr

	// KeepAlive and KeepAliveConfig set TCP keepalive on the connections
	// the Dialer makes, as net.Dialer's fields of the same names do, with
	// the Stack's Config (KeepaliveIdle, KeepaliveInterval,
	// KeepaliveCount) in place of the system's defaults: with
	// KeepAliveConfig.Enable, keepalive is on with its Idle, Interval and
	// Count (zero or negative fields take the Config's); otherwise a
	// negative KeepAlive turns keepalive off, a positive one sets the idle
	// time before the first probe, and 0 (the default) keeps the Config's
	// keepalive. See TCPConn.SetKeepAliveConfig.
	KeepAlive       time.Duration
	KeepAliveConfig net.KeepAliveConfig
}

// Dial is DialContext with context.Background().
func (d *Dialer) Dial(network, address string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, address)
}

// DialContext connects to address on the named network: "tcp" or "tcp4"
// returns a *TCPConn (see Stack.DialTCP), "udp" or "udp4" a connected
// *UDPConn (see Stack.DialUDP). address is "host:port" with host an IPv4
// address (an IPv4-mapped IPv6 address is taken as IPv4) and port a number:
// the stack has no resolver, and a host name fails with a *net.AddrError
// inside the *net.OpError. Other networks fail with
// net.UnknownNetworkError; "tcp6" and "udp6" with an error wrapping
// syscall.EAFNOSUPPORT. When ctx ends first (or Timeout or Deadline
// passes), the dial fails with an error wrapping ctx's error.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	s := d.Stack
	if s == nil {
		return nil, opError("dial", network, nil, nil, &net.AddrError{Err: "tickwire: Dialer has no Stack", Addr: address})
	}
	switch network {
	case "tcp", "tcp4", "udp", "udp4":
	case "tcp6", "udp6":
		return nil, opError("dial", network, nil, nil, syscall.EAFNOSUPPORT)
	default:
		return nil, opError("dial", network, nil, nil, net.UnknownNetworkError(network))
	}
	addr, err := parseAddrPort(address)
	if err != nil {
		return nil, opError("dial", network, nil, nil, err)
	}
	local, err := d.localPort(network)
	if err != nil {
		return nil, opError("dial", network, d.LocalAddr, nil, err)
	}
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	if !d.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Deadline)
		defer cancel()
	}
	if network == "udp" || network == "udp4" {
		if err := ctx.Err(); err != nil {
			return nil, opError("dial", "udp", nil, net.UDPAddrFromAddrPort(addr), err)
		}
		return s.dialUDP(local, addr)
	}
	c, err := s.dialTCP(ctx, local, addr)
	if err != nil {
		return nil, err
	}
	if ka, ok := d.keepAlive(); ok {
		if err := c.SetKeepAliveConfig(ka); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// keepAlive returns the keepalive the Dialer's fields ask for, false when
// they leave the Config's.
func (d *Dialer) keepAlive() (net.KeepAliveConfig, bool) {
	switch {
	case d.KeepAliveConfig.Enable:
		return d.KeepAliveConfig, true
	case d.KeepAlive < 0:
		return net.KeepAliveConfig{}, true
	case d.KeepAlive > 0:
		return net.KeepAliveConfig{Enable: true, Idle: d.KeepAlive}, true
	}
	return net.KeepAliveConfig{}, false
}

// localPort returns the port LocalAddr asks for, 0 for any.
func (d *Dialer) localPort(network string) (uint16, error) {
	var ip net.IP
	var port int
	switch a := d.LocalAddr.(type) {
	case nil:
		return 0, nil
	case *net.TCPAddr:
		if network != "tcp" && network != "tcp4" {
			return 0, &net.AddrError{Err: "mismatched local address type", Addr: a.String()}
		}
		ip, port = a.IP, a.Port
	case *net.UDPAddr:
		if network != "udp" && network != "udp4" {
			return 0, &net.AddrError{Err: "mismatched local address type", Addr: a.String()}
		}
		ip, port = a.IP, a.Port
	default:
		return 0, &net.AddrError{Err: "mismatched local address type", Addr: a.String()}
	}
	if ip != nil && !ip.IsUnspecified() {
		if a, ok := netip.AddrFromSlice(ip); !ok || a.Unmap() != d.Stack.Addr() {
			return 0, &net.AddrError{Err: "not the stack's address", Addr: ip.String()}
		}
	}
	if port < 0 || port > 65535 {
		return 0, &net.AddrError{Err: "invalid port", Addr: strconv.Itoa(port)}
	}
	return uint16(port), nil
}

// parseAddrPort parses "host:port" with host an IPv4 literal and port a
// number.
func parseAddrPort(address string) (netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return netip.AddrPort{}, err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.AddrPort{}, &net.AddrError{Err: "tickwire resolves no host names: use an IPv4 address", Addr: host}
	}
	if ip = ip.Unmap(); !ip.Is4() {
		return netip.AddrPort{}, &net.AddrError{Err: "not an IPv4 address", Addr: host}
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return netip.AddrPort{}, &net.AddrError{Err: "invalid port", Addr: port}
	}
	return netip.AddrPortFrom(ip, uint16(p)), nil
}
