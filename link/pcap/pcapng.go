package pcap

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"

	"github.com/gopacket/gopacket/layers"

	"github.com/tickwire/tickwire/link/frame"
)

// Bounds of the pcapng reader. Lengths in a pcapng file never size an
// allocation: packet bytes go straight from the read buffer into the
// caller's frame, and every other block is skipped as it is read, except
// for the few fixed-size fields the reader keeps.
const (
	// MaxInterfaces is the most interface description blocks a pcapng
	// section may hold. Each costs the Reader 32 bytes, so a section costs
	// at most 128 KiB; a capture has one interface per capturing device,
	// which is far fewer. Another section header starts the count again.
	MaxInterfaces = 4096
	// MaxBlockLen is the longest pcapng block the Reader accepts, in bytes:
	// a packet block of MaxRecordLen bytes with options, or the largest
	// name resolution and decryption secrets blocks that writers produce,
	// fit many times over. Blocks are skipped without being held, so this
	// bounds how much of the file one corrupt length can make the reader
	// skip, not its memory.
	MaxBlockLen = 64 << 20
)

var (
	// ErrTooManyInterfaces means a pcapng section describes more than
	// MaxInterfaces interfaces.
	ErrTooManyInterfaces = fmt.Errorf("pcap: too many interfaces (more than %d)", MaxInterfaces)
	// ErrBlockTooLarge means a pcapng block is longer than MaxBlockLen.
	ErrBlockTooLarge = fmt.Errorf("pcap: pcapng block too large (more than %d bytes)", MaxBlockLen)
	// ErrRecordTooLarge means a pcapng packet block captured more than
	// MaxRecordLen bytes.
	ErrRecordTooLarge = fmt.Errorf("pcap: record too large (more than %d bytes)", MaxRecordLen)
)

// pcapng block types and option codes (draft-ietf-opsawg-pcapng).
const (
	ngBlockSection   = 0x0a0d0d0a
	ngBlockInterface = 1
	ngBlockPacket    = 2 // obsolete Packet Block
	ngBlockSimple    = 3
	ngBlockEnhanced  = 6

	ngByteOrderMagic = 0x1a2b3c4d

	ngOptEnd      = 0
	ngOptTSResol  = 9
	ngOptTSOffset = 14
)

// ngInterface is what the reader keeps of an interface description block.
type ngInterface struct {
	linkType  layers.LinkType
	supported bool // supportedLinkType(linkType)
	snapLen   uint32
	units     uint64 // timestamp units per second, from if_tsresol
	nsPer     uint64 // nanoseconds per unit when that is a whole number, else 0
	offset    int64  // seconds added to every timestamp, from if_tsoffset
}

// nanos converts a packet block's timestamp to nanoseconds since the epoch.
func (ifc *ngInterface) nanos(ts uint64) int64 {
	if ifc.nsPer != 0 {
		return int64(ts*ifc.nsPer) + ifc.offset*1e9
	}
	frac := ts % ifc.units
	hi, lo := bits.Mul64(frac, 1e9)
	ns, _ := bits.Div64(hi, lo, ifc.units) // hi < units because frac < units
	return (int64(ts/ifc.units)+ifc.offset)*1e9 + int64(ns)
}

// ngReader reads the packet records of a pcapng file. Its memory is its
// fields plus at most MaxInterfaces ngInterface values, whatever the file.
type ngReader struct {
	br       *bufio.Reader
	big      bool            // the current section is big-endian
	linkType layers.LinkType // of the first interface of the first section
	ifaces   []ngInterface   // of the current section
}

func (r *ngReader) u16(b []byte) uint16 {
	if r.big {
		return binary.BigEndian.Uint16(b)
	}
	return binary.LittleEndian.Uint16(b)
}

func (r *ngReader) u32(b []byte) uint32 {
	if r.big {
		return binary.BigEndian.Uint32(b)
	}
	return binary.LittleEndian.Uint32(b)
}

func (r *ngReader) u64(b []byte) uint64 {
	if r.big {
		return binary.BigEndian.Uint64(b)
	}
	return binary.LittleEndian.Uint64(b)
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("pcap: malformed pcapng: "+format, args...)
}

