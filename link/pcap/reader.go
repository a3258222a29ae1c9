// Package pcap reads and writes capture files and replays them.
//
// Reader reads classic pcap files in all four variants (little or big
// endian, microsecond or nanosecond timestamps), pcapng files, and either of
// them gzip-compressed, and implements frame.Source: frames are copied into
// batch buffers that the caller owns, with nanosecond timestamps. Writer
// writes classic pcap files with nanosecond timestamps. Replayer feeds any
// frame.Source into an Injector (the inbound path of a link endpoint, see
// link/pcap/recorder) as fast as possible or at the recorded pace.
//
// A typical replay of a capture into a tickwire stack:
//
//	rec, _ := recorder.New(link, nil)  // wraps the stack's link; injects inbound frames
//	s, _ := tickwire.New(tickwire.Config{Link: rec, ...})
//	src, _ := pcap.Open("feed.pcap")
//	defer src.Close()
//	res, err := (&pcap.Replayer{Speed: 1}).Replay(ctx, src, rec)
//
// A Reader's memory is bounded by a constant, whatever the file holds: a
// 64 KiB read buffer (twice that and the gzip decompressor's state, about
// 45 KiB, for a compressed file), plus at most a MaxRecordLen packet buffer
// for a classic file, or at most MaxInterfaces interface records of 32
// bytes for a pcapng one: under 512 KiB in all. A file that would need more
// (a longer record, a larger block, more interfaces) is refused with an
// error.
//
// This package has no dependency on the netstack; the endpoint that records
// a live link lives in link/pcap/recorder.
package pcap

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/tickwire/tickwire/link/frame"
)

// MaxRecordLen is the longest record the Reader accepts, in captured bytes:
// libpcap's MAXIMUM_SNAPLEN. A longer record is reported as a RecordError
// (wrapping ErrRecordTooLarge for pcapng), so a corrupt length field cannot
// make the reader allocate more than this.
const MaxRecordLen = 262144

// Format is the container format of a capture file.
type Format int

const (
	// FormatPcap is the classic libpcap format with microsecond timestamps.
	FormatPcap Format = iota + 1
	// FormatPcapNano is the classic libpcap format with nanosecond timestamps.
	FormatPcapNano
	// FormatPcapNG is the pcapng format.
	FormatPcapNG
)

