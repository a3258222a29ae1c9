//go:build !purego

package fast

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/tickwire/tickwire/internal/guardmem"
)

// The assembly loop indexes memory without bounds checks: a read past the
// end of the input or a write past the end of m.Values, m's arena, the
// dictionary, the undo log or the frames would not fail a comparison of
// results, only corrupt or leak memory. guardedStream decodes with each of
// these ending just before an inaccessible page, so that any such access
// crashes the test.

// guardedSlice returns a slice of capacity c (and length min(len(s), c),
// s copied in) whose backing array ends at a guard page.
func guardedSlice[E any](t testing.TB, s []E, c int) []E {
	if c == 0 {
		return s[:0:0]
	}
	size := int(unsafe.Sizeof(*new(E)))
	mem := guardmem.Bytes(t, c*size, true)
	g := unsafe.Slice((*E)(unsafe.Pointer(&mem[len(mem)-c*size])), c)
	return g[:copy(g, s)]
}

// guard moves d's dictionary, undo log and frames to guarded memory, each
// with exactly the length or capacity NewDecoder gave it.
func guard(t testing.TB, d *Decoder) {
	d.dict = guardedSlice(t, d.dict, len(d.dict))
	d.undo = guardedSlice(t, d.undo, cap(d.undo))
	d.frames = guardedSlice(t, d.frames, len(d.frames))
}

// guardedStream decodes stream like diffStream, with the assembly loop
// (where the CPU has it), comparing every message with the reference
// decoder's; each message's bytes, m.Values and m's arena end at a guard
// page, the latter two with random room (from none to 64 values or bytes).
func guardedStream(t *testing.T, r *rand.Rand, ts *Templates, opts *DecoderOptions, stream []byte) {
	t.Helper()
	if !haveAsmLoop {
		return
	}
	on, check := asmLoopOn, loopCheck
	asmLoopOn, loopCheck = true, nil
	defer func() { asmLoopOn, loopCheck = on, check }()
	dt, err := NewDecoder(ts, opts)
	if err != nil {
		t.Fatal(err)
	}
	guard(t, dt)
	dr, _ := NewDecoder(ts, opts)
	in := guardmem.Bytes(t, len(stream), true)
	const room = 64
	vals := guardedSlice[Value](t, nil, room)
	arena := guardmem.Bytes(t, room, true)
	var mt, mr Message
	decode := func(b []byte) (int, string, error) {
		g := in[len(in)-len(b):]
		copy(g, b)
		nv, na := r.IntN(room+1), r.IntN(room+1)
		mt.Values = vals[room-nv : room-nv : room]
		mt.arena = arena[room-na : room-na : room]
		return sameResult(g, dt, dr, &mt, &mr)
	}
	for off := 0; off < len(stream); {
		if cut := off + r.IntN(len(stream)-off+1); cut < len(stream) {
			if _, diff, _ := decode(stream[off:cut]); diff != "" {
				t.Fatalf("guarded, at %d cut at %d: %s\n%x", off, cut, diff, stream[off:])
			}
		}
		n, diff, err := decode(stream[off:])
		if diff != "" {
			t.Fatalf("guarded, at %d: %s\n%x", off, diff, stream[off:])
		}
		if err != nil {
			dt.Reset()
			dr.Reset()
			n = 1
		}
		off += n
	}
}
