package rdma

import "errors"

// Access says what a memory region allows.
type Access uint8

// Access flags. A region is always readable locally (the source of a
// WRITE or SEND); AccessLocalWrite lets READ responses and received SENDs
// land in it.
const (
	AccessLocalWrite Access = 1 << iota
	AccessRemoteWrite
	AccessRemoteRead
)

// MaxMRs bounds the memory regions registered on a Device at a time.
const MaxMRs = 1024

// mrAddrBase is the virtual address of the first region; regions follow
// each other 4 KiB-aligned, with a 4 KiB hole between two, below 2^53 (so
// that a JSON number carries the address exactly).
const mrAddrBase = 0x10000000

// MR is a memory region: the caller's buffer, registered with the Device,
// that WRITE, READ and SEND move bytes in and out of. The remote side
// names it by its rkey and virtual address (Addr); the local side by the
// *MR (LKey is reported for the record). Safe for concurrent use; the
// buffer's bytes are written by the stack while the region is registered
// (RDMA semantics: reading them while a remote peer writes is the
// program's race to avoid, as on a NIC).
type MR struct {
	buf    []byte
	addr   uint64
	key    uint32
	access Access
}

// Errors of memory registration and work requests.
var (
	ErrTooManyMRs = errors.New("rdma: too many memory regions")
	ErrMRTooLarge = errors.New("rdma: memory region too large")
)

// Bytes returns the region's memory: the slice passed to RegisterMR.
func (m *MR) Bytes() []byte { return m.buf }

// Addr returns the region's virtual address: the address of Bytes()[0] in
// the peer's RETHs.
func (m *MR) Addr() uint64 { return m.addr }

// Len returns the region's length in bytes.
func (m *MR) Len() int { return len(m.buf) }

// LKey returns the local key (equal to the rkey here).
func (m *MR) LKey() uint32 { return m.key }

// RKey returns the remote key the peer puts in its RETHs.
func (m *MR) RKey() uint32 { return m.key }

// Access returns the region's access flags.
func (m *MR) Access() Access { return m.access }

// span returns the region's bytes [va, va+n) when they lie inside it, the
// region allows want, and ok.
func (m *MR) span(va uint64, n uint32, want Access) ([]byte, bool) {
	if m == nil || m.access&want != want || va < m.addr {
		return nil, false
	}
	off := va - m.addr
	if off > uint64(len(m.buf)) || uint64(n) > uint64(len(m.buf))-off {
		return nil, false
	}
	return m.buf[off : off+uint64(n)], true
}
