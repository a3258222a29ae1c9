package mirror_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tickwire/tickwire/mirror"
)

// impairment describes what the mirror did to one generated stream.
type impairment struct {
	loss, dup, reorder, overlap float64
	corrupt                     bool // overlapping copies carry different bytes
}

type genSeg struct {
	off   int // stream offset (of the byte after the SYN for a SYN)
	data  []byte
	flags uint8
}

// genStream cuts stream into segments and applies imp. It returns the
// segments in capture order.
func genStream(rng *rand.Rand, stream []byte, imp impairment, withSYN, withFIN bool) []genSeg {
	var segs []genSeg
	for off := 0; off < len(stream); {
		n := 1 + rng.IntN(1408)
		if rng.IntN(4) == 0 {
			n = 1 + rng.IntN(16)
		}
		n = min(n, len(stream)-off)
		segs = append(segs, genSeg{off: off, data: stream[off : off+n]})
		off += n
	}
	var out []genSeg
	for _, s := range segs {
		if rng.Float64() < imp.overlap {
			// An extra copy covering a random stretch around s.
			a := max(0, s.off-rng.IntN(64))
			b := min(len(stream), s.off+len(s.data)+rng.IntN(64))
			d := append([]byte(nil), stream[a:b]...)
			if imp.corrupt {
				for i := range d {
					if rng.IntN(3) == 0 {
						d[i] ^= 0xa5
					}
				}
			}
			out = append(out, genSeg{off: a, data: d})
		}
		if rng.Float64() >= imp.loss {
			out = append(out, s)
		}
		if rng.Float64() < imp.dup {
			out = append(out, s)
		}
	}
	if withFIN {
		out = append(out, genSeg{off: len(stream), flags: fFIN})
	}
	// Reorder: move some segments a few places later.
	for i := range out {
		if rng.Float64() < imp.reorder {
			j := min(len(out)-1, i+1+rng.IntN(8))
			out[i], out[j] = out[j], out[i]
		}
	}
	if withSYN {
		out = append([]genSeg{{off: -1, flags: fSYN}}, out...)
	}
	return out
}

func TestPropertyRandomImpairments(t *testing.T) {
	iterations := 400
	if testing.Short() || raceEnabled {
		iterations = 60
	}
	for it := 0; it < iterations; it++ {
		rng := rand.New(rand.NewPCG(uint64(it), 99))
		imp := impairment{
			loss:    []float64{0, 0, 0.02, 0.1}[rng.IntN(4)],
			dup:     []float64{0, 0.05, 0.2}[rng.IntN(3)],
			reorder: []float64{0, 0.1, 0.3}[rng.IntN(3)],
			overlap: []float64{0, 0.1, 0.3}[rng.IntN(3)],
			corrupt: rng.IntN(3) == 0,
		}
		cfg := mirror.Config{
			BufferPerFlow: []int{0, 1 << 20, 1500, 4096, 200}[rng.IntN(5)],
			HoleTimeout:   []time.Duration{-1, 0, time.Millisecond}[rng.IntN(3)],
			History:       rng.IntN(2) == 0,
		}
		withSYN, withFIN := rng.IntN(2) == 0, rng.IntN(2) == 0
		isn := rng.Uint32()
		if rng.IntN(3) == 0 {
			isn = 0xffffffff - uint32(rng.IntN(20000)) // wrap around inside the stream
		}
		stream := make([]byte, 1+rng.IntN(60000))
		for i := range stream {
			stream[i] = byte(rng.Uint32())
		}
		segs := genStream(rng, stream, imp, withSYN, withFIN)
		name := fmt.Sprintf("it%d %+v %+v syn=%v fin=%v len=%d", it, imp, cfg, withSYN, withFIN, len(stream))
		t.Run(fmt.Sprint(it), func(t *testing.T) {
			checkProperty(t, name, cfg, isn, stream, segs, rng)
		})
	}
}

