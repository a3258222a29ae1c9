package mirror

import "golang.org/x/sys/cpu"

// useAVX2 selects the vector loop of onesSum: the TCP checksum reads every
// payload byte and is the largest cost per segment.
var useAVX2 = cpu.X86.HasAVX2

//go:noescape
func onesSumAVX2(p *byte, n int) uint16

// vectorMin is the shortest input onesSumAVX2 takes: it reads its last bytes
// with one overlapping 32-byte load.
const vectorMin = 32

// vectorOnesSum returns the ones' complement sum of b's little-endian 16-bit
// words (a last odd byte is the low byte of a word), folded, and true; or
// false when there is no vector loop for b.
func vectorOnesSum(b []byte) (uint16, bool) {
	if !useAVX2 || len(b) < vectorMin {
		return 0, false
	}
	return onesSumAVX2(&b[0], len(b)), true
}
