package tickwire

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"syscall"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// Ping sends one ICMP echo request to addr and waits for the matching reply,
// returning the round-trip time. It fails with ctx's error when no reply
// comes before ctx ends, and wraps syscall.EHOSTUNREACH when ARP gets no
// answer. (The stack answers other hosts' pings by itself.)
func (s *Stack) Ping(ctx context.Context, addr netip.Addr) (time.Duration, error) {
	raddr := &net.IPAddr{IP: addr.AsSlice()}
	if s.closed.Load() {
		return 0, opError("ping", "ip4:icmp", nil, raddr, net.ErrClosed)
	}
	if !addr.Is4() {
		return 0, opError("ping", "ip4:icmp", nil, raddr, syscall.EAFNOSUPPORT)
	}
	if err := s.resolve(ctx, addr); err != nil {
		return 0, opError("ping", "ip4:icmp", nil, raddr, err)
	}
	var wq waiter.Queue
	ep, err := s.st.NewEndpoint(icmp.ProtocolNumber4, ipv4.ProtocolNumber, &wq)
	if err != nil {
		return 0, opError("ping", "ip4:icmp", nil, raddr, convertError(err))
	}
	defer ep.Close()
	entry, notify := waiter.NewChannelEntry(waiter.ReadableEvents | waiter.EventErr)
	wq.EventRegister(&entry)
	defer wq.EventUnregister(&entry)
	if err := ep.Connect(tcpip.FullAddress{NIC: nicID, Addr: tcpip.AddrFrom4(addr.As4())}); err != nil {
		return 0, opError("ping", "ip4:icmp", nil, raddr, convertError(err))
	}

	const seq = 1
	req := make([]byte, header.ICMPv4MinimumSize+8)
	req[0] = byte(header.ICMPv4Echo)
	binary.BigEndian.PutUint16(req[6:], seq) // the endpoint fills in the ident
	start := time.Now()
	binary.BigEndian.PutUint64(req[8:], uint64(start.UnixNano()))
	for {
		_, err := ep.Write(bytes.NewReader(req), tcpip.WriteOptions{})
		if err == nil {
			break
		}
		if _, ok := err.(*tcpip.ErrWouldBlock); !ok {
			return 0, opError("ping", "ip4:icmp", nil, raddr, convertError(err))
		}
		// No room in the send buffer yet: retry shortly.
		select {
		case <-ctx.Done():
			return 0, opError("ping", "ip4:icmp", nil, raddr, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	var reply bytes.Buffer
	for {
		reply.Reset()
		_, err := ep.Read(&reply, tcpip.ReadOptions{})
		if _, ok := err.(*tcpip.ErrWouldBlock); ok {
			select {
			case <-ctx.Done():
				return 0, opError("ping", "ip4:icmp", nil, raddr, ctx.Err())
			case <-notify:
				if lerr := ep.LastError(); lerr != nil {
					return 0, opError("ping", "ip4:icmp", nil, raddr, convertError(lerr))
				}
				continue
			}
		}
		if err != nil {
			return 0, opError("ping", "ip4:icmp", nil, raddr, convertError(err))
		}
		b := reply.Bytes()
		if len(b) >= len(req) && header.ICMPv4(b).Type() == header.ICMPv4EchoReply &&
			bytes.Equal(b[6:len(req)], req[6:]) {
			return time.Since(start), nil
		}
	}
}

// resolve makes sure the next hop toward addr has a link address, waiting
// for ARP at most Config.ARPTimeout. An ICMP endpoint reports no error when
// resolution fails, so Ping asks first.
func (s *Stack) resolve(ctx context.Context, addr netip.Addr) error {
	hop := addr
	if !s.cfg.Addr.Masked().Contains(addr) {
		if !s.cfg.Gateway.IsValid() {
			return syscall.ENETUNREACH
		}
		hop = s.cfg.Gateway
	}
	if hop.IsMulticast() || hop == s.cfg.Addr.Addr() {
		return nil
	}
	done := make(chan tcpip.Error, 1)
	err := s.st.GetLinkAddress(nicID, tcpip.AddrFrom4(hop.As4()), tcpip.Address{}, ipv4.ProtocolNumber, func(r gstack.LinkResolutionResult) {
		select {
		case done <- r.Err:
		default:
		}
	})
	if _, ok := err.(*tcpip.ErrWouldBlock); ok {
		select {
		case err = <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err != nil {
		return &stackError{errno: syscall.EHOSTUNREACH, msg: "no ARP reply from " + hop.String()}
	}
	return nil
}
