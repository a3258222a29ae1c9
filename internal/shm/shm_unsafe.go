package shm

import (
	"sync/atomic"
	"unsafe"
)

// word32 returns the 32-bit word at off; see the package doc for the rules.
func (r *Region) word32(off int) *uint32 {
	if off < 0 || off&3 != 0 || off > len(r.mem)-4 {
		panic("shm: 32-bit word offset out of range or not a multiple of 4")
	}
	// No &r.mem[off]: the race detector would see a plain read of a word
	// the other side writes atomically.
	return (*uint32)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(r.mem)), off))
}

// word64 returns the 64-bit word at off.
func (r *Region) word64(off int) *uint64 {
	if off < 0 || off&7 != 0 || off > len(r.mem)-8 {
		panic("shm: 64-bit word offset out of range or not a multiple of 8")
	}
	return (*uint64)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(r.mem)), off))
}

// Load32 atomically loads the 32-bit word at byte offset off.
func (r *Region) Load32(off int) uint32 { return atomic.LoadUint32(r.word32(off)) }

// Store32 atomically stores v into the 32-bit word at off.
func (r *Region) Store32(off int, v uint32) { atomic.StoreUint32(r.word32(off), v) }

// CompareAndSwap32 atomically replaces the 32-bit word at off by v if it
// holds old, and reports whether it did.
func (r *Region) CompareAndSwap32(off int, old, v uint32) bool {
	return atomic.CompareAndSwapUint32(r.word32(off), old, v)
}

// Add32 atomically adds d to the 32-bit word at off and returns the new value.
func (r *Region) Add32(off int, d uint32) uint32 { return atomic.AddUint32(r.word32(off), d) }

// Load64 atomically loads the 64-bit word at byte offset off.
func (r *Region) Load64(off int) uint64 { return atomic.LoadUint64(r.word64(off)) }

// Store64 atomically stores v into the 64-bit word at off.
func (r *Region) Store64(off int, v uint64) { atomic.StoreUint64(r.word64(off), v) }

// CompareAndSwap64 atomically replaces the 64-bit word at off by v if it
// holds old, and reports whether it did.
func (r *Region) CompareAndSwap64(off int, old, v uint64) bool {
	return atomic.CompareAndSwapUint64(r.word64(off), old, v)
}

// Add64 atomically adds d to the 64-bit word at off and returns the new value.
func (r *Region) Add64(off int, d uint64) uint64 { return atomic.AddUint64(r.word64(off), d) }

// alignedBytes returns n zero bytes starting on an 8-byte boundary.
func alignedBytes(n int) []byte {
	w := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), n)
}
