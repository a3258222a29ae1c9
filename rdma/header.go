package rdma

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Opcode is a BTH opcode (IBTA Vol. 1, 9.2, table 35). The top three bits
// are the transport (0 for RC, the only one this package speaks), the low
// five the operation.
type Opcode uint8

// The reliable-connection opcodes this package sends and accepts.
const (
	OpSendFirst         Opcode = 0x00
	OpSendMiddle        Opcode = 0x01
	OpSendLast          Opcode = 0x02
	OpSendLastImm       Opcode = 0x03
	OpSendOnly          Opcode = 0x04
	OpSendOnlyImm       Opcode = 0x05
	OpWriteFirst        Opcode = 0x06
	OpWriteMiddle       Opcode = 0x07
	OpWriteLast         Opcode = 0x08
	OpWriteLastImm      Opcode = 0x09
	OpWriteOnly         Opcode = 0x0a
	OpWriteOnlyImm      Opcode = 0x0b
	OpReadRequest       Opcode = 0x0c
	OpReadResponseFirst Opcode = 0x0d
	OpReadResponseMid   Opcode = 0x0e
	OpReadResponseLast  Opcode = 0x0f
	OpReadResponseOnly  Opcode = 0x10
	OpAcknowledge       Opcode = 0x11
)

// Header sizes in bytes.
const (
	BTHSize   = 12
	RETHSize  = 16
	AETHSize  = 4
	ImmSize   = 4
	ICRCSize  = 4
	UDPPort   = 4791 // RoCEv2's IANA-assigned destination port (Annex A17.3)
	maxHdrLen = BTHSize + RETHSize + ImmSize
)

// Offsets of the BTH fields (IBTA Vol. 1, 9.2, figure 99).
const (
	BTHOpcodeOffset = 0
	BTHFlagsOffset  = 1 // SE(1) M(1) PadCnt(2) TVer(4)
	BTHPKeyOffset   = 2
	BTHResv8aOffset = 4 // FECN(1) BECN(1) reserved(6) in RoCEv2; variant, masked in the ICRC
	BTHDestQPOffset = 5 // 24 bits
	BTHAckReqOffset = 8 // A(1) reserved(7)
	BTHPSNOffset    = 9 // 24 bits
)

// DefaultPKey is the default partition key (full membership), the only one
// a RoCEv2 queue pair here uses.
const DefaultPKey = 0xffff

// PSNMask keeps the 24 bits of a packet sequence number.
const PSNMask = 1<<24 - 1

// flags of an opcode: which extension headers follow the BTH and where the
// packet sits in its message.
const (
	fReth = 1 << iota
	fAeth
	fImm
	fPayload
	fFirst
	fLast
	fReq  // sent by the requester (else a response)
	fSend // consumes a receive WQE
	fWrite
	fRead
)

var opFlags = [256]uint16{
	OpSendFirst:         fReq | fSend | fPayload | fFirst,
	OpSendMiddle:        fReq | fSend | fPayload,
	OpSendLast:          fReq | fSend | fPayload | fLast,
	OpSendLastImm:       fReq | fSend | fPayload | fLast | fImm,
	OpSendOnly:          fReq | fSend | fPayload | fFirst | fLast,
	OpSendOnlyImm:       fReq | fSend | fPayload | fFirst | fLast | fImm,
	OpWriteFirst:        fReq | fWrite | fPayload | fFirst | fReth,
	OpWriteMiddle:       fReq | fWrite | fPayload,
	OpWriteLast:         fReq | fWrite | fPayload | fLast,
	OpWriteLastImm:      fReq | fWrite | fPayload | fLast | fImm,
	OpWriteOnly:         fReq | fWrite | fPayload | fFirst | fLast | fReth,
	OpWriteOnlyImm:      fReq | fWrite | fPayload | fFirst | fLast | fReth | fImm,
	OpReadRequest:       fReq | fRead | fFirst | fLast | fReth,
	OpReadResponseFirst: fRead | fPayload | fFirst | fAeth,
	OpReadResponseMid:   fRead | fPayload,
	OpReadResponseLast:  fRead | fPayload | fLast | fAeth,
	OpReadResponseOnly:  fRead | fPayload | fFirst | fLast | fAeth,
	OpAcknowledge:       fAeth,
}

// Known reports whether o is an RC opcode this package handles.
func (o Opcode) Known() bool { return opFlags[o] != 0 }

