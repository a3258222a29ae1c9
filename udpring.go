package tickwire

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"sync/atomic"
)

// udpRing is a socket's bounded queue of received datagrams, read by Read
// and ReadFrom (and by a handler that was busy on another goroutine when
// they arrived). The datagrams are packed one after another in a byte
// buffer, each behind a udpRecordHeader-byte header, so that a small
// datagram takes little room: the ring is bounded in bytes (maxBytes,
// Config.UDPReceiveBuffer, counting each datagram as udpRecordSize) and in
// datagrams (maxN, Config.UDPReceiveQueue). As the kernel does with
// SO_RCVBUF, a datagram is taken while the bytes queued are below the
// bound, so the last one taken may overshoot it.
//
// The buffer is allocated when a datagram first waits (udpRingMin bytes),
// doubles when a datagram does not fit, up to limit, and is kept until the
// socket closes: a socket whose datagrams go straight to its handler, or
// that receives nothing, costs no buffer. limit leaves room for two of the
// largest records beyond maxBytes, so that a datagram taken under the bound
// always fits, whatever wrapping wastes (the end of the buffer skipped when
// a record did not fit there, less than one record). Safe for concurrent
// use.
type udpRing struct {
	mu sync.Mutex
	// buf holds the records in order: [head, tail), or, once a record
	// has wrapped to the start, [head, end) then [0, tail).
	// +checklocks:mu
	buf []byte
	// +checklocks:mu
	head int
	// +checklocks:mu
	tail int
	// +checklocks:mu
	end int
	// +checklocks:mu
	wrapped bool
	// +checklocks:mu
	n int // datagrams queued
	// +checklocks:mu
	bytes int // udpRecordSize of the datagrams queued

	maxN       int // datagrams
	maxBytes   int
	maxPayload int // the largest datagram taken
	// waiting is n, for queued's lock-free look.
	waiting atomic.Int32
}

// A record: the payload's length (4 bytes), the sender's IPv4 address (4)
// and port (2), 2 bytes unused, the multicast group (4), the receive time
// (8) and the IPv4 identification and flags (8), then the payload, padded
// to 8 bytes. Native byte order: the ring never leaves the process.
const (
	udpRecordHeader = 32
	udpRingMin      = 4096 // the first buffer's size
)

// udpRecordSize is the room a datagram of n bytes takes in the ring.
func udpRecordSize(n int) int { return udpRecordHeader + (n+7)&^7 }

// init sets the ring's bounds: maxN datagrams, maxBytes bytes, datagrams of
// at most maxPayload bytes.
func (r *udpRing) init(maxN, maxBytes, maxPayload int) {
	r.maxN, r.maxBytes, r.maxPayload = maxN, maxBytes, maxPayload
}

// limit is the largest the buffer grows.
func (r *udpRing) limit() int {
	return (r.maxBytes+7)&^7 + 2*udpRecordSize(r.maxPayload)
}

// queued reports whether a datagram may be waiting, without a lock.
func (r *udpRing) queued() bool { return r.waiting.Load() > 0 }

// push copies payload, received from from at rx (sent to group, 0 for
// unicast), into the ring, reporting false when the ring is full, payload
// is larger than maxPayload or from is not an IPv4 address (direct
// delivery is IPv4's).
func (r *udpRing) push(payload []byte, from netip.AddrPort, rx int64, group uint32, ip uint64) bool {
	if len(payload) > r.maxPayload || !from.Addr().Is4() {
		return false
	}
	size := udpRecordSize(len(payload))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n >= r.maxN || r.bytes >= r.maxBytes {
		return false
	}
	at, ok := r.reserveLocked(size)
	if !ok {
		return false
	}
	rec := r.buf[at : at+size]
	binary.NativeEndian.PutUint32(rec[0:], uint32(len(payload)))
	a := from.Addr().As4()
	copy(rec[4:8], a[:])
	binary.NativeEndian.PutUint16(rec[8:], from.Port())
	binary.NativeEndian.PutUint32(rec[12:], group)
	binary.NativeEndian.PutUint64(rec[16:], uint64(rx))
	binary.NativeEndian.PutUint64(rec[24:], ip)
	copy(rec[udpRecordHeader:], payload)
	r.n++
	r.bytes += size
	r.waiting.Store(int32(r.n))
	return true
}

// reserveLocked returns the offset of size free bytes after the newest
// record, growing the buffer when they are not there; ok is false when the
// buffer is at its limit and has no such room.
//
// +checklocks:r.mu
func (r *udpRing) reserveLocked(size int) (at int, ok bool) {
	for {
		switch {
		case !r.wrapped && len(r.buf)-r.tail >= size:
			at = r.tail
		case !r.wrapped && r.head >= size:
			r.end, r.wrapped = r.tail, true
			at = 0
		case r.wrapped && r.head-r.tail >= size:
			at = r.tail
		default:
			if !r.growLocked(size) {
				return 0, false
			}
			continue
		}
		r.tail = at + size
		return at, true
	}
}

// growLocked replaces the buffer with one at least twice as large (and with
// room for size more bytes), up to limit, holding the records from offset
// 0 unwrapped. It reports false when the buffer is at its limit.
//
// +checklocks:r.mu
func (r *udpRing) growLocked(size int) bool {
	limit := r.limit()
	if len(r.buf) >= limit {
		return false
	}
	c := max(2*len(r.buf), udpRingMin)
	for c < r.bytes+size {
		c *= 2
	}
	nb := make([]byte, min(c, limit))
	k := 0
	if r.wrapped {
		k = copy(nb, r.buf[r.head:r.end])
		k += copy(nb[k:], r.buf[:r.tail])
	} else {
		k = copy(nb, r.buf[r.head:r.tail])
	}
	r.buf, r.head, r.tail, r.end, r.wrapped = nb, 0, k, 0, false
	return true
}

// pop copies the oldest datagram into b, truncating it to len(b), and
// frees its room; ok is false when the ring is empty.
func (r *udpRing) pop(b []byte) (n int, from netip.AddrPort, rx int64, group uint32, ip uint64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return 0, netip.AddrPort{}, 0, 0, 0, false
	}
	if r.wrapped && r.head == r.end {
		r.head, r.end, r.wrapped = 0, 0, false
	}
	rec := r.buf[r.head:]
	length := int(binary.NativeEndian.Uint32(rec))
	n = copy(b, rec[udpRecordHeader:udpRecordHeader+length])
	from = netip.AddrPortFrom(netip.AddrFrom4([4]byte(rec[4:8])), binary.NativeEndian.Uint16(rec[8:]))
	group = binary.NativeEndian.Uint32(rec[12:])
	rx = int64(binary.NativeEndian.Uint64(rec[16:]))
	ip = binary.NativeEndian.Uint64(rec[24:])
	size := udpRecordSize(length)
	r.head += size
	r.n--
	r.bytes -= size
	if r.n == 0 {
		r.head, r.tail, r.end, r.wrapped = 0, 0, 0, false
	}
	r.waiting.Store(int32(r.n))
	return n, from, rx, group, ip, true
}
