//go:build linux && (amd64 || arm64)

package afxdp

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Everything in this package that needs unsafe: the ring words in memory
// shared with the kernel, and the socket options that take pointers.

// ringWords points a ring at its producer, consumer and flags words inside
// mem, a ring mapped from the socket; off are the offsets XDP_MMAP_OFFSETS
// gave. The words are 4-byte aligned by the kernel's layout; the mapping
// outlives the pointers (unmapped only after the reader and writer stopped).
func (r *ring) setWords(mem []byte, off unix.XDPRingOffset, n uint32) {
	r.mem = mem
	r.producer = (*atomic.Uint32)(unsafe.Pointer(&mem[off.Producer]))
	r.consumer = (*atomic.Uint32)(unsafe.Pointer(&mem[off.Consumer]))
	r.flags = (*atomic.Uint32)(unsafe.Pointer(&mem[off.Flags]))
	r.mask = n - 1
	r.size = n
}

// addrSlots returns the fill or completion ring's n frame addresses.
func addrSlots(mem []byte, off unix.XDPRingOffset, n uint32) []uint64 {
	return unsafe.Slice((*uint64)(unsafe.Pointer(&mem[off.Desc])), n)
}

// descSlots returns the RX or TX ring's n descriptors.
func descSlots(mem []byte, off unix.XDPRingOffset, n uint32) []unix.XDPDesc {
	return unsafe.Slice((*unix.XDPDesc)(unsafe.Pointer(&mem[off.Desc])), n)
}

// ringBytes is the length to map for a ring of n entries of the given kind
// whose descriptors start at off.Desc.
func ringBytes(off unix.XDPRingOffset, n uint32, desc bool) int {
	if desc {
		return int(off.Desc) + int(n)*int(unsafe.Sizeof(unix.XDPDesc{}))
	}
	return int(off.Desc) + int(n)*8
}

// registerUMEM registers umem, split into frames of frameSize bytes, with
// the socket (XDP_UMEM_REG).
func registerUMEM(fd int, umem []byte, frameSize uint32) error {
	reg := unix.XDPUmemReg{
		Addr: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(umem)))),
		Len:  uint64(len(umem)),
		Size: frameSize,
	}
	_, _, errno := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_UMEM_REG,
		uintptr(unsafe.Pointer(&reg)), unsafe.Sizeof(reg), 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// mmapOffsets reads XDP_MMAP_OFFSETS.
func mmapOffsets(fd int) (unix.XDPMmapOffsets, error) {
	var off unix.XDPMmapOffsets
	size := uint32(unsafe.Sizeof(off))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_MMAP_OFFSETS,
		uintptr(unsafe.Pointer(&off)), uintptr(unsafe.Pointer(&size)), 0)
	if errno != 0 {
		return off, errno
	}
	if size != uint32(unsafe.Sizeof(off)) {
		return off, unix.EINVAL // a kernel older than 5.4's flags words
	}
	return off, nil
}

// statistics reads XDP_STATISTICS.
func statistics(fd int) (unix.XDPStatistics, error) {
	var st unix.XDPStatistics
	size := uint32(unsafe.Sizeof(st))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_STATISTICS,
		uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&size)), 0)
	if errno != 0 {
		return st, errno
	}
	return st, nil
}

// kick tells the kernel to look at the TX ring (sendto with no data); it
// makes no runtime system-call bookkeeping because it never blocks.
func kick(fd int) unix.Errno {
	_, _, errno := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return errno
}

// wakeFill tells the kernel to look at the fill ring (recvfrom with no
// buffer), when it asked for that (need_wakeup).
func wakeFill(fd int) unix.Errno {
	_, _, errno := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return errno
}
