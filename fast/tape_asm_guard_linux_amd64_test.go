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
	newGuardedDecoders(t, ts, opts, len(stream)).stream(t, r, stream)
}

// guardedDecoders is guardedStream's guarded memory and decoders, made once
// for streams of up to maxLen bytes, so that a fuzz target does not map
// pages and compile templates for every input.
type guardedDecoders struct {
	dt, dr *Decoder
	in     []byte  // guarded; a stream is copied to its end
	vals   []Value // guarded, room values
	arena  []byte  // guarded, room bytes
}

const guardedRoom = 64

func newGuardedDecoders(t testing.TB, ts *Templates, opts *DecoderOptions, maxLen int) *guardedDecoders {
	t.Helper()
	if !haveAsmLoop {
		return nil
	}
	g := &guardedDecoders{}
	g.dt, g.dr = decoderPair(t, ts, opts)
	guard(t, g.dt)
	g.in = guardmem.Bytes(t, maxLen, true)
	g.vals = guardedSlice[Value](t, nil, guardedRoom)
	g.arena = guardmem.Bytes(t, guardedRoom, true)
	return g
}

// stream is guardedStream with g's decoders, reset first; stream is at
// most the maxLen g was made for.
func (g *guardedDecoders) stream(t *testing.T, r *rand.Rand, stream []byte) {
	t.Helper()
	if g == nil {
		return
	}
	if len(stream) > len(g.in) {
		t.Fatalf("guarded stream of %d bytes, room for %d", len(stream), len(g.in))
	}
	on, check := asmLoopOn, loopCheck
	asmLoopOn, loopCheck = true, nil
	defer func() { asmLoopOn, loopCheck = on, check }()
	dt, dr := g.dt, g.dr
	dt.Reset()
	dr.Reset()
	const room = guardedRoom
	in, vals, arena := g.in, g.vals, g.arena
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
