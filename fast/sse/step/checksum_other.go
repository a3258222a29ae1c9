//go:build !amd64

package step

// useAVX2 is false: there is no vector loop here.
var useAVX2 = false

// vectorSum has no vector loop here: it sums nothing.
func vectorSum(b []byte) (sum uint64, n int) { return 0, 0 }

// sohMask returns the SOH bytes of p[0:128] as a bitmap.
func sohMask(p *[128]byte) (lo, hi uint64) { return sohMaskGo(p) }
