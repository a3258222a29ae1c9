//go:build unix

package guardmem

import (
	"testing"

	"golang.org/x/sys/unix"
)

func guarded(tb testing.TB, n int, atEnd bool) []byte {
	page := unix.Getpagesize()
	if n < 0 || n > MaxLen || n > page {
		tb.Fatalf("guardmem: %d bytes: at most %d", n, min(MaxLen, page))
	}
	mem, err := unix.Mmap(-1, 0, 3*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		tb.Skipf("guardmem: mmap: %v", err)
	}
	tb.Cleanup(func() { unix.Munmap(mem) })
	// Pages: guard, data, guard.
	if err := unix.Mprotect(mem[:page], unix.PROT_NONE); err != nil {
		tb.Fatalf("guardmem: mprotect: %v", err)
	}
	if err := unix.Mprotect(mem[2*page:], unix.PROT_NONE); err != nil {
		tb.Fatalf("guardmem: mprotect: %v", err)
	}
	if atEnd {
		return mem[2*page-n : 2*page : 2*page]
	}
	return mem[page : page+n : page+n]
}
