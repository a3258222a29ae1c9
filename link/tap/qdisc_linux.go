//go:build linux

package tap

import (
	"encoding/binary"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// A TAP device gets the default queueing discipline (pfifo_fast here), a
// veth pair gets none (noqueue). The TAP driver never stops its queue (a
// frame that finds the reader's ring full is dropped and counted), so a
// qdisc holds nothing and only costs an enqueue and a dequeue on every
// frame the kernel sends to the stack. New gives a device it creates
// noqueue, as veth has; a device that existed keeps what its owner set.

// setNoQueue replaces the root qdisc of the device named name by noqueue,
// through a netlink RTM_NEWQDISC request on the calling thread's network
// namespace (the device's: New runs there).
func setNoQueue(name string) error {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return fmt.Errorf("tap: %s: set qdisc: %w", name, err)
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("tap: %s: set qdisc: netlink socket: %w", name, err)
	}
	defer unix.Close(fd)
	if err := unix.Sendto(fd, noQueueRequest(ifi.Index), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("tap: %s: set qdisc: %w", name, err)
	}
	var ack [256]byte
	n, _, err := unix.Recvfrom(fd, ack[:], 0)
	if err != nil {
		return fmt.Errorf("tap: %s: set qdisc: %w", name, err)
	}
	if err := netlinkAck(ack[:n]); err != nil {
		return fmt.Errorf("tap: %s: set qdisc noqueue: %w", name, err)
	}
	return nil
}

// tcRootHandle is TC_H_ROOT (linux/pkt_sched.h).
const tcRootHandle = 0xffffffff

// noQueueRequest builds the netlink message "replace the root qdisc of
// interface ifindex by noqueue, and acknowledge": a netlink header, a
// struct tcmsg and one TCA_KIND attribute.
func noQueueRequest(ifindex int) []byte {
	const (
		tcmsgLen = 20 // family, two pad bytes, ifindex, handle, parent, info
		kind     = "noqueue\x00"
		attrLen  = unix.SizeofRtAttr + len(kind)
		msgLen   = unix.NLMSG_HDRLEN + tcmsgLen + (attrLen+3)&^3
	)
	b := make([]byte, msgLen)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(msgLen))
	ne.PutUint16(b[4:], unix.RTM_NEWQDISC)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_REPLACE)
	ne.PutUint32(b[8:], 1) // sequence number
	tc := b[unix.NLMSG_HDRLEN:]
	tc[0] = unix.AF_UNSPEC
	ne.PutUint32(tc[4:], uint32(ifindex))
	ne.PutUint32(tc[12:], tcRootHandle) // parent: the root
	attr := tc[tcmsgLen:]
	ne.PutUint16(attr[0:], uint16(attrLen))
	ne.PutUint16(attr[2:], unix.TCA_KIND)
	copy(attr[unix.SizeofRtAttr:], kind)
	return b
}

// netlinkAck returns the error a netlink acknowledgement carries, nil for
// success.
func netlinkAck(b []byte) error {
	if len(b) < unix.NLMSG_HDRLEN+4 {
		return fmt.Errorf("short netlink answer (%d bytes)", len(b))
	}
	ne := binary.NativeEndian
	if typ := ne.Uint16(b[4:]); typ != unix.NLMSG_ERROR {
		return fmt.Errorf("netlink answer of type %d, want an acknowledgement", typ)
	}
	if errno := int32(ne.Uint32(b[unix.NLMSG_HDRLEN:])); errno != 0 {
		return unix.Errno(-errno)
	}
	return nil
}
