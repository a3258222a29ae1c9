// Package guardmem gives tests of assembly kernels buffers that sit flush
// against inaccessible pages: a load past the buffer's end, or before its
// start, faults and crashes the test, where on the Go heap it would read a
// neighbour's bytes unnoticed (and fault only for the rare buffer that ends
// at a page boundary, in production).
package guardmem

import "testing"

// MaxLen is the longest buffer Bytes returns, a page on every system Go
// runs on.
const MaxLen = 4096

// Bytes returns n zero bytes (at most a page) followed by an inaccessible
// page (atEnd) or preceded by one. The memory is unmapped when the test
// ends. On systems without mmap it skips the test.
//
// Each call maps memory of its own, and a process may only hold so many
// mappings (vm.max_map_count): a test that needs many buffers takes one of
// MaxLen bytes and slices it, b[len(b)-k:] flush against a guard at the
// end, b[:k:k] against one at the start.
func Bytes(tb testing.TB, n int, atEnd bool) []byte {
	tb.Helper()
	return guarded(tb, n, atEnd)
}
