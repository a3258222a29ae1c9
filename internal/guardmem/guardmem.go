// Package guardmem gives tests of assembly kernels buffers that sit flush
// against inaccessible pages: a load past the buffer's end, or before its
// start, faults and crashes the test, where on the Go heap it would read a
// neighbour's bytes unnoticed (and fault only for the rare buffer that ends
// at a page boundary, in production).
package guardmem

import "testing"

// Bytes returns n zero bytes (at most a page) followed by an inaccessible
// page (atEnd) or preceded by one. The memory is unmapped when the test
// ends. On systems without mmap it skips the test.
func Bytes(tb testing.TB, n int, atEnd bool) []byte {
	tb.Helper()
	return guarded(tb, n, atEnd)
}
