// Package tap connects a tickwire stack to the Linux kernel through a TAP
// device: Ethernet frames the stack sends come out of the device on the
// kernel side, and frames the kernel routes to the device reach the stack.
//
//	ep, err := tap.New(tap.Config{Name: "tw0", Host: netip.MustParsePrefix("10.201.0.1/24")})
//	s, err := tickwire.New(tickwire.Config{Link: ep, MAC: ep.MAC(), Addr: netip.MustParsePrefix("10.201.0.2/24")})
//	defer s.Close() // closes ep, which removes tw0 if New created it
//
// New opens /dev/net/tun with IFF_TAP|IFF_NO_PI|IFF_VNET_HDR, checksum
// offload (TUN_F_CSUM) and, unless Config.NoTSO, TCP segmentation offload
// (TUN_F_TSO4: the kernel hands over a TCP stream in segments of up to
// 64 KiB, which the stack takes whole, as a veth peer's GRO would; frames
// the stack sends stay within the MTU), creating the device when it does not exist (with no
// queueing discipline, like a veth: see qdisc_linux.go), sets its MTU, optionally gives the kernel side an IPv4
// address (ioctl SIOCSIFADDR/SIOCSIFNETMASK, no exec), and brings it up.
// A device that New created is not persistent: the kernel removes it when
// the endpoint closes its descriptor. A device that existed before (for
// example made with `ip tuntap add mode tap`) is left in place.
//
// What the device's lifetime means for a server on the kernel side: the Host
// address lives on the device, so it exists only while the device does. A
// kernel program can bind a listener to it only after New (or bind to
// 0.0.0.0, or set net.ipv4.ip_nonlocal_bind); when the endpoint closes and a
// device New created goes away, the address and its route go with it, but a
// listener already bound to it stays open, and serves again as soon as a new
// endpoint brings the same address back, so a kernel-side server need not be
// restarted with the stack. Connections do not survive: Stack.Close resets
// every connection it holds (the kernel's reads fail with ECONNRESET), and
// if the process dies instead, the kernel's side of each connection lives on
// until its retransmissions or keepalive give up, or until it sends to a new
// stack at the same address, which does not know the connection and
// resets it. To keep the address and routes across restarts of the stack,
// create the device beforehand (`ip tuntap add mode tap name tw0`, address
// it with `ip addr add`) and leave Config.Host unset.
//
// One goroutine reads the device and delivers each frame inline to the
// stack; the stack joins it when it removes the link. (gVisor's fdbased
// endpoint is not used: its readv dispatcher stops for good at the first
// frame addressed to another unicast MAC, which a kernel with a stale
// neighbor entry sends.) Creating a device needs CAP_NET_ADMIN; on systems
// other than Linux New returns ErrNotSupported.
//
// Checksums are handled as between the kernel and a virtual NIC: TCP
// segments cross the device with only the pseudo-header sum in their
// checksum field, each side trusting the other, which saves four checksum
// passes per round trip. Frames the kernel does not vouch for (forwarded
// from a device that did not verify them, or written by a packet socket)
// are verified by the endpoint, and dropped and counted (Stats) when wrong;
// the endpoint reports stack.CapabilityRXChecksumOffload, so the stack does
// not verify again. A capture taken on the device (tcpdump) shows the
// partial checksums, as on any host with checksum offload. On a device New
// did not create, Close turns the offload off again for its next reader.
package tap

import (
	"errors"
	"net"
	"net/netip"

	"github.com/tickwire/tickwire/link"
)

// The optional link features the Stack looks for (SetBusyPoll and
// SetLockOSThread are no-ops and the checksum drops are zeros off Linux).
var (
	_ link.BusyPoller          = (*Endpoint)(nil)
	_ link.ChecksumDropCounter = (*Endpoint)(nil)
	_ link.ThreadLocker        = (*Endpoint)(nil)
)

// DefaultMTU is the IP MTU of the device when Config.MTU is 0.
const DefaultMTU = 1500

// ErrNotSupported is returned by New on systems without TAP devices.
var ErrNotSupported = errors.New("tap: TAP devices are not supported on this system")

// Config describes the device to open or create.
type Config struct {
	// Name is the device name, 1 to 15 bytes (IFNAMSIZ-1). Required.
	Name string
	// MTU is the IP MTU (without the 14-byte Ethernet header) set on the
	// device and reported to the stack; 0 means DefaultMTU. Range 68-65521.
	MTU int
	// MAC is the stack side's Ethernet address; nil means a random locally
	// administered unicast address. The kernel side keeps its own address.
	MAC net.HardwareAddr
	// Host, when valid, is assigned to the kernel side of the device, with
	// its prefix length as netmask (IPv4 only), so the kernel routes that
	// subnet to the stack.
	Host netip.Prefix
	// NoTSO asks the kernel for frames within the MTU, as a cable carries
	// them, for a reader that is not a stack (a device model such as
	// link/dmaring/nicsim), and stops offering the stack segmentation
	// offload. By default the kernel hands a TCP stream over in segments
	// of up to 64 KiB (TUN_F_TSO4), which a tickwire stack takes whole: a
	// fifth of the frames, and about 40% less CPU per byte received
	// (bench/README.md, tcp_bulk_veth); and the stack sends segments of up
	// to 64 KiB, which the kernel cuts into MSS-sized ones (TSO) where a
	// wire needs them.
	NoTSO bool
}

// ConfigError names the Config field that is invalid.
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string { return "tap: invalid Config." + e.Field + ": " + e.Reason }

func (c *Config) validate() error {
	if c.Name == "" || len(c.Name) > 15 {
		return &ConfigError{"Name", "must be 1 to 15 bytes"}
	}
	for _, r := range c.Name {
		if r == '/' || r == ':' || r <= ' ' || r > '~' {
			return &ConfigError{"Name", "must be printable ASCII without '/', ':' or spaces"}
		}
	}
	if c.MTU == 0 {
		c.MTU = DefaultMTU
	}
	if c.MTU < 68 || c.MTU > 65521 {
		return &ConfigError{"MTU", "must be between 68 and 65521"}
	}
	if c.MAC != nil && (len(c.MAC) != 6 || c.MAC[0]&1 != 0) {
		return &ConfigError{"MAC", "must be a 6-byte unicast Ethernet address"}
	}
	if c.Host.IsValid() && (!c.Host.Addr().Is4() || c.Host.Bits() < 1 || c.Host.Bits() > 32) {
		return &ConfigError{"Host", "must be an IPv4 address with a prefix length 1-32"}
	}
	return nil
}

// Stats counts an Endpoint's traffic. All counters only grow.
type Stats struct {
	RxFrames    uint64 // frames delivered to the stack
	RxBytes     uint64 // their bytes, Ethernet header included
	RxOtherHost uint64 // frames dropped: unicast to another MAC
	RxTooLong   uint64 // frames dropped: longer than MTU + header + one VLAN tag (a TSO segment: 64 KiB)
	RxErrors    uint64 // failed reads, runts, and GSO frames other than TCP over IPv4
	// Frames dropped for a wrong checksum, among those the kernel did not
	// vouch for (Linux only; see Endpoint.Capabilities).
	RxBadIPv4Checksum uint64 // IPv4 header checksum
	RxBadTCPChecksum  uint64
	RxBadUDPChecksum  uint64
	RxBadICMPChecksum uint64
	TxFrames          uint64 // frames written to the device
	TxBytes           uint64 // their bytes
	TxDropped         uint64 // frames the device refused or too long for the MTU
}
