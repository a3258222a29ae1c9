package stopbit_test

import (
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/unix"
)

// guarded returns a buffer of n bytes that ends where an inaccessible page
// begins (atEnd) or begins where one ends: any read past b's end, or before
// its start, faults instead of reading a neighbour's heap bytes, which
// would go unnoticed.
func guarded(t *testing.T, n int, atEnd bool) []byte {
	t.Helper()
	page := unix.Getpagesize()
	if n > page {
		t.Fatalf("guarded buffer of %d bytes: at most a page", n)
	}
	mem, err := unix.Mmap(-1, 0, 3*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Skipf("mmap: %v", err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	// Pages: guard, data, guard.
	if err := unix.Mprotect(mem[:page], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mprotect(mem[2*page:], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	if atEnd {
		return mem[2*page-n : 2*page : 2*page]
	}
	return mem[page : page+n : page+n]
}

// TestScanStaysInBuffer runs Scan (the kernel, where the CPU has it, and the
// portable loop) on buffers flush against inaccessible pages, both ends,
// every length up to 300 bytes and a few start offsets: a load outside the
// buffer crashes the test.
func TestScanStaysInBuffer(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, atEnd := range []bool{true, false} {
		for n := 1; n <= 300; n++ {
			b := guarded(t, n, atEnd)
			copy(b, randomStream(r, n))
			for _, off := range []int{0, 1, n / 2, n - 1} {
				check(t, b, off)
			}
			// All stop bits, and none (one long token).
			for i := range b {
				b[i] = 0x80 | byte(i)
			}
			check(t, b, 0)
			for i := range b {
				b[i] = byte(i) & 0x7f
			}
			check(t, b, 0)
		}
	}
}
