package arb

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// MoldUDP64 packet layout (NASDAQ MoldUDP64 protocol specification 1.00):
// a 20-byte header, then Count message blocks, each a 2-byte big-endian
// length followed by that many bytes of message.
const (
	MoldSessionOffset = 0  // 10 bytes of session, ASCII, right-padded with spaces
	MoldSeqOffset     = 10 // 8 bytes, big-endian: sequence number of the first message
	MoldCountOffset   = 18 // 2 bytes, big-endian: number of messages
	MoldHeaderLen     = 20
	MoldSessionLen    = 10

	// MoldEndOfSession is the message count that marks the end of a
	// session; such a packet carries no message.
	MoldEndOfSession = 0xFFFF
)

var (
	// ErrMoldShort means a packet is shorter than the MoldUDP64 header.
	ErrMoldShort = errors.New("arb: moldudp64 packet shorter than its header")
	// ErrMoldTruncated means a message block runs past the end of the packet.
	ErrMoldTruncated = errors.New("arb: moldudp64 message runs past the packet")
	// ErrMoldTrailing means bytes follow the last message of a packet.
	ErrMoldTrailing = errors.New("arb: moldudp64 bytes after the last message")
	// ErrMoldSeqOverflow means a packet's messages would number past 2^64-1.
	ErrMoldSeqOverflow = errors.New("arb: moldudp64 sequence number overflows")
)

// MoldError reports a malformed MoldUDP64 packet: Err is one of the ErrMold
// sentinels and Offset the byte offset in the packet where it was found.
type MoldError struct {
	Offset int
	Err    error
}

// Error implements error.
func (e *MoldError) Error() string { return fmt.Sprintf("%v (offset %d)", e.Err, e.Offset) }

// Unwrap returns the cause.
func (e *MoldError) Unwrap() error { return e.Err }

// Mold is a zero-copy view of one MoldUDP64 downstream packet. Validate it
// once; the accessors do not check bounds again and panic on a packet that
// did not validate.
type Mold []byte

// Validate checks that p holds a header and exactly Count well-formed
// message blocks (none for a heartbeat or an end of session), and that the
// sequence numbers of its messages do not overflow. It does not allocate
// unless it fails.
func (p Mold) Validate() error {
	if len(p) < MoldHeaderLen {
		return moldError(len(p), ErrMoldShort)
	}
	n := int(binary.BigEndian.Uint16(p[MoldCountOffset:]))
	if n == MoldEndOfSession {
		n = 0
	}
	if n > 0 && binary.BigEndian.Uint64(p[MoldSeqOffset:]) > ^uint64(0)-uint64(n) {
		return moldError(MoldSeqOffset, ErrMoldSeqOverflow)
	}
	off := MoldHeaderLen
	for ; n > 0; n-- {
		if len(p)-off < 2 {
			return moldError(off, ErrMoldTruncated)
		}
		next := off + 2 + int(binary.BigEndian.Uint16(p[off:]))
		if next > len(p) {
			return moldError(off, ErrMoldTruncated)
		}
		off = next
	}
	if off != len(p) {
		return moldError(off, ErrMoldTrailing)
	}
	return nil
}

// moldError is kept out of line so that Validate stays small.
//
//go:noinline
func moldError(off int, err error) error { return &MoldError{Offset: off, Err: err} }

// SessionSlice returns the 10-byte session, aliasing p.
func (p Mold) SessionSlice() []byte { return p[MoldSessionOffset : MoldSessionOffset+MoldSessionLen] }

// Session returns a copy of the 10-byte session.
func (p Mold) Session() [MoldSessionLen]byte {
	return [MoldSessionLen]byte(p[MoldSessionOffset : MoldSessionOffset+MoldSessionLen])
}

// Seq returns the sequence number of the packet's first message; for a
// heartbeat or an end of session, the sequence number of the next message
// the sender will send.
func (p Mold) Seq() uint64 { return binary.BigEndian.Uint64(p[MoldSeqOffset:]) }

// Count returns the message count field: the number of messages, 0 for a
// heartbeat, MoldEndOfSession at the end of the session.
func (p Mold) Count() uint16 { return binary.BigEndian.Uint16(p[MoldCountOffset:]) }

// Heartbeat reports whether p carries no message and does not end the session.
func (p Mold) Heartbeat() bool { return p.Count() == 0 }

// EndOfSession reports whether p marks the end of its session.
func (p Mold) EndOfSession() bool { return p.Count() == MoldEndOfSession }

// NextMessage returns the message whose block starts at off, without its
// length prefix and aliasing p, and the offset of the next block. Start at
// MoldHeaderLen and call it Count times on a validated packet:
//
//	off := arb.MoldHeaderLen
//	for i := 0; i < int(p.Count()); i++ {
//		var msg []byte
//		msg, off = p.NextMessage(off)
//		use(p.Seq()+uint64(i), msg)
//	}
func (p Mold) NextMessage(off int) (msg []byte, next int) {
	l := int(binary.BigEndian.Uint16(p[off:]))
	return p[off+2 : off+2+l], off + 2 + l
}

// AppendMold appends a MoldUDP64 packet of the given session, first
// sequence number and messages to dst and returns the extended slice; count
// overrides the count field when msgs is empty (0 for a heartbeat,
// MoldEndOfSession). A session shorter than 10 bytes is padded with spaces.
// It is meant for tests, examples and feed generators.
func AppendMold(dst []byte, session string, seq uint64, count uint16, msgs ...[]byte) []byte {
	var s [MoldSessionLen]byte
	for i := range s {
		s[i] = ' '
	}
	copy(s[:], session)
	dst = append(dst, s[:]...)
	dst = binary.BigEndian.AppendUint64(dst, seq)
	if len(msgs) > 0 {
		count = uint16(len(msgs))
	}
	dst = binary.BigEndian.AppendUint16(dst, count)
	for _, m := range msgs {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(m)))
		dst = append(dst, m...)
	}
	return dst
}
