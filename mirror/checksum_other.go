//go:build !amd64

package mirror

// vectorOnesSum has no vector loop on this architecture.
func vectorOnesSum(b []byte, init uint32) (uint16, bool) { return 0, false }

// prefetch has no prefetch instruction to use on this architecture.
func prefetch([]byte) {}