func checkProperty(t *testing.T, name string, cfg mirror.Config, isn uint32, stream []byte, segs []genSeg, rng *rand.Rand) {
	rec := newRecorder(t)
	a, err := mirror.New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	// The oracle: the stream start and the first copy of every byte.
	start := -1
	first := make([]int, len(stream)) // -1: no copy yet
	for i := range first {
		first[i] = -1
	}
	ended := false
	ts := int64(0)
	for _, g := range segs {
		ts += int64(rng.IntN(200_000))
		var s seg
		switch {
		case g.flags&fSYN != 0:
			s = ab(isn, fSYN, "")
			s.flags = fSYN
			start = 0
		default:
			s = ab(isn+1+uint32(g.off), g.flags, string(g.data))
			if start < 0 && len(g.data) > 0 {
				start = g.off
			}
			if !ended && start >= 0 {
				for i, b := range g.data {
					if o := g.off + i; o >= start && first[o] < 0 {
						first[o] = int(b)
					}
				}
			}
		}
		if err := a.HandleIPv4(appendIPv4(nil, s), ts); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if rng.IntN(50) == 0 {
			a.Flush(ts)
		}
		if st := rec.get(keyAB); len(st.ends) > 0 {
			ended = true
		}
	}
	a.Close()
	st := rec.get(keyAB)
	if start < 0 {
		if st.starts != 0 {
			t.Fatalf("%s: a flow started without data or SYN", name)
		}
		return
	}
	if st.starts != 1 || len(st.ends) != 1 {
		t.Fatalf("%s: %d starts, %d ends", name, st.starts, len(st.ends))
	}
	// Invariant: Data and Gap tile [0, next) (the recorder checked
	// contiguity), the last piece is data, and every delivered byte is the
	// first copy of that byte.
	if len(st.delivered) > 0 && !st.delivered[len(st.delivered)-1] {
		t.Fatalf("%s: trailing gap", name)
	}
	if start+len(st.img) > len(stream) {
		t.Fatalf("%s: delivered %d bytes past the stream end", name, start+len(st.img)-len(stream))
	}
	var gapBytes uint64
	for o, ok := range st.delivered {
		if !ok {
			gapBytes++
			continue
		}
		if want := first[start+o]; int(st.img[o]) != want {
			t.Fatalf("%s: byte at offset %d is %#x, first copy %#x (stream %#x)", name, o, st.img[o], want, stream[start+o])
		}
	}
	stats := a.Stats()
	if stats.GapBytes != gapBytes || stats.DeliveredBytes != uint64(len(st.img))-gapBytes {
		t.Fatalf("%s: stats %+v disagree with %d delivered and %d gap bytes", name, stats, uint64(len(st.img))-gapBytes, gapBytes)
	}
	if stats.ActiveFlows != 0 {
		t.Fatalf("%s: ActiveFlows %d after Close", name, stats.ActiveFlows)
	}
}

// TestPropertyNoLossDeliversEverything: without loss, with a buffer larger
// than any reordering and no timeout, the stream arrives whole and without a
// gap, whatever the reordering, duplication and overlaps.
func TestPropertyNoLossDeliversEverything(t *testing.T) {
	iterations := 200
	if testing.Short() || raceEnabled {
		iterations = 30
	}
	for it := 0; it < iterations; it++ {
		rng := rand.New(rand.NewPCG(uint64(it), 7))
		imp := impairment{dup: 0.1, reorder: 0.3, overlap: 0.2}
		stream := make([]byte, 1+rng.IntN(50000))
		for i := range stream {
			stream[i] = byte(rng.Uint32())
		}
		segs := genStream(rng, stream, imp, true, rng.IntN(2) == 0)
		rec := newRecorder(t)
		a, _ := mirror.New(mirror.Config{BufferPerFlow: 1 << 20, HoleTimeout: -1}, rec)
		isn := rng.Uint32()
		for i, g := range segs {
			s := ab(isn+1+uint32(g.off), g.flags, string(g.data))
			if g.flags&fSYN != 0 {
				s = ab(isn, fSYN, "")
			}
			if err := a.HandleIPv4(appendIPv4(nil, s), int64(i)); err != nil {
				t.Fatal(err)
			}
		}
		a.Close()
		st := rec.get(keyAB)
		if len(st.gaps) != 0 || string(st.data) != string(stream) {
			t.Fatalf("iteration %d: %d gaps, %d of %d bytes, equal=%v", it, len(st.gaps), len(st.data), len(stream), string(st.data) == string(stream))
		}
	}
}

// TestPropertyGapsAreTheLostBytes: with a large buffer and no timeout, the
// gaps are exactly the bytes that never arrived before the last delivered
// byte.
func TestPropertyGapsAreTheLostBytes(t *testing.T) {
	iterations := 200
	if testing.Short() || raceEnabled {
		iterations = 30
	}
	for it := 0; it < iterations; it++ {
		rng := rand.New(rand.NewPCG(uint64(it), 8))
		imp := impairment{loss: 0.1, dup: 0.1, reorder: 0.2}
		stream := make([]byte, 1+rng.IntN(50000))
		for i := range stream {
			stream[i] = byte(rng.Uint32())
		}
		segs := genStream(rng, stream, imp, true, false)
		arrived := make([]bool, len(stream))
		rec := newRecorder(t)
		a, _ := mirror.New(mirror.Config{BufferPerFlow: 1 << 20, HoleTimeout: -1}, rec)
		isn := rng.Uint32()
		for i, g := range segs {
			s := ab(isn+1+uint32(g.off), g.flags, string(g.data))
			if g.flags&fSYN != 0 {
				s = ab(isn, fSYN, "")
			} else {
				for j := range g.data {
					arrived[g.off+j] = true
				}
			}
			if err := a.HandleIPv4(appendIPv4(nil, s), int64(i)); err != nil {
				t.Fatal(err)
			}
		}
		a.Close()
		st := rec.get(keyAB)
		for o, ok := range st.delivered {
			if ok != arrived[o] {
				t.Fatalf("iteration %d: offset %d delivered=%v arrived=%v", it, o, ok, arrived[o])
			}
			if ok && st.img[o] != stream[o] {
				t.Fatalf("iteration %d: offset %d wrong byte", it, o)
			}
		}
		last := len(st.delivered)
		for o := last; o < len(stream); o++ {
			if arrived[o] {
				t.Fatalf("iteration %d: byte %d arrived after the last delivered byte %d but was not delivered", it, o, last)
			}
		}
	}
}
