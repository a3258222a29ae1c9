//go:build linux

package tap

import (
	"crypto/rand"
	"fmt"
	"net"
	"sync"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/link/fdbased"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Endpoint is a stack.LinkEndpoint on a TAP device. The stack side sends
// and receives Ethernet II frames; MTU reports the device's IP MTU. All
// methods are safe for concurrent use. The endpoint owns one goroutine while
// attached to a stack, which Attach(nil) (done by the stack when it removes
// the link) stops and joins.
type Endpoint struct {
	stack.LinkEndpoint // gVisor's fdbased endpoint on fd

	name    string
	mac     net.HardwareAddr
	mtu     int
	created bool

	closeOnce sync.Once
	fd        int
}

var _ stack.LinkEndpoint = (*Endpoint)(nil)

// New opens the TAP device cfg.Name, creating it if it does not exist, and
// configures it as described in the package documentation. Errors name the
// step that failed; EPERM means the process lacks CAP_NET_ADMIN.
func New(cfg Config) (*Endpoint, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	mac := cfg.MAC
	if mac == nil {
		mac = make(net.HardwareAddr, 6)
		rand.Read(mac)
		mac[0] = mac[0]&^1 | 2 // unicast, locally administered
	}
	_, statErr := net.InterfaceByName(cfg.Name)
	existed := statErr == nil

	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("tap: open /dev/net/tun: %w", err)
	}
	e := &Endpoint{name: cfg.Name, mac: mac, mtu: cfg.MTU, created: !existed, fd: fd}
	if err := e.configure(cfg); err != nil {
		unix.Close(fd)
		return nil, err
	}
	link, err := fdbased.New(&fdbased.Options{
		FDs:                []int{fd},
		MTU:                uint32(cfg.MTU),
		EthernetHeader:     true,
		Address:            tcpip.LinkAddress(mac),
		PacketDispatchMode: fdbased.Readv,
	})
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tap: %s: %w", cfg.Name, err)
	}
	e.LinkEndpoint = link
	return e, nil
}

// configure attaches fd to the device and sets MTU, address and flags.
func (e *Endpoint) configure(cfg Config) error {
	ifr, err := unix.NewIfreq(cfg.Name)
	if err != nil {
		return fmt.Errorf("tap: %s: %w", cfg.Name, err)
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(e.fd, unix.TUNSETIFF, ifr); err != nil {
		return fmt.Errorf("tap: %s: TUNSETIFF: %w", cfg.Name, err)
	}

	// Interface ioctls go through any socket of the device's namespace.
	sock, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("tap: socket: %w", err)
	}
	defer unix.Close(sock)
	ioctl := func(step string, req uint, set func(*unix.Ifreq) error) (*unix.Ifreq, error) {
		r, _ := unix.NewIfreq(cfg.Name)
		if set != nil {
			if err := set(r); err != nil {
				return nil, fmt.Errorf("tap: %s: %s: %w", cfg.Name, step, err)
			}
		}
		if err := unix.IoctlIfreq(sock, req, r); err != nil {
			return nil, fmt.Errorf("tap: %s: %s: %w", cfg.Name, step, err)
		}
		return r, nil
	}
	if _, err := ioctl("set MTU", unix.SIOCSIFMTU, func(r *unix.Ifreq) error { r.SetUint32(uint32(cfg.MTU)); return nil }); err != nil {
		return err
	}
	if cfg.Host.IsValid() {
		addr := cfg.Host.Addr().As4()
		mask := net.CIDRMask(cfg.Host.Bits(), 32)
		if _, err := ioctl("set address", unix.SIOCSIFADDR, func(r *unix.Ifreq) error { return r.SetInet4Addr(addr[:]) }); err != nil {
			return err
		}
		if _, err := ioctl("set netmask", unix.SIOCSIFNETMASK, func(r *unix.Ifreq) error { return r.SetInet4Addr(mask) }); err != nil {
			return err
		}
	}
	flags, err := ioctl("get flags", unix.SIOCGIFFLAGS, nil)
	if err != nil {
		return err
	}
	up := flags.Uint16() | unix.IFF_UP | unix.IFF_RUNNING
	if _, err := ioctl("bring up", unix.SIOCSIFFLAGS, func(r *unix.Ifreq) error { r.SetUint16(up); return nil }); err != nil {
		return err
	}
	return nil
}

// Name returns the device name.
func (e *Endpoint) Name() string { return e.name }

// MAC returns the stack side's Ethernet address: give it to the stack as
// its own address.
func (e *Endpoint) MAC() net.HardwareAddr { return e.mac }

// Created reports whether New created the device, in which case it
// disappears when the endpoint closes.
func (e *Endpoint) Created() bool { return e.created }

// Close implements stack.LinkEndpoint.Close. It stops the dispatch
// goroutine (if a stack is still attached, it stops receiving), closes the
// descriptor, and so removes the device if New created it. It is
// idempotent; the stack calls it when it removes the link.
func (e *Endpoint) Close() {
	e.closeOnce.Do(func() {
		e.LinkEndpoint.Attach(nil) // joins the dispatcher before its fd goes
		e.LinkEndpoint.Close()
		unix.Close(e.fd)
	})
}
