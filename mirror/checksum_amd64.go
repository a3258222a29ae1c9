package mirror

import "golang.org/x/sys/cpu"

// useAVX2 selects the vector loop of onesSum: the TCP checksum reads every
// payload byte and is the largest cost per segment.
var useAVX2 = cpu.X86.HasAVX2

//go:noescape
func sumAVX2(p *byte, n int) uint64

// vectorMin is the shortest input vectorSum takes: sumAVX2 reads its last
// bytes with one overlapping 32-byte load.
const vectorMin = 32

// vectorSum adds the 16-bit words of the longest even-length prefix of b
// (len(b) at least vectorMin) as an unfolded little-endian lane sum, and
// returns it with the number of bytes consumed.
func vectorSum(b []byte) (sum uint64, n int) {
	if !useAVX2 {
		return 0, 0
	}
	const chunk = 1 << 20 // keeps every 32-bit lane from overflowing
	// A short last piece joins the chunk before it, so every call gets at
	// least vectorMin bytes.
	for len(b)-n >= chunk+vectorMin {
		sum += sumAVX2(&b[n], chunk)
		n += chunk
	}
	m := (len(b) - n) &^ 1
	return sum + sumAVX2(&b[n], m), n + m
}
