package mirror

import "golang.org/x/sys/cpu"

// useAVX2 selects the vector loop of onesSum: the TCP checksum reads every
// payload byte and is the largest cost per segment.
var useAVX2 = cpu.X86.HasAVX2

//go:noescape
func sumAVX2(p *byte, n int) uint64

// vectorSum adds the 16-bit words of the longest prefix of b that is a
// multiple of 64 bytes, as an unfolded little-endian lane sum, and returns
// it with the number of bytes consumed.
func vectorSum(b []byte) (sum uint64, n int) {
	if !useAVX2 {
		return 0, 0
	}
	const chunk = 1 << 20 // keeps every 32-bit lane from overflowing
	for len(b)-n >= 64 {
		m := min(len(b)-n, chunk) &^ 63
		sum += sumAVX2(&b[n], m)
		n += m
	}
	return sum, n
}
