package tickwire

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"syscall"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// MaxMulticastGroups bounds the multicast memberships of a Stack: the sum
// over its UDP sockets of the groups each has joined. Past it JoinGroup
// fails with ErrTooManyGroups. Each membership costs a map entry in the
// direct delivery table and IGMP state in netstack.
const MaxMulticastGroups = 256

// ErrTooManyGroups is returned by UDPConn.JoinGroup when the Stack's sockets
// hold MaxMulticastGroups memberships already.
var ErrTooManyGroups = errors.New("tickwire: too many multicast groups joined")

// mcastKey is one socket's membership, keyed by its port: a port has one
// socket at a time.
type mcastKey struct {
	port  uint16
	group tcpip.Address
}

// joined reports whether socket c, on port, has joined group. It takes no
// lock and does not allocate.
func (t *udpTable) joined(port uint16, group tcpip.Address, c *UDPConn) bool {
	m := t.mcast.Load()
	return m != nil && (*m)[mcastKey{port, group}] == c
}

// setMembershipLocked replaces the membership map with one where key maps
// to c, or has no entry when c is nil.
//
// +checklocks:t.mcastMu
func (t *udpTable) setMembershipLocked(key mcastKey, c *UDPConn) {
	old := t.mcast.Load()
	m := make(map[mcastKey]*UDPConn, 1)
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	if c != nil {
		m[key] = c
	} else {
		delete(m, key)
	}
	t.mcast.Store(&m)
}

// dropMemberships forgets the memberships of c on port (at Close; netstack's
// endpoint leaves the groups, sending the IGMP leaves, when it closes).
func (t *udpTable) dropMemberships(port uint16, c *UDPConn) {
	t.mcastMu.Lock()
	defer t.mcastMu.Unlock()
	old := t.mcast.Load()
	if old == nil {
		return
	}
	m := make(map[mcastKey]*UDPConn, len(*old))
	for k, v := range *old {
		if k.port != port || v != c {
			m[k] = v
		}
	}
	t.mcast.Store(&m)
}

func multicastGroup(group netip.Addr) (tcpip.Address, bool) {
	g := group.Unmap()
	if !g.Is4() || !g.IsMulticast() {
		return tcpip.Address{}, false
	}
	return tcpip.AddrFrom4(g.As4()), true
}

// JoinGroup joins the IPv4 multicast group on c's stack: an IGMP membership
// report goes out (IGMPv3 by default; netstack's IGMP answers queries and
// falls back to IGMPv2 or IGMPv1 when a router on the link speaks them), and
// from then on the datagrams sent to the group at c's port are c's. They take
// the same path as unicast datagrams: direct delivery to the OnReceive
// handler on the delivering goroutine, without allocating, or the socket's
// receive ring for ReadFrom and Read.
//
// Membership is per socket: a datagram for a group at c's port reaches c
// only if c joined the group, even when another socket of the stack has
// joined it too (Linux delivers it to every socket on the port); datagrams
// for groups c did not join are dropped and counted in
// Stats.DropIPv4NotForUs. Source-specific joins (IGMPv3 source lists) are
// not supported: netstack has none. Fragmented multicast datagrams are
// reassembled by the wire like unicast ones and then delivered the same way.
//
// A socket may join several groups, and the stack at most
// MaxMulticastGroups in all (ErrTooManyGroups). Joining a group twice fails
// with syscall.EADDRINUSE, as on Linux; Close leaves every group.
func (c *UDPConn) JoinGroup(group netip.Addr) error {
	g, ok := multicastGroup(group)
	if !ok {
		return c.opError("join", groupAddr(group), syscall.EINVAL)
	}
	t := c.t
	t.mcastMu.Lock()
	defer t.mcastMu.Unlock()
	if c.closed.Load() {
		return c.opError("join", groupAddr(group), net.ErrClosed)
	}
	key := mcastKey{c.port, g}
	if m := t.mcast.Load(); m != nil {
		if (*m)[key] == c {
			return c.opError("join", groupAddr(group), syscall.EADDRINUSE)
		}
		if len(*m) >= MaxMulticastGroups {
			return c.opError("join", groupAddr(group), ErrTooManyGroups)
		}
	}
	// netstack's endpoint holds the membership: IGMP reports and answers.
	e, err := c.endpoint()
	if err != nil {
		return c.opError("join", groupAddr(group), err)
	}
	if err := e.ep.SetSockOpt(&tcpip.AddMembershipOption{NIC: nicID, MulticastAddr: g}); err != nil {
		return c.opError("join", groupAddr(group), convertError(err))
	}
	t.setMembershipLocked(key, c)
	return nil
}

