package mirror

import "golang.org/x/sys/cpu"

// useAVX2 selects the vector loop (onesSumAVX2) of vectorOnesSum: the TCP
// checksum reads every payload byte and is the largest cost per segment.
var useAVX2 = cpu.X86.HasAVX2

//go:noescape
func onesSumAVX2(p *byte, n int, init uint64) uint16

// vectorMin is the shortest input onesSumAVX2 takes: it reads its first and
// last bytes with 32-byte loads inside p[0:n].
const vectorMin = 32

// vectorOnesSum returns the ones' complement sum of init and b's
// little-endian 16-bit words (a last odd byte is the low byte of a word),
// folded, and true; or false when there is no vector loop for b.
func vectorOnesSum(b []byte, init uint32) (uint16, bool) {
	if !useAVX2 || len(b) < vectorMin {
		return 0, false
	}
	return onesSumAVX2(&b[0], len(b), uint64(init)), true
}

// prefetch starts loading b (up to its first 1472 bytes) into the cache
// without waiting for it.
func prefetch(b []byte) {
	if len(b) > 0 {
		prefetchLines(&b[0], len(b))
	}
}

//go:noescape
func prefetchLines(p *byte, n int)
