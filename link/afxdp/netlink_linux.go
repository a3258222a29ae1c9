//go:build linux && (amd64 || arm64)

package afxdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// What the kernel reports in IFLA_XDP_ATTACHED.
const (
	xdpAttachedNone = iota
	xdpAttachedDrv
	xdpAttachedSKB
	xdpAttachedHW
	xdpAttachedMulti
)

func attachedName(a uint8) string {
	switch a {
	case xdpAttachedDrv:
		return "driver"
	case xdpAttachedSKB:
		return "generic"
	case xdpAttachedHW:
		return "offload"
	case xdpAttachedMulti:
		return "multi"
	}
	return "none"
}

// linkInfo is what rtnetlink says about an interface.
type linkInfo struct {
	rxQueues int    // IFLA_NUM_RX_QUEUES, 0 when not reported
	attached uint8  // IFLA_XDP_ATTACHED
	progID   uint32 // IFLA_XDP_PROG_ID: the one program (not in multi mode)
	drvID    uint32 // IFLA_XDP_DRV_PROG_ID
	skbID    uint32 // IFLA_XDP_SKB_PROG_ID
	hwID     uint32 // IFLA_XDP_HW_PROG_ID
}

// queryLink dumps the links of the calling thread's network namespace
// (RTM_GETLINK) and returns ifindex's.
func queryLink(ifindex int) (linkInfo, error) {
	rib, err := syscall.NetlinkRIB(unix.RTM_GETLINK, unix.AF_UNSPEC)
	if err != nil {
		return linkInfo{}, fmt.Errorf("rtnetlink dump: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return linkInfo{}, fmt.Errorf("rtnetlink dump: %w", err)
	}
	for i := range msgs {
		m := &msgs[i]
		if m.Header.Type != unix.RTM_NEWLINK || len(m.Data) < unix.SizeofIfInfomsg {
			continue
		}
		if int(int32(binary.NativeEndian.Uint32(m.Data[4:8]))) != ifindex {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(m)
		if err != nil {
			return linkInfo{}, fmt.Errorf("rtnetlink attributes: %w", err)
		}
		var li linkInfo
		for _, a := range attrs {
			switch a.Attr.Type {
			case unix.IFLA_NUM_RX_QUEUES:
				if len(a.Value) >= 4 {
					li.rxQueues = int(binary.NativeEndian.Uint32(a.Value))
				}
			case unix.IFLA_XDP:
				parseXDPAttrs(a.Value, &li)
			}
		}
		return li, nil
	}
	return linkInfo{}, ErrNoInterface
}

// parseXDPAttrs reads the attributes nested in IFLA_XDP; a malformed one
// ends the parse.
func parseXDPAttrs(b []byte, li *linkInfo) {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:]) & 0x3fff // without NLA_F_NESTED, NLA_F_NET_BYTEORDER
		if l < 4 || l > len(b) {
			return
		}
		v := b[4:l]
		u32 := func() uint32 {
			if len(v) >= 4 {
				return binary.NativeEndian.Uint32(v)
			}
			return 0
		}
		switch typ {
		case unix.IFLA_XDP_ATTACHED:
			if len(v) >= 1 {
				li.attached = v[0]
			}
		case unix.IFLA_XDP_PROG_ID:
			li.progID = u32()
		case unix.IFLA_XDP_DRV_PROG_ID:
			li.drvID = u32()
		case unix.IFLA_XDP_SKB_PROG_ID:
			li.skbID = u32()
		case unix.IFLA_XDP_HW_PROG_ID:
			li.hwID = u32()
		}
		b = b[min((l+3)&^3, len(b)):]
	}
}

// detachNetlink removes the XDP program attached in mode (an
// XDP_FLAGS_*_MODE flag) through netlink. The kernel refuses with EBUSY
// when a BPF link holds it.
func detachNetlink(ifindex int, modeFlag uint32) error { return setXDPNetlink(ifindex, -1, modeFlag) }

// setXDPNetlink attaches program progFD, or detaches with -1, in mode
// through netlink (RTM_SETLINK, IFLA_XDP_FD), the way that outlives the
// process (ip link set dev X xdp ...).
func setXDPNetlink(ifindex int, progFD int32, modeFlag uint32) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	ne := binary.NativeEndian
	// nlmsghdr (16) + ifinfomsg (16) + IFLA_XDP (4) { IFLA_XDP_FD (8), IFLA_XDP_FLAGS (8) }
	msg := make([]byte, 16+16+4+8+8)
	ne.PutUint32(msg[0:], uint32(len(msg)))
	ne.PutUint16(msg[4:], unix.RTM_SETLINK)
	ne.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	ne.PutUint32(msg[8:], 1) // sequence
	msg[16] = unix.AF_UNSPEC
	ne.PutUint32(msg[20:], uint32(int32(ifindex)))
	ne.PutUint16(msg[32:], 4+8+8)
	ne.PutUint16(msg[34:], unix.IFLA_XDP|unix.NLA_F_NESTED)
	ne.PutUint16(msg[36:], 8)
	ne.PutUint16(msg[38:], unix.IFLA_XDP_FD)
	ne.PutUint32(msg[40:], uint32(progFD))
	ne.PutUint16(msg[44:], 8)
	ne.PutUint16(msg[46:], unix.IFLA_XDP_FLAGS)
	ne.PutUint32(msg[48:], modeFlag)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	var buf [4096]byte
	for {
		n, _, err := unix.Recvfrom(fd, buf[:], 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Header.Type != unix.NLMSG_ERROR || len(m.Data) < 4 {
				continue
			}
			if code := int32(ne.Uint32(m.Data)); code != 0 {
				return syscall.Errno(-code)
			}
			return nil
		}
		if len(msgs) == 0 {
			return errors.New("rtnetlink: empty reply")
		}
	}
}
