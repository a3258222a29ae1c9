package step

import "golang.org/x/sys/cpu"

// useAVX2 selects the vector loop for Checksum; tests clear it to run the
// portable one.
var useAVX2 = cpu.X86.HasAVX2

// sumAVX2 returns the sum of the bytes of p[0:n], n at least 32: each
// VPSADBW against zero adds 8-byte groups into four 64-bit lanes, the last
// n%32 bytes from one masked load.
//
//go:noescape
func sumAVX2(p *byte, n int) uint64

// vectorSum returns the sum of the bytes of b and len(b) when it has a
// vector loop for them (AVX2, at least 32 bytes), else 0, 0.
func vectorSum(b []byte) (sum uint64, n int) {
	if len(b) < 32 || !useAVX2 {
		return 0, 0
	}
	return sumAVX2(&b[0], len(b)), len(b)
}

// sohMaskAVX2 returns the SOH bytes of p[0:128] as a bitmap, bit i for p[i]
// (lo for the first 64 bytes): VPCMPEQB and VPMOVMSKB, 32 bytes at a time.
//
//go:noescape
func sohMaskAVX2(p *[128]byte) (lo, hi uint64)

// sohMask returns the SOH bytes of p[0:128] as a bitmap.
func sohMask(p *[128]byte) (lo, hi uint64) {
	if useAVX2 {
		return sohMaskAVX2(p)
	}
	return sohMaskGo(p)
}