// LeaveGroup leaves a group that c joined: an IGMP leave goes out when no
// other socket of the stack is a member, and datagrams for the group at c's
// port are dropped again. It fails with syscall.EADDRNOTAVAIL when c is not
// a member.
func (c *UDPConn) LeaveGroup(group netip.Addr) error {
	g, ok := multicastGroup(group)
	if !ok {
		return c.opError("leave", groupAddr(group), syscall.EINVAL)
	}
	t := c.t
	t.mcastMu.Lock()
	defer t.mcastMu.Unlock()
	if c.closed.Load() {
		return c.opError("leave", groupAddr(group), net.ErrClosed)
	}
	key := mcastKey{c.port, g}
	if m := t.mcast.Load(); m == nil || (*m)[key] != c {
		return c.opError("leave", groupAddr(group), syscall.EADDRNOTAVAIL)
	}
	t.setMembershipLocked(key, nil) // stop delivery first
	e, err := c.endpoint()          // it exists: JoinGroup created it
	if err != nil {
		return c.opError("leave", groupAddr(group), err)
	}
	if err := e.ep.SetSockOpt(&tcpip.RemoveMembershipOption{NIC: nicID, MulticastAddr: g}); err != nil {
		return c.opError("leave", groupAddr(group), convertError(err))
	}
	return nil
}

// SetMulticastTTL sets the IPv4 TTL of the datagrams c sends to multicast
// groups, 0 to 255; the default is 1, as on Linux: the datagrams stay on the
// link.
func (c *UDPConn) SetMulticastTTL(ttl int) error {
	if ttl < 0 || ttl > 255 {
		return c.opError("set", nil, syscall.EINVAL)
	}
	err := c.setOption(func() { c.mcastTTL.Store(uint32(ttl) + 1) }, func(ep tcpip.Endpoint) tcpip.Error {
		return ep.SetSockOptInt(tcpip.MulticastTTLOption, ttl)
	})
	if err != nil {
		return c.opError("set", nil, err)
	}
	return nil
}

// multicastTTL is the TTL of c's direct multicast sends.
func (c *UDPConn) multicastTTL() uint8 {
	if v := c.mcastTTL.Load(); v > 0 {
		return uint8(v - 1)
	}
	return 1
}

// SetMulticastLoopback sets whether the datagrams c sends to a multicast
// group are also delivered to the stack's own sockets that joined it. It is
// off by default (unlike Linux's IP_MULTICAST_LOOP): a feed handler does not
// want its own sends back. With it off, sends to a group take the direct
// path of unicast sends (a cached route, no allocation); with it on, they go
// through netstack's endpoint, which loops them back.
func (c *UDPConn) SetMulticastLoopback(on bool) {
	c.setOption(func() { c.mcastLoop.Store(on) }, func(ep tcpip.Endpoint) tcpip.Error {
		ep.SocketOptions().SetMulticastLoop(on)
		return nil
	})
}

func groupAddr(group netip.Addr) net.Addr {
	return &net.UDPAddr{IP: group.AsSlice()}
}

// isMulticast4 reports whether a is an IPv4 multicast address.
func isMulticast4(a tcpip.Address) bool { return header.IsV4MulticastAddress(a) }

// groupOf returns a multicast destination as a big-endian uint32, 0 for
// any other address.
func groupOf(dst tcpip.Address) uint32 {
	if !isMulticast4(dst) {
		return 0
	}
	a := dst.As4()
	return binary.BigEndian.Uint32(a[:])
}

// RxGroup returns the multicast group the datagram was sent to that the
// handler is handling (called from an OnReceive handler), or else that the
// last read returned; the zero Addr for a unicast or broadcast datagram.
// A socket that joined several groups on one port tells their datagrams
// apart with it. It allocates nothing; with several goroutines reading c,
// see RxTime.
func (c *UDPConn) RxGroup() netip.Addr {
	g := c.rxGroup.Load()
	if g == 0 {
		return netip.Addr{}
	}
	var a [4]byte
	binary.BigEndian.PutUint32(a[:], g)
	return netip.AddrFrom4(a)
}
