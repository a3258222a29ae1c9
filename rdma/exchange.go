package rdma

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ConnInfo is what one end tells the other to connect a queue pair, as
// perftest's tools exchange over TCP before they run: its QPN and first
// send PSN, and a memory region the peer may access (rkey, virtual
// address, length), and its path MTU.
type ConnInfo struct {
	QPN  uint32 // 24 bits
	PSN  uint32 // 24 bits: the first PSN it sends
	RKey uint32
	Addr uint64
	Len  uint64
	MTU  int // 256, 512, 1024, 2048 or 4096
}

// ConnInfoSize is the length of ConnInfo's wire form:
//
//	offset  size  field
//	     0     4  magic "RCv2"
//	     4     4  QPN   (big-endian; the top 8 bits zero)
//	     8     4  PSN   (big-endian; the top 8 bits zero)
//	    12     4  rkey  (big-endian)
//	    16     8  addr  (big-endian)
//	    24     8  len   (big-endian)
//	    32     4  MTU   (big-endian: 256, 512, 1024, 2048 or 4096)
const ConnInfoSize = 36

var connInfoMagic = [4]byte{'R', 'C', 'v', '2'}

// ErrConnInfo is the error of a ConnInfo that is not well formed.
var ErrConnInfo = errors.New("rdma: malformed connection info")

// AppendBinary appends c's wire form (ConnInfoSize bytes) to b.
func (c ConnInfo) AppendBinary(b []byte) ([]byte, error) {
	if err := c.check(); err != nil {
		return b, err
	}
	b = append(b, connInfoMagic[:]...)
	b = binary.BigEndian.AppendUint32(b, c.QPN)
	b = binary.BigEndian.AppendUint32(b, c.PSN)
	b = binary.BigEndian.AppendUint32(b, c.RKey)
	b = binary.BigEndian.AppendUint64(b, c.Addr)
	b = binary.BigEndian.AppendUint64(b, c.Len)
	return binary.BigEndian.AppendUint32(b, uint32(c.MTU)), nil
}

// MarshalBinary returns c's wire form.
func (c ConnInfo) MarshalBinary() ([]byte, error) {
	return c.AppendBinary(make([]byte, 0, ConnInfoSize))
}

// UnmarshalBinary sets c from its wire form, failing with an error that
// wraps ErrConnInfo when b is not ConnInfoSize bytes of it.
func (c *ConnInfo) UnmarshalBinary(b []byte) error {
	if len(b) != ConnInfoSize {
		return fmt.Errorf("%w: %d bytes, want %d", ErrConnInfo, len(b), ConnInfoSize)
	}
	if [4]byte(b[:4]) != connInfoMagic {
		return fmt.Errorf("%w: magic %q", ErrConnInfo, b[:4])
	}
	n := ConnInfo{
		QPN:  binary.BigEndian.Uint32(b[4:]),
		PSN:  binary.BigEndian.Uint32(b[8:]),
		RKey: binary.BigEndian.Uint32(b[12:]),
		Addr: binary.BigEndian.Uint64(b[16:]),
		Len:  binary.BigEndian.Uint64(b[24:]),
		MTU:  int(binary.BigEndian.Uint32(b[32:])),
	}
	if err := n.check(); err != nil {
		return err
	}
	*c = n
	return nil
}

func (c ConnInfo) check() error {
	switch {
	case c.QPN > PSNMask:
		return fmt.Errorf("%w: QPN %#x wider than 24 bits", ErrConnInfo, c.QPN)
	case c.PSN > PSNMask:
		return fmt.Errorf("%w: PSN %#x wider than 24 bits", ErrConnInfo, c.PSN)
	case c.MTU < 256 || c.MTU > 4096 || c.MTU&(c.MTU-1) != 0:
		return fmt.Errorf("%w: MTU %d", ErrConnInfo, c.MTU)
	}
	return nil
}

// Exchange writes local to rw and reads the peer's ConnInfo from it: both
// ends call it on the two ends of a TCP connection (a tickwire TCPConn, or
// any net.Conn), as perftest does before a test.
func Exchange(rw io.ReadWriter, local ConnInfo) (ConnInfo, error) {
	var b [ConnInfoSize]byte
	out, err := local.AppendBinary(b[:0])
	if err != nil {
		return ConnInfo{}, err
	}
	if _, err := rw.Write(out); err != nil {
		return ConnInfo{}, fmt.Errorf("rdma: sending connection info: %w", err)
	}
	if _, err := io.ReadFull(rw, b[:]); err != nil {
		return ConnInfo{}, fmt.Errorf("rdma: reading connection info: %w", err)
	}
	var peer ConnInfo
	err = peer.UnmarshalBinary(b[:])
	return peer, err
}
