package step

import "golang.org/x/sys/cpu"

// useAVX2 selects the vector loop for Checksum; tests clear it to run the
// portable one.
var useAVX2 = cpu.X86.HasAVX2

// sumAVX2 returns the sum of the bytes of p[0:n], n a multiple of 32: each
// VPSADBW against zero adds 8-byte groups into four 64-bit lanes.
//
//go:noescape
func sumAVX2(p *byte, n int) uint64

// vectorSum returns the sum of the bytes of b's leading multiple of 32 bytes
// and how many bytes that is (0 without AVX2).
func vectorSum(b []byte) (sum uint64, n int) {
	if n = len(b) &^ 31; n == 0 || !useAVX2 {
		return 0, 0
	}
	return sumAVX2(&b[0], n), n
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
