//go:build 386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm

package fast

import "unsafe"

// setValue fills v with four word stores instead of one store per field:
// appending values is a large part of decoding. tag is valueTag's result.
// Little-endian layout only (value_generic.go does it field by field);
// the array index expressions below fail to compile if the layout changes.
func setValue(v *Value, u uint64, exp, end int32, off, n uint32, tag uint64) {
	w := (*[4]uint64)(unsafe.Pointer(v))
	w[0] = u
	w[1] = uint64(uint32(exp)) | uint64(uint32(end))<<32
	w[2] = uint64(off) | uint64(n)<<32
	w[3] = tag
}

// kindTag returns the bytes of v from Kind to src as one word: Kind,
// Present<<8, Elem<<16, src<<24.
func kindTag(v *Value) uint32 { return *(*uint32)(unsafe.Pointer(&v.Kind)) }

var (
	_ = [1]int{}[unsafe.Sizeof(Value{})-32]
	_ = [1]int{}[unsafe.Offsetof(Value{}.Exp)-8]
	_ = [1]int{}[unsafe.Offsetof(Value{}.End)-12]
	_ = [1]int{}[unsafe.Offsetof(Value{}.off)-16]
	_ = [1]int{}[unsafe.Offsetof(Value{}.n)-20]
	_ = [1]int{}[unsafe.Offsetof(Value{}.field)-24]
	_ = [1]int{}[unsafe.Offsetof(Value{}.Kind)-28]
	_ = [1]int{}[unsafe.Offsetof(Value{}.Present)-29]
	_ = [1]int{}[unsafe.Offsetof(Value{}.Elem)-30]
	_ = [1]int{}[unsafe.Offsetof(Value{}.src)-31]
)