// HeaderLen is the length of the BTH and the extension headers that follow
// it for opcode o (0 for an unknown opcode).
func (o Opcode) HeaderLen() int {
	f := opFlags[o]
	if f == 0 {
		return 0
	}
	n := BTHSize
	if f&fReth != 0 {
		n += RETHSize
	}
	if f&fAeth != 0 {
		n += AETHSize
	}
	if f&fImm != 0 {
		n += ImmSize
	}
	return n
}

var opNames = [...]string{
	"SEND_FIRST", "SEND_MIDDLE", "SEND_LAST", "SEND_LAST_IMM", "SEND_ONLY", "SEND_ONLY_IMM",
	"WRITE_FIRST", "WRITE_MIDDLE", "WRITE_LAST", "WRITE_LAST_IMM", "WRITE_ONLY", "WRITE_ONLY_IMM",
	"READ_REQUEST", "READ_RESPONSE_FIRST", "READ_RESPONSE_MIDDLE", "READ_RESPONSE_LAST",
	"READ_RESPONSE_ONLY", "ACKNOWLEDGE",
}

// String returns the spec's name of o, as in RC_SEND_ONLY.
func (o Opcode) String() string {
	if int(o) < len(opNames) {
		return "RC_" + opNames[o]
	}
	return fmt.Sprintf("opcode(%#02x)", uint8(o))
}

// BTH is a view of a Base Transport Header (12 bytes), in gVisor header
// style: the accessors do not check the length; Parse validates a packet
// once, after which they are safe.
type BTH []byte

// Opcode returns the opcode.
func (b BTH) Opcode() Opcode { return Opcode(b[BTHOpcodeOffset]) }

// SolicitedEvent returns the SE bit.
func (b BTH) SolicitedEvent() bool { return b[BTHFlagsOffset]&0x80 != 0 }

// MigReq returns the M bit.
func (b BTH) MigReq() bool { return b[BTHFlagsOffset]&0x40 != 0 }

// PadCount returns the number of pad bytes (0 to 3) after the payload.
func (b BTH) PadCount() int { return int(b[BTHFlagsOffset]>>4) & 3 }

// TVer returns the transport header version (0).
func (b BTH) TVer() uint8 { return b[BTHFlagsOffset] & 0xf }

// PKey returns the partition key.
func (b BTH) PKey() uint16 { return binary.BigEndian.Uint16(b[BTHPKeyOffset:]) }

// FECN returns RoCEv2's forward congestion notification bit.
func (b BTH) FECN() bool { return b[BTHResv8aOffset]&0x80 != 0 }

// BECN returns RoCEv2's backward congestion notification bit.
func (b BTH) BECN() bool { return b[BTHResv8aOffset]&0x40 != 0 }

// DestQP returns the destination queue pair number (24 bits).
func (b BTH) DestQP() uint32 { return get24(b[BTHDestQPOffset:]) }

// AckReq returns the A bit: the requester asks for an acknowledgement.
func (b BTH) AckReq() bool { return b[BTHAckReqOffset]&0x80 != 0 }

// PSN returns the packet sequence number (24 bits).
func (b BTH) PSN() uint32 { return get24(b[BTHPSNOffset:]) }

// BTHFields are the fields Encode writes.
type BTHFields struct {
	Opcode   Opcode
	SE, Mig  bool
	PadCount int    // 0 to 3
	PKey     uint16 // DefaultPKey unless you know better
	DestQP   uint32 // 24 bits
	AckReq   bool
	PSN      uint32 // 24 bits
}

// Encode writes f into b (12 bytes); reserved bits, FECN and BECN are zero.
func (b BTH) Encode(f *BTHFields) {
	b[0] = uint8(f.Opcode)
	fl := uint8(f.PadCount&3) << 4
	if f.SE {
		fl |= 0x80
	}
	if f.Mig {
		fl |= 0x40
	}
	b[1] = fl
	binary.BigEndian.PutUint16(b[2:], f.PKey)
	b[4] = 0
	put24(b[5:], f.DestQP)
	b[8] = 0
	if f.AckReq {
		b[8] = 0x80
	}
	put24(b[9:], f.PSN)
}

// RETH is a view of an RDMA Extended Transport Header (16 bytes).
type RETH []byte

// VA returns the remote virtual address.
func (r RETH) VA() uint64 { return binary.BigEndian.Uint64(r) }

// RKey returns the remote key.
func (r RETH) RKey() uint32 { return binary.BigEndian.Uint32(r[8:]) }

// DMALength returns the length in bytes of the whole RDMA operation.
func (r RETH) DMALength() uint32 { return binary.BigEndian.Uint32(r[12:]) }

