package mirror

import "golang.org/x/sys/cpu"

// useAVX2 selects the vector loop of onesSum: the TCP checksum reads every
// payload byte and is the largest cost per segment.
var useAVX2 = cpu.X86.HasAVX2

//go:noescape
func onesSumAVX2(p *byte, n int) uint16

// vectorMin is the shortest input vectorOnesSum takes: onesSumAVX2 reads its
// last bytes with one overlapping 32-byte load.
const vectorMin = 32

// vectorOnesSum returns the ones' complement sum of b's little-endian 16-bit
// words (a last odd byte is the low byte of a word), folded, and true; or
// false when there is no vector loop for b.
func vectorOnesSum(b []byte) (uint16, bool) {
	if !useAVX2 || len(b) < vectorMin {
		return 0, false
	}
	const chunk = 64 << 10 // keeps the kernel's 32-bit sums from overflowing
	var s uint16
	// A short last piece joins the chunk before it, so every call gets at
	// least vectorMin bytes.
	for len(b) >= chunk+vectorMin {
		s = addOnes(s, onesSumAVX2(&b[0], chunk))
		b = b[chunk:]
	}
	s = addOnes(s, onesSumAVX2(&b[0], len(b)&^1))
	if len(b)%2 == 1 {
		s = addOnes(s, uint16(b[len(b)-1]))
	}
	return s, true
}