// peek returns the next n bytes (n is at most 28) without consuming them.
func (r *ngReader) peek(n int) ([]byte, error) {
	b, err := r.br.Peek(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return b, err
}

func (r *ngReader) discard(n int) error {
	_, err := r.br.Discard(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// start reads the first section header and the blocks up to the first
// interface description, whose link type becomes the reader's.
func (r *ngReader) start() error {
	typ, total, err := r.blockHeader()
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return err
	}
	if typ != ngBlockSection {
		return malformed("first block has type %#x, not a section header", typ)
	}
	if err := r.readSection(total); err != nil {
		return err
	}
	for {
		typ, total, err := r.blockHeader()
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return err
		}
		switch typ {
		case ngBlockInterface:
			if err := r.readInterface(total); err != nil {
				return err
			}
			r.linkType = r.ifaces[0].linkType
			return nil
		case ngBlockSection:
			err = r.readSection(total)
		case ngBlockPacket, ngBlockSimple, ngBlockEnhanced:
			return malformed("packet block before any interface description")
		default:
			err = r.skip(total, 0)
		}
		if err != nil {
			return err
		}
	}
}

// blockHeader peeks at the next block's type and total length and checks
// the length. At a clean end of the file it returns io.EOF. A section
// header sets the byte order first, since its length is written in it.
func (r *ngReader) blockHeader() (typ, total uint32, err error) {
	h, err := r.br.Peek(8)
	if err != nil {
		if len(h) == 0 && err == io.EOF {
			return 0, 0, io.EOF
		}
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, 0, err
	}
	typ = r.u32(h)
	if typ == ngBlockSection {
		if h, err = r.peek(12); err != nil {
			return 0, 0, err
		}
		switch {
		case binary.LittleEndian.Uint32(h[8:]) == ngByteOrderMagic:
			r.big = false
		case binary.BigEndian.Uint32(h[8:]) == ngByteOrderMagic:
			r.big = true
		default:
			return 0, 0, malformed("section header byte-order magic %#x", binary.LittleEndian.Uint32(h[8:]))
		}
	}
	total = r.u32(h[4:])
	switch {
	case total > MaxBlockLen:
		return 0, 0, ErrBlockTooLarge
	case total < 12 || total%4 != 0:
		return 0, 0, malformed("block type %#x has length %d", typ, total)
	}
	return typ, total, nil
}

// skip consumes the rest of a block of total bytes of which done were
// consumed, and checks that its trailing length matches the leading one.
func (r *ngReader) skip(total, done uint32) error {
	if err := r.discard(int(total - done - 4)); err != nil {
		return err
	}
	t, err := r.peek(4)
	if err != nil {
		return err
	}
	if got := r.u32(t); got != total {
		return malformed("block of length %d ends with length %d", total, got)
	}
	return r.discard(4)
}

// readSection reads a section header, which forgets the interfaces of the
// section before it.
func (r *ngReader) readSection(total uint32) error {
	if total < 28 {
		return malformed("section header of length %d", total)
	}
	h, err := r.peek(24)
	if err != nil {
		return err
	}
	// Version 1.2 was written by mistake by some tools and is read as 1.0.
	if major, minor := r.u16(h[12:]), r.u16(h[14:]); major != 1 || (minor != 0 && minor != 2) {
		return fmt.Errorf("pcap: pcapng version %d.%d not supported", major, minor)
	}
	r.ifaces = r.ifaces[:0]
	return r.skip(total, 0)
}

// readInterface reads an interface description block. Of its options only
// the timestamp resolution and offset are kept.
func (r *ngReader) readInterface(total uint32) error {
	if len(r.ifaces) == MaxInterfaces {
		return ErrTooManyInterfaces
	}
	if total < 20 {
		return malformed("interface description of length %d", total)
	}
	h, err := r.peek(16)
	if err != nil {
		return err
	}
	ifc := ngInterface{linkType: layers.LinkType(r.u16(h[8:])), snapLen: r.u32(h[12:])}
	ifc.supported = supportedLinkType(uint16(ifc.linkType))
	resol, offset := byte(6), int64(0)
	if err := r.discard(16); err != nil {
		return err
	}
	done := uint32(16)
	for total-done-4 >= 4 {
		o, err := r.peek(4)
		if err != nil {
			return err
		}
		code, n := r.u16(o), uint32(r.u16(o[2:]))
		if code == ngOptEnd {
			break
		}
		padded := (n + 3) &^ 3
		if padded > total-done-8 {
			return malformed("interface option %d of length %d overflows its block", code, n)
		}
		if err := r.discard(4); err != nil {
			return err
		}
		done += 4
		switch {
		case code == ngOptTSResol && n >= 1:
			v, err := r.peek(1)
			if err != nil {
				return err
			}
			resol = v[0]
		case code == ngOptTSOffset && n >= 8:
			v, err := r.peek(8)
			if err != nil {
				return err
			}
			offset = int64(r.u64(v))
		}
		if err := r.discard(int(padded)); err != nil {
			return err
		}
		done += padded
	}
	if resol&0x80 != 0 {
		if resol&0x7f > 63 {
			return fmt.Errorf("pcap: interface %d: timestamp resolution 2^-%d not supported", len(r.ifaces), resol&0x7f)
		}
		ifc.units = 1 << (resol & 0x7f)
	} else {
		if resol > 19 {
			return fmt.Errorf("pcap: interface %d: timestamp resolution 10^-%d not supported", len(r.ifaces), resol)
		}
		ifc.units = 1
		for range resol {
			ifc.units *= 10
		}
	}
	if ifc.units <= 1e9 && 1e9%ifc.units == 0 {
		ifc.nsPer = 1e9 / ifc.units
	}
	ifc.offset = offset
	if err := r.skip(total, done); err != nil {
		return err
	}
	r.ifaces = append(r.ifaces, ifc)
	return nil
}

// readFrame copies the next packet record into f. It returns io.EOF at a
// clean end of the file, and a *LinkTypeError at a record of an interface
// whose link type is not supported.
func (r *ngReader) readFrame(f *frame.Frame) error {
	for {
		typ, total, err := r.blockHeader()
		if err != nil {
			return err
		}
		switch typ {
		case ngBlockEnhanced, ngBlockPacket:
			ok, err := r.readPacket(f, typ, total)
			if ok || err != nil {
				return err
			}
		case ngBlockSimple:
			ok, err := r.readSimple(f, total)
			if ok || err != nil {
				return err
			}
		case ngBlockInterface:
			err = r.readInterface(total)
		case ngBlockSection:
			err = r.readSection(total)
		default:
			err = r.skip(total, 0)
		}
		if err != nil {
			return err
		}
	}
}

// readPacket reads an enhanced packet block or an obsolete packet block,
// which share their layout but for the width of the interface ID. It
// reports whether f now holds the record.
func (r *ngReader) readPacket(f *frame.Frame, typ, total uint32) (bool, error) {
	if total < 32 {
		return false, malformed("packet block of length %d", total)
	}
	h, err := r.peek(28)
	if err != nil {
		return false, err
	}
	id := r.u32(h[8:])
	if typ == ngBlockPacket {
		id = uint32(r.u16(h[8:]))
	}
	if id >= uint32(len(r.ifaces)) {
		return false, malformed("packet block for interface %d of %d", id, len(r.ifaces))
	}
	ifc := &r.ifaces[id]
	capLen, wireLen := r.u32(h[20:]), r.u32(h[24:])
	if capLen > MaxRecordLen {
		return false, ErrRecordTooLarge
	}
	if (capLen+3)&^3 > total-32 {
		return false, malformed("captured length %d overflows a packet block of length %d", capLen, total)
	}
	if !ifc.supported {
		return false, &LinkTypeError{LinkType: uint16(ifc.linkType), Interface: int(id)}
	}
	f.LinkType = uint16(ifc.linkType)
	f.ChecksumVerified = false
	f.Time = ifc.nanos(uint64(r.u32(h[12:]))<<32 | uint64(r.u32(h[16:])))
	f.WireLen = max(int(wireLen), int(capLen))
	return true, r.readData(f, int(capLen), total, 28)
}

// readSimple reads a simple packet block, which belongs to the section's
// first interface and has no timestamp.
func (r *ngReader) readSimple(f *frame.Frame, total uint32) (bool, error) {
	if total < 16 {
		return false, malformed("simple packet block of length %d", total)
	}
	if len(r.ifaces) == 0 {
		return false, malformed("simple packet block before any interface description")
	}
	h, err := r.peek(12)
	if err != nil {
		return false, err
	}
	ifc := &r.ifaces[0]
	wireLen := r.u32(h[8:])
	capLen := min(wireLen, total-16)
	if ifc.snapLen != 0 {
		capLen = min(capLen, ifc.snapLen)
	}
	if capLen > MaxRecordLen {
		return false, ErrRecordTooLarge
	}
	if !ifc.supported {
		return false, &LinkTypeError{LinkType: uint16(ifc.linkType), Interface: 0}
	}
	f.LinkType = uint16(ifc.linkType)
	f.ChecksumVerified = false
	f.Time = 0
	f.WireLen = max(int(wireLen), int(capLen))
	return true, r.readData(f, int(capLen), total, 12)
}

// readData copies capLen packet bytes, at offset done of a block of total
// bytes, into f.Buf (cut to its length), then skips the rest of the block.
func (r *ngReader) readData(f *frame.Frame, capLen int, total, done uint32) error {
	if err := r.discard(int(done)); err != nil {
		return err
	}
	n := min(capLen, len(f.Buf))
	if _, err := io.ReadFull(r.br, f.Buf[:n]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	f.N = n
	return r.skip(total, done+uint32(n))
}
