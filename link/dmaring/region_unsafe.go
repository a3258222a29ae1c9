package dmaring

import "unsafe"

// word returns the address of the 32-bit word at off, for futex(2); the
// atomics are shm's. off must be a multiple of 4 inside the region:
// callers compute it from the layout, so a bad offset is a programmer
// error and panics.
func (r *Region) word(off int) *uint32 {
	if off&3 != 0 || off < 0 || off+4 > len(r.mem) {
		panic("dmaring: word offset out of range or unaligned")
	}
	// No r.mem[off] read here: the race detector would see a plain read of
	// a word the other side writes atomically.
	return (*uint32)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(r.mem)), off))
}

// isBigEndian reports the host byte order.
func isBigEndian() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 0
}
