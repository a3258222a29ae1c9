//go:build !(386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm)

package fast

// setValue fills v; tag is valueTag's result.
func setValue(v *Value, u uint64, exp, end int32, off, n uint32, tag uint64) {
	v.U, v.Exp, v.End, v.off, v.n = u, exp, end, off, n
	v.field, v.Kind, v.Present, v.Elem = int32(uint32(tag)), Kind(tag>>32), tag&presentTag != 0, tag&elemTag != 0
}