// String returns the format's usual name.
func (f Format) String() string {
	switch f {
	case FormatPcap:
		return "pcap"
	case FormatPcapNano:
		return "pcap-ns"
	case FormatPcapNG:
		return "pcapng"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

var (
	// ErrUnknownFormat means the file starts with neither a pcap nor a
	// pcapng magic number.
	ErrUnknownFormat = errors.New("pcap: unknown file format")
	// ErrClosed is returned by ReadFrames after Close.
	ErrClosed = errors.New("pcap: reader closed")
)

// ErrUnsupportedLinkType is wrapped by every LinkTypeError.
var ErrUnsupportedLinkType = errors.New("pcap: unsupported link type")

// LinkTypeError reports a capture, or a pcapng interface, whose link type
// the Reader does not decode. The Reader supports the link types that
// link/frame names: Ethernet, Linux cooked captures (SLL and SLL2) and raw
// IP (RAW and IPV4); it refuses the others rather than hand on frames that
// nobody downstream would decode.
type LinkTypeError struct {
	// LinkType is the pcap LINKTYPE_ number.
	LinkType uint16
	// Interface is the index of the pcapng interface in its section, or
	// -1 for a classic pcap file.
	Interface int
}

// Error implements error. It names the link type by number and, when
// known, by name: "pcap: unsupported link type 105 (IEEE802_11)".
func (e *LinkTypeError) Error() string {
	s := "pcap: "
	if e.Interface >= 0 {
		s += fmt.Sprintf("interface %d: ", e.Interface)
	}
	s += fmt.Sprintf("unsupported link type %d", e.LinkType)
	if name := frame.LinkTypeName(e.LinkType); name != "" {
		s += " (" + name + ")"
	}
	return s
}

// Unwrap returns ErrUnsupportedLinkType.
func (e *LinkTypeError) Unwrap() error { return ErrUnsupportedLinkType }

// supportedLinkType reports whether the Reader hands on frames of link type
// lt.
func supportedLinkType(lt uint16) bool {
	switch lt {
	case frame.LinkTypeEthernet, frame.LinkTypeRaw, frame.LinkTypeLinuxSLL, frame.LinkTypeIPv4, frame.LinkTypeLinuxSLL2:
		return true
	}
	return false
}

// HeaderError reports a file whose header (the classic file header, or the
// first pcapng section header) could not be read.
type HeaderError struct {
	Err error
}

// Error implements error.
func (e *HeaderError) Error() string { return "pcap: bad file header: " + causeText(e.Err) }

// causeText is err's message without this package's prefix, which the
// wrapping error already carries.
func causeText(err error) string {
	return strings.TrimPrefix(err.Error(), "pcap: ")
}

// Unwrap returns the cause.
func (e *HeaderError) Unwrap() error { return e.Err }

// RecordError reports a record that could not be read: a truncated record
// (Err is io.ErrUnexpectedEOF) or a corrupt one. Record counts packet
// records from 1, so Record-1 records were read before it.
type RecordError struct {
	Record int64
	Err    error
}

// Error implements error.
func (e *RecordError) Error() string {
	return fmt.Sprintf("pcap: record %d: %s", e.Record, causeText(e.Err))
}

// Unwrap returns the cause.
func (e *RecordError) Unwrap() error { return e.Err }

// packetReader is what gopacket's classic pcap reader offers.
type packetReader interface {
	ZeroCopyReadPacketData() ([]byte, gopacket.CaptureInfo, error)
}

// Magic numbers as the first four bytes read little-endian.
const (
	magicMicro       = 0xa1b2c3d4
	magicMicroSwap   = 0xd4c3b2a1
	magicNano        = 0xa1b23c4d
	magicNanoSwap    = 0x4d3cb2a1
	magicSectionHead = 0x0a0d0d0a
)

// ReaderStats counts what a Reader has read.
type ReaderStats struct {
	Frames    int64 // records returned
	Bytes     int64 // captured bytes returned (after any slot truncation)
	Truncated int64 // records cut short by the capture or by the batch slot
}

// Reader reads a pcap or pcapng file as a frame.Source. It is not safe for
// concurrent use. Errors are sticky: after a RecordError every later call
// returns the same error, because the position in the file is lost.
//
// Every frame carries the link type of its file (classic pcap) or of its
// interface (pcapng) in Frame.LinkType; a pcapng file may mix interfaces
// of different supported link types. Supported are Ethernet, Linux cooked
// captures (SLL, SLL2) and raw IP (RAW, IPV4). NewReader refuses a classic
// file of any other link type with a *LinkTypeError, since none of its
// records could be decoded. In a pcapng file an interface of another link
// type is accepted until a packet record of it is read: ReadFrames then
// returns the frames before it and a *RecordError wrapping a
// *LinkTypeError. Interfaces that record no packet (a capture started on
// several devices of which some stayed silent) cost nothing.
//
// A pcapng section holds at most MaxInterfaces interfaces, each block is at
// most MaxBlockLen bytes and each record at most MaxRecordLen; past a bound
// ReadFrames returns a RecordError wrapping ErrTooManyInterfaces,
// ErrBlockTooLarge or ErrRecordTooLarge. Of a pcapng file's metadata the
// Reader keeps only each interface's link type, snap length and timestamp
// resolution and offset; options, name resolution, statistics and other
// blocks are skipped.
type Reader struct {
	pr       packetReader // classic pcap
	ng       *ngReader    // pcapng
	file     io.Closer    // closed by Close when Open opened it
	format   Format
	bigEnd   bool
	linkType layers.LinkType
	link     uint16 // Frame.LinkType of a classic file's frames
	err      error
	stats    ReaderStats
}

var _ frame.Source = (*Reader)(nil)

// Open opens a capture file by name. The Reader closes the file on Close.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pcap: %w", err)
	}
	r, err := NewReader(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.file = f
	return r, nil
}

// NewReader reads the file header from r and detects the format by its
// magic number: classic pcap (four variants), pcapng, or either compressed
// with gzip. Close does not close r.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, err := br.Peek(4)
	if len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, zerr := gzip.NewReader(br)
		if zerr != nil {
			return nil, &HeaderError{Err: zerr}
		}
		br = bufio.NewReaderSize(zr, 64<<10)
		magic, err = br.Peek(4)
	}
	if err != nil {
		if err == io.EOF && len(magic) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, &HeaderError{Err: err}
	}
	rd := &Reader{}
	switch m := binary.LittleEndian.Uint32(magic); m {
	case magicMicro, magicMicroSwap, magicNano, magicNanoSwap:
		pr, err := pcapgo.NewReader(br)
		if err != nil {
			return nil, &HeaderError{Err: eofIsUnexpected(err)}
		}
		// Above MaxRecordLen gopacket trusts the file's snap length; cap it
		// so a corrupt record length is an error, not a huge read.
		if pr.Snaplen() > MaxRecordLen {
			pr.SetSnaplen(MaxRecordLen)
		}
		rd.pr, rd.linkType, rd.link = pr, pr.LinkType(), uint16(pr.LinkType())
		if !supportedLinkType(rd.link) {
			return nil, &LinkTypeError{LinkType: rd.link, Interface: -1}
		}
		rd.format = FormatPcap
		if m == magicNano || m == magicNanoSwap {
			rd.format = FormatPcapNano
		}
		rd.bigEnd = m == magicMicroSwap || m == magicNanoSwap
	case magicSectionHead:
		ng := &ngReader{br: br}
		if err := ng.start(); err != nil {
			return nil, &HeaderError{Err: err}
		}
		rd.ng, rd.linkType = ng, ng.linkType
		rd.format = FormatPcapNG
	default:
		return nil, &HeaderError{Err: fmt.Errorf("%w (magic %08x)", ErrUnknownFormat, m)}
	}
	return rd, nil
}

func eofIsUnexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Format returns the file's container format.
func (r *Reader) Format() Format { return r.format }

// BigEndian reports whether a classic pcap file was written big-endian.
func (r *Reader) BigEndian() bool { return r.bigEnd }

// LinkType returns the link type of the file (of its first interface for
// pcapng, whose other interfaces may have other link types: each frame
// carries its own in Frame.LinkType). layers.LinkTypeEthernet is 1.
func (r *Reader) LinkType() layers.LinkType { return r.linkType }

// Stats returns the counters so far.
func (r *Reader) Stats() ReaderStats { return r.stats }

// ReadFrames implements frame.Source. It copies up to len(frames) records
// into the frames' Buf, setting N, WireLen, LinkType and Time (nanoseconds
// since the Unix epoch, 0 for pcapng simple packet blocks that carry none).
// A record of a pcapng interface whose link type is not supported ends the
// read with a *RecordError wrapping a *LinkTypeError. A record
// longer than its slot is cut to len(Buf) and counted as truncated. At the
// end of the file it returns the frames read so far with io.EOF; on a bad
// record it returns the frames before it with a *RecordError. It does not
// allocate in steady state.
func (r *Reader) ReadFrames(frames []frame.Frame) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	for i := range frames {
		f := &frames[i]
		if r.ng != nil {
			if err := r.ng.readFrame(f); err != nil {
				if err != io.EOF {
					err = &RecordError{Record: r.stats.Frames + 1, Err: err}
				}
				r.err = err
				return i, err
			}
		} else {
			data, ci, err := r.pr.ZeroCopyReadPacketData()
			if err != nil {
				r.err = r.recordError(err, ci)
				return i, r.err
			}
			f.N = copy(f.Buf, data)
			f.WireLen = max(ci.Length, len(data))
			f.LinkType = r.link
			f.ChecksumVerified = false
			f.Time = 0
			if !ci.Timestamp.IsZero() {
				f.Time = ci.Timestamp.UnixNano()
			}
		}
		r.stats.Frames++
		r.stats.Bytes += int64(f.N)
		if f.WireLen > f.N {
			r.stats.Truncated++
		}
	}
	return len(frames), nil
}

// recordError turns the error gopacket returned for the next classic
// record into io.EOF at a clean end of file, or a RecordError.
func (r *Reader) recordError(err error, ci gopacket.CaptureInfo) error {
	// A classic record whose header was read but whose data is missing
	// entirely comes back as io.EOF with the header's lengths filled in.
	if err == io.EOF && ci.CaptureLength == 0 && ci.Timestamp.IsZero() {
		return io.EOF
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return &RecordError{Record: r.stats.Frames + 1, Err: err}
}

// Close releases the file opened by Open. Later ReadFrames calls return
// ErrClosed.
func (r *Reader) Close() error {
	r.err = ErrClosed
	if r.file != nil {
		f := r.file
		r.file = nil
		return f.Close()
	}
	return nil
}