// Encode writes the three fields into r (16 bytes).
func (r RETH) Encode(va uint64, rkey, length uint32) {
	binary.BigEndian.PutUint64(r, va)
	binary.BigEndian.PutUint32(r[8:], rkey)
	binary.BigEndian.PutUint32(r[12:], length)
}

// AETH is a view of an ACK Extended Transport Header (4 bytes): a syndrome
// byte and the 24-bit message sequence number.
type AETH []byte

// Syndrome returns the syndrome byte (see the Syndrome constants).
func (a AETH) Syndrome() uint8 { return a[0] }

// MSN returns the message sequence number.
func (a AETH) MSN() uint32 { return get24(a[1:]) }

// Encode writes syndrome and msn into a (4 bytes).
func (a AETH) Encode(syndrome uint8, msn uint32) {
	a[0] = syndrome
	put24(a[1:], msn)
}

// AETH syndromes (IBTA Vol. 1, 9.7.5.2.2, table 44): the top bits say
// ACK, RNR NAK or NAK; the low five bits are the credit count of an ACK,
// the timer code of an RNR NAK, the NAK code of a NAK.
const (
	SyndromeACK    = 0x00 // | credits (0x1f: invalid/none)
	SyndromeRNRNAK = 0x20 // | timer code (see RNRTimer)
	SyndromeNAK    = 0x60 // | NAK code

	NAKSequenceError     = 0
	NAKInvalidRequest    = 1
	NAKRemoteAccessError = 2
	NAKRemoteOpError     = 3

	// syndromeACKNoCredits is what this package sends: no end-to-end
	// flow control credits advertised (credit code 11111, "invalid").
	syndromeACKNoCredits = SyndromeACK | 0x1f
)

// Packet holds views of one parsed RoCEv2 transport packet (the UDP
// payload): its headers, payload (pad and ICRC stripped) and ICRC. Views
// alias the parsed buffer.
type Packet struct {
	BTH     BTH
	RETH    RETH // nil unless the opcode carries one
	AETH    AETH // nil unless the opcode carries one
	Imm     []byte
	Payload []byte
	ICRC    uint32 // as read from the wire (little-endian, see ICRC)
}

// Errors of Parse.
var (
	ErrShort      = errors.New("rdma: packet too short")
	ErrOpcode     = errors.New("rdma: unsupported opcode")
	ErrVersion    = errors.New("rdma: unsupported transport version")
	ErrPadding    = errors.New("rdma: bad pad count")
	ErrBadICRC    = errors.New("rdma: ICRC mismatch")
	ErrPayloadLen = errors.New("rdma: payload length not allowed for opcode")
)

// Parse fills p with views of b, a RoCEv2 packet from the BTH to the ICRC
// (a UDP payload). It checks that the opcode is known, the lengths fit,
// the pad count is 0 for packets without payload and the transport version
// is 0; not the ICRC (see ICRC). It allocates nothing and never panics.
func Parse(b []byte, p *Packet) error {
	*p = Packet{}
	if len(b) < BTHSize+ICRCSize {
		return ErrShort
	}
	bth := BTH(b[:BTHSize])
	op := bth.Opcode()
	f := opFlags[op]
	if f == 0 {
		return ErrOpcode
	}
	if bth.TVer() != 0 {
		return ErrVersion
	}
	hl := op.HeaderLen()
	if len(b) < hl+ICRCSize {
		return ErrShort
	}
	p.BTH = bth
	o := BTHSize
	if f&fReth != 0 {
		p.RETH = RETH(b[o : o+RETHSize])
		o += RETHSize
	}
	if f&fAeth != 0 {
		p.AETH = AETH(b[o : o+AETHSize])
		o += AETHSize
	}
	if f&fImm != 0 {
		p.Imm = b[o : o+ImmSize]
		o += ImmSize
	}
	end := len(b) - ICRCSize
	pad := bth.PadCount()
	if f&fPayload == 0 {
		if end != o || pad != 0 {
			return ErrPayloadLen
		}
	} else {
		if (end-o)%4 != 0 || end-o < pad {
			return ErrPadding
		}
		p.Payload = b[o : end-pad]
	}
	p.ICRC = binary.LittleEndian.Uint32(b[end:])
	return nil
}

func get24(b []byte) uint32 { return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]) }

func put24(b []byte, v uint32) { b[0], b[1], b[2] = byte(v>>16), byte(v>>8), byte(v) }
