// Package frame defines the one small interface that every frame source in
// tickwire implements: a batch of link-layer frames, each with its capture
// timestamp and link type, read into buffers that the caller owns.
//
// The pcap and pcapng file reader (link/pcap) and live AF_PACKET and AF_XDP
// capture (link/afpacket, link/afxdp) implement Source, so the same reader
// serves both data paths: the active stack (tickwire, through
// pcap.Replayer) and the passive reassembler (mirror).
//
// A typical loop allocates its batch once and reuses it:
//
//	batch := frame.NewBatch(64, 2048)
//	for {
//		n, err := src.ReadFrames(batch)
//		for _, f := range batch[:n] {
//			handle(f.LinkType, f.Data(), f.Time)
//		}
//		if err != nil {
//			break // io.EOF at the end of a file
//		}
//	}
//
// The package example runs this loop over a Source that serves frames from
// memory.
//
// This package has no dependency on the netstack.
package frame

// Frame is one slot of a batch. The caller owns Buf; a Source fills it.
type Frame struct {
	// Buf is caller-owned storage. A Source writes a frame into Buf[:N] and
	// never reslices or replaces Buf. Its length is the largest frame the
	// slot can hold: a longer frame is truncated to len(Buf) and WireLen
	// tells how long it was.
	Buf []byte
	// N is the number of bytes of Buf that hold the frame.
	N int
	// WireLen is the frame's length on the wire; it is larger than N when
	// the capture or the slot truncated the frame.
	WireLen int
	// Time is the capture timestamp in nanoseconds since the Unix epoch,
	// 0 when the source does not know it.
	Time int64
	// LinkType is the link-layer header type of the frame's bytes, a pcap
	// LINKTYPE_ number (LinkTypeEthernet and the other LinkType constants).
	// Every Source in tickwire sets it on every frame. 0 is read as
	// Ethernet, so that a Source written before this field existed still
	// means what it did; 0 is LINKTYPE_NULL (BSD loopback), which no
	// consumer in tickwire decodes.
	LinkType uint16
	// ChecksumVerified reports that the source checked the frame's IPv4
	// header checksum and its TCP or UDP checksum and found them right: a
	// NIC's receive checksum offload (link/dmaring, from the completion's
	// sum, as Linux's CHECKSUM_COMPLETE). A consumer may then skip its own
	// checks (mirror.Assembler.HandleVerifiedLinkFrame). False says nothing:
	// the consumer checks. Every Source in tickwire sets it on every frame.
	ChecksumVerified bool
	// HashType says what Hash covers, as bits a source defines (link/dmaring:
	// dmaring.HashTypeIPv4 and the others); 0 means the frame has no hash.
	// Sources that hash (a NIC's RSS, link/dmaring) set HashType and Hash
	// on every frame; the others never write them (a NewBatch holds 0).
	HashType uint8
	// Hash is the source's hash of the frame's flow when HashType is not 0:
	// a NIC's RSS Toeplitz hash, the same for every frame of a flow
	// direction, which picked the frame's receive queue.
	Hash uint32
}

// Link-layer header types, as numbered by pcap's LINKTYPE_ values
// (https://www.tcpdump.org/linktypes.html). The ones listed are those that
// tickwire's readers and the mirror reassembler decode.
const (
	// LinkTypeEthernet is an Ethernet frame, possibly VLAN-tagged.
	LinkTypeEthernet = 1
	// LinkTypeRaw is a raw IP packet, IPv4 or IPv6 by its version field.
	LinkTypeRaw = 101
	// LinkTypeLinuxSLL is a Linux cooked capture, version 1: a 16-byte
	// header whose last two bytes hold the EtherType (tcpdump -i any).
	LinkTypeLinuxSLL = 113
	// LinkTypeIPv4 is a raw IPv4 packet.
	LinkTypeIPv4 = 228
	// LinkTypeLinuxSLL2 is a Linux cooked capture, version 2: a 20-byte
	// header whose first two bytes hold the EtherType (tcpdump -i any
	// since libpcap 1.10).
	LinkTypeLinuxSLL2 = 276
)

// LinkTypeName returns the name of pcap link type lt without its
// LINKTYPE_ prefix ("ETHERNET", "LINUX_SLL", "IEEE802_11"), or "" when this
// package does not know it.
func LinkTypeName(lt uint16) string {
	switch lt {
	case 0:
		return "NULL"
	case LinkTypeEthernet:
		return "ETHERNET"
	case 6:
		return "IEEE802_5"
	case 8:
		return "SLIP"
	case 9:
		return "PPP"
	case 10:
		return "FDDI"
	case 50:
		return "PPP_HDLC"
	case 51:
		return "PPP_ETHER"
	case 100:
		return "ATM_RFC1483"
	case LinkTypeRaw:
		return "RAW"
	case 104:
		return "C_HDLC"
	case 105:
		return "IEEE802_11"
	case 107:
		return "FRELAY"
	case 108:
		return "LOOP"
	case LinkTypeLinuxSLL:
		return "LINUX_SLL"
	case 127:
		return "IEEE802_11_RADIOTAP"
	case 187:
		return "BLUETOOTH_HCI_H4"
	case 189:
		return "USB_LINUX"
	case 195:
		return "IEEE802_15_4_WITHFCS"
	case 201:
		return "BLUETOOTH_HCI_H4_WITH_PHDR"
	case 215:
		return "IEEE802_15_4_NONASK_PHY"
	case 220:
		return "USB_LINUX_MMAPPED"
	case LinkTypeIPv4:
		return "IPV4"
	case 229:
		return "IPV6"
	case 239:
		return "NFLOG"
	case 249:
		return "USBPCAP"
	case 253:
		return "NETLINK"
	case LinkTypeLinuxSLL2:
		return "LINUX_SLL2"
	}
	return ""
}

// Data returns the frame's bytes, Buf[:N]. They are valid until the next
// call to ReadFrames with the same batch.
func (f *Frame) Data() []byte { return f.Buf[:f.N] }

// Truncated reports whether the frame was cut short by the capture or the slot.
func (f *Frame) Truncated() bool { return f.WireLen > f.N }

// Source reads link-layer frames in batches.
//
// ReadFrames fills frames[0:n] and returns n. It returns n > 0 with a nil
// error while frames remain; at the end of a finite source it returns the
// frames it has (possibly 0) with io.EOF. A Source never allocates packet
// memory: it copies each frame into the caller's Buf. Implementations
// document whether ReadFrames may be called from several goroutines; by
// default it may not.
type Source interface {
	ReadFrames(frames []Frame) (n int, err error)
	Close() error
}

// NewBatch returns n frames, each with a Buf of size bytes carved from one
// allocation, for use with Source.ReadFrames.
func NewBatch(n, size int) []Frame {
	mem := make([]byte, n*size)
	batch := make([]Frame, n)
	for i := range batch {
		batch[i].Buf = mem[i*size : (i+1)*size : (i+1)*size]
	}
	return batch
}
