//go:build linux

package tap

import (
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/tickwire/tickwire/link/internal/linkbase"
)

// The device is opened with IFF_VNET_HDR, TUN_F_CSUM and TUN_F_TSO4: every frame read or
// written starts with a virtio-net header (vnetHdrLen bytes), and the kernel
// may hand over frames whose transport checksum it has not computed. The
// other way, the endpoint offers the stack segmentation offload
// (stack.HostGSOSupported) and writes a TCP segment of up to maxGSOPacket
// bytes as one TSO frame, which the kernel cuts where a wire needs it, as
// a guest's virtio-net driver does. That
// is what lets a round trip with the kernel skip four checksum passes: the
// kernel's sender and this endpoint's receiver, this endpoint's sender (the
// frame carries only the pseudo-header sum) and the kernel's receiver.
// Kernel-to-kernel traffic over veth skips them the same way.
//
// Received frames:
//   - NEEDS_CSUM: the kernel built the frame and left the transport
//     checksum partial; it is trusted, as the kernel trusts its own;
//   - DATA_VALID: a device or the kernel verified the checksums;
//   - neither: the checksums are complete but nobody verified them (traffic
//     the kernel forwards from a device that does not verify, or fragments
//     of its own datagrams): linkbase.VerifyIPv4 checks them here.
//
// The endpoint therefore reports stack.CapabilityRXChecksumOffload, and the
// stack verifies no checksum of its own. Frames that fail here are dropped
// and counted by kind in Stats (RxBadIPv4Checksum...), and RxChecksumDrops
// hands the counts to tickwire's Stack, which adds them to its own. One gap: a transport checksum of
// a datagram that arrives in IPv4 fragments without either flag is not
// verified (each fragment's IPv4 header is): it can only be checked after
// reassembly, which the stack does believing the link verified it. The
// kernel computes the checksums of what it fragments itself, so only
// forwarded fragments from a device that did not verify them are exposed.

const (
	vnetHdrLen = 10 // struct virtio_net_hdr without num_buffers

	vnetNeedsCsum = 1 // VIRTIO_NET_HDR_F_NEEDS_CSUM
	vnetDataValid = 2 // VIRTIO_NET_HDR_F_DATA_VALID

	tunSetOffload = 0x400454d0 // TUNSETOFFLOAD, _IOW('T', 208, unsigned int)
	tunFCsum      = 0x01       // TUN_F_CSUM: this reader accepts partial checksums
	tunFTSO4      = 0x02       // TUN_F_TSO4: and TCP segments up to maxGSOPacket bytes

	vnetGSOTCPv4 = 1 // VIRTIO_NET_HDR_GSO_TCPV4

	maxGSOPacket = 1 << 16 // the largest IPv4 packet the kernel hands over with TSO4
)

// rxVerdict is what the reader does with a frame after its virtio-net
// header: deliver it, or drop it and count it by verdict.
type rxVerdict int

const (
	rxDeliver   = rxVerdict(linkbase.ChecksumOK)
	rxBadIPv4   = rxVerdict(linkbase.BadIPv4Checksum)
	rxBadTCP    = rxVerdict(linkbase.BadTCPChecksum)
	rxBadUDP    = rxVerdict(linkbase.BadUDPChecksum)
	rxBadICMP   = rxVerdict(linkbase.BadICMPChecksum)
	rxMalformed = rxBadICMP + 1 // a GSO frame (never asked for)
	rxVerdicts  = rxMalformed + 1
)

// checkFrame decides the fate of a frame read from the device: hdr is its
// virtio-net header, f the Ethernet frame after it.
func checkFrame(hdr, f []byte) rxVerdict {
	if len(hdr) < vnetHdrLen {
		return rxMalformed
	}
	switch hdr[1] { // gso_type
	case 0:
	case vnetGSOTCPv4:
		// A TCP segment the kernel did not cut into MSS-sized ones (TSO4):
		// its checksum is partial and the stack takes it whole.
		if hdr[0]&vnetNeedsCsum == 0 {
			return rxMalformed
		}
	default:
		return rxMalformed
	}
	if hdr[0]&(vnetNeedsCsum|vnetDataValid) != 0 ||
		len(f) < header.EthernetMinimumSize || header.Ethernet(f).Type() != header.IPv4ProtocolNumber {
		return rxDeliver
	}
	return rxVerdict(linkbase.VerifyIPv4(f[header.EthernetMinimumSize:]))
}

// putTxHeader writes into hdr the virtio-net header for f, an Ethernet
// frame the stack built, with complete checksums or, for a TCP segment
// built for segmentation offload, the pseudo-header sum. A TCP segment
// (IPv4, not a fragment) is sent as the kernel's own are: its checksum
// field holds the pseudo-header sum and NEEDS_CSUM asks whoever needs the
// checksum (a device, a forwarding path) to complete it, while local
// delivery accepts it unverified. When mss is not 0 and the segment carries
// more than mss bytes, it goes as a TSO segment (GSO_TCPV4, gso_size mss):
// the kernel cuts it into mss-sized ones where a wire needs them, and
// delivers it whole to a local socket. Other frames get a zero header
// (checksums complete).
func putTxHeader(hdr, f []byte, mss uint16) {
	clear(hdr[:vnetHdrLen])
	if len(f) < header.EthernetMinimumSize+header.IPv4MinimumSize ||
		header.Ethernet(f).Type() != header.IPv4ProtocolNumber {
		return
	}
	ip := header.IPv4(f[header.EthernetMinimumSize:])
	ihl := int(ip.HeaderLength())
	total := int(ip.TotalLength())
	if ihl < header.IPv4MinimumSize || total > len(ip) || total < ihl+header.TCPMinimumSize ||
		ip.TransportProtocol() != header.TCPProtocolNumber || ip.More() || ip.FragmentOffset() != 0 {
		return
	}
	tcp := header.TCP(ip[ihl:total])
	tcp.SetChecksum(linkbase.PseudoHeaderSum(ip, header.TCPProtocolNumber, len(tcp)))
	hdr[0] = vnetNeedsCsum
	binary.NativeEndian.PutUint16(hdr[6:], uint16(header.EthernetMinimumSize+ihl)) // csum_start
	binary.NativeEndian.PutUint16(hdr[8:], header.TCPChecksumOffset)               // csum_offset
	if off := int(tcp.DataOffset()); mss != 0 && off >= header.TCPMinimumSize && len(tcp)-off > int(mss) {
		hdr[1] = vnetGSOTCPv4
		binary.NativeEndian.PutUint16(hdr[2:], uint16(header.EthernetMinimumSize+ihl+off)) // hdr_len
		binary.NativeEndian.PutUint16(hdr[4:], mss)                                        // gso_size
	}
}
