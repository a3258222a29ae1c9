//go:build linux

package dmaring

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

const futexSupported = true

// Linux futex operations, without FUTEX_PRIVATE_FLAG: the word is in a
// shared mapping and the other side may be another process.
const (
	futexOpWait = 0 // FUTEX_WAIT
	futexOpWake = 1 // FUTEX_WAKE
)

// futexWait blocks the calling thread while the word at off holds v, until
// a futexWake on it (from any process mapping the region) or a signal.
func futexWait(r *Region, off int, v uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(r.word(off))), futexOpWait, uintptr(v), 0, 0, 0)
}

// futexWake wakes every thread waiting on the word at off.
func futexWake(r *Region, off int) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(r.word(off))), futexOpWake, uintptr(^uint32(0)>>1), 0, 0, 0)
}
