// Package guardmem gives tests of assembly kernels buffers that sit flush
// against inaccessible pages: a load past the buffer's end, or before its
// start, faults and crashes the test, where on the Go heap it would read a
// neighbour's bytes unnoticed (and fault only for the rare buffer that ends
// at a page boundary, in production).
package guardmem

import "testing"

// MaxLen is the size of buffer to take once and slice, one page on every
// system Go runs on.
const MaxLen = 4096

// Bytes returns n zero bytes followed by an inaccessible page (atEnd) or
// preceded by one. The memory is unmapped when the test ends. On systems
// without mmap it skips the test. With atEnd, the end of the buffer is
// page-aligned, so a slice of a type whose size is a multiple of its
// alignment ending there is aligned.
//
// Each call maps memory of its own, and a process may only hold so many
// mappings (vm.max_map_count): a test that needs many buffers takes one of
// MaxLen bytes and cuts them from it with Flush.
func Bytes(tb testing.TB, n int, atEnd bool) []byte {
	tb.Helper()
	return guarded(tb, n, atEnd)
}

// Flush returns the n bytes of b (from Bytes with the same atEnd) that
// touch its guard page: b's last n bytes with atEnd, else its first n,
// capacity n.
func Flush(b []byte, n int, atEnd bool) []byte {
	if atEnd {
		return b[len(b)-n:]
	}
	return b[:n:n]
}
