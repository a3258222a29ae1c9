//go:build unix

package guardmem

import (
	"testing"

	"golang.org/x/sys/unix"
)

func guarded(tb testing.TB, n int, atEnd bool) []byte {
	if n < 0 {
		tb.Fatalf("guardmem: %d bytes", n)
	}
	page := unix.Getpagesize()
	size := (n + page - 1) / page * page
	mem, err := unix.Mmap(-1, 0, size+2*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		tb.Skipf("guardmem: mmap: %v", err)
	}
	tb.Cleanup(func() { unix.Munmap(mem) })
	// Pages: guard, data (size bytes), guard.
	if err := unix.Mprotect(mem[:page], unix.PROT_NONE); err != nil {
		tb.Fatalf("guardmem: mprotect: %v", err)
	}
	if err := unix.Mprotect(mem[page+size:], unix.PROT_NONE); err != nil {
		tb.Fatalf("guardmem: mprotect: %v", err)
	}
	if atEnd {
		return mem[page+size-n : page+size : page+size]
	}
	return mem[page : page+n : page+n]
}
