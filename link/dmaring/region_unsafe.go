package dmaring

import (
	"sync/atomic"
	"unsafe"
)

// word returns the 32-bit word at off. off must be a multiple of 4 inside
// the region: callers compute it from the layout, never from the wire
// unchecked, so a bad offset is a programmer error and panics.
func (r *Region) word(off int) *uint32 {
	if off&3 != 0 || off < 0 || off+4 > len(r.mem) {
		panic("dmaring: word offset out of range or unaligned")
	}
	// No r.mem[off] read here: the race detector would see a plain read of
	// a word the other side writes atomically.
	return (*uint32)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(r.mem)), off))
}

// Load32 atomically loads the word at byte offset off.
func (r *Region) Load32(off int) uint32 { return atomic.LoadUint32(r.word(off)) }

// Store32 atomically stores v into the word at off.
func (r *Region) Store32(off int, v uint32) { atomic.StoreUint32(r.word(off), v) }

// CompareAndSwap32 is atomic.CompareAndSwapUint32 on the word at off.
func (r *Region) CompareAndSwap32(off int, old, v uint32) bool {
	return atomic.CompareAndSwapUint32(r.word(off), old, v)
}

// Add32 atomically adds d to the word at off and returns the new value.
func (r *Region) Add32(off int, d uint32) uint32 { return atomic.AddUint32(r.word(off), d) }

// alignedBytes returns n zero bytes that start on an 8-byte boundary.
func alignedBytes(n int) []byte {
	w := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), n)
}

// isBigEndian reports the host byte order.
func isBigEndian() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 0
}
