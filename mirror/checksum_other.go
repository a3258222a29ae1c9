//go:build !amd64

package mirror

// vectorMin is never reached: there is no vector loop on this architecture.
const vectorMin = 1 << 62

// vectorSum has no vector loop on this architecture.
func vectorSum(b []byte) (sum uint64, n int) { return 0, 0 }
