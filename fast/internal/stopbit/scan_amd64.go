package stopbit

import "golang.org/x/sys/cpu"

// useKernel selects the assembly kernel, which needs AVX2 (VPMOVMSKB on 32
// bytes, VPSRLVQ, VPMADDUBSW), BMI1 (TZCNT, BLSR) and BMI2 (SHLX, SHRX);
// tests clear it to run scanGo.
var useKernel = cpu.X86.HasAVX2 && cpu.X86.HasBMI1 && cpu.X86.HasBMI2

//go:noescape
func scanAVX2(b *byte, n, off int, t *Tokens) (count int, full bool)

// scanKernel runs the kernel, which reads 64-byte blocks inside b[0:n]: a
// buffer shorter than that is copied into a zero-padded one first (zero
// bytes have no stop bit, so they add no token).
func scanKernel(b []byte, off int, t *Tokens) (int, bool) {
	if len(b) < blockLen {
		var pad [blockLen]byte
		copy(pad[:], b)
		return scanAVX2(&pad[0], blockLen, off, t)
	}
	return scanAVX2(&b[0], len(b), off, t)
}
