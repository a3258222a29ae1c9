package pcap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/gopacket/gopacket/layers"
)

// DefaultSnapLen is the snap length Writer declares when given 0: frames up
// to 64 KiB plus an Ethernet header are written whole.
const DefaultSnapLen = 65536 + 14

// ErrWriterClosed is returned by a Writer after Close.
var ErrWriterClosed = errors.New("pcap: writer closed")

// Writer writes a classic pcap file: little-endian, nanosecond timestamps.
// It buffers; call Flush or Close. It is not safe for concurrent use. The
// first write error is sticky and returned by every later call.
type Writer struct {
	bw      *bufio.Writer
	closer  io.Closer
	snapLen int
	hdr     [16]byte
	err     error
}

// NewWriter writes the file header to w and returns a Writer for records
// of the given link type. Frames longer than snapLen bytes (0 means
// DefaultSnapLen) are cut to it, keeping their wire length in the record.
// If w is an io.Closer, Close closes it.
func NewWriter(w io.Writer, linkType layers.LinkType, snapLen int) (*Writer, error) {
	if snapLen <= 0 {
		snapLen = DefaultSnapLen
	}
	if snapLen > MaxRecordLen {
		return nil, fmt.Errorf("pcap: snap length %d above %d", snapLen, MaxRecordLen)
	}
	pw := &Writer{bw: bufio.NewWriterSize(w, 64<<10), snapLen: snapLen}
	if c, ok := w.(io.Closer); ok {
		pw.closer = c
	}
	var h [24]byte
	binary.LittleEndian.PutUint32(h[0:], magicNano)
	binary.LittleEndian.PutUint16(h[4:], 2) // version 2.4
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[16:], uint32(snapLen))
	binary.LittleEndian.PutUint32(h[20:], uint32(linkType))
	if _, err := pw.bw.Write(h[:]); err != nil {
		return nil, fmt.Errorf("pcap: write file header: %w", err)
	}
	return pw, nil
}

// SnapLen returns the longest record the Writer writes whole.
func (w *Writer) SnapLen() int { return w.snapLen }

// WriteFrame appends one record. ts is the capture time in nanoseconds
// since the Unix epoch; wireLen is the frame's length on the wire (0 means
// len(data)). WriteFrame does NOT take ownership of data and does not
// allocate.
func (w *Writer) WriteFrame(ts int64, data []byte, wireLen int) error {
	if w.err != nil {
		return w.err
	}
	if len(data) > w.snapLen {
		data = data[:w.snapLen]
	}
	wireLen = max(wireLen, len(data))
	if ts < 0 {
		ts = 0
	}
	binary.LittleEndian.PutUint32(w.hdr[0:], uint32(ts/1e9))
	binary.LittleEndian.PutUint32(w.hdr[4:], uint32(ts%1e9))
	binary.LittleEndian.PutUint32(w.hdr[8:], uint32(len(data)))
	binary.LittleEndian.PutUint32(w.hdr[12:], uint32(wireLen))
	if _, err := w.bw.Write(w.hdr[:]); err != nil {
		return w.fail(err)
	}
	if _, err := w.bw.Write(data); err != nil {
		return w.fail(err)
	}
	return nil
}

func (w *Writer) fail(err error) error {
	w.err = fmt.Errorf("pcap: write: %w", err)
	return w.err
}

// Flush writes buffered records to the underlying writer.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if err := w.bw.Flush(); err != nil {
		return w.fail(err)
	}
	return nil
}

// Close flushes and closes the underlying writer when it is an io.Closer.
// It returns the first error of the Writer's life.
func (w *Writer) Close() error {
	if errors.Is(w.err, ErrWriterClosed) {
		return w.err
	}
	err := w.Flush()
	if w.closer != nil {
		if cerr := w.closer.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("pcap: close: %w", cerr)
		}
	}
	w.err = ErrWriterClosed
	return err
}
