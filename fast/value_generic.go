//go:build !(386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm)

package fast

// setValue fills v; tag is valueTag's result.
func setValue(v *Value, u uint64, exp, end int32, off, n uint32, tag uint64) {
	v.U, v.Exp, v.End, v.off, v.n = u, exp, end, off, n
	v.field, v.Kind, v.Present, v.Elem = int32(uint32(tag)), Kind(tag>>32), tag&presentTag != 0, tag&elemTag != 0
	v.src = srcDecoded
}

// kindTag returns Kind, Present<<8, Elem<<16 and src<<24 as one word.
func kindTag(v *Value) uint32 {
	t := uint32(v.Kind) | uint32(v.src)<<24
	if v.Present {
		t |= 1 << 8
	}
	if v.Elem {
		t |= 1 << 16
	}
	return t
}
