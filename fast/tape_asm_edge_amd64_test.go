//go:build !purego

package fast

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// asmEdgeTemplates reach what the fuzz templates and mFAST's do not:
// integers of every kind sharing one dictionary entry (so a uint32 delta
// or increment can start from any 64-bit value), groups and sequences
// nested five deep, sequence elements with two- and three-byte presence
// maps, initial values at the kinds' limits, and decimals whose exponent
// sits at -63 or 63.
const asmEdgeTemplates = `<templates xmlns="http://www.fixprotocol.org/ns/fast/td/1.1">
<template name="Shared" id="1">
 <uInt64 name="U64"><copy key="k"/></uInt64>
 <uInt32 name="U32"><delta key="k"/></uInt32>
 <int32 name="I32"><delta key="k"/></int32>
 <int64 name="I64" presence="optional"><delta key="k"/></int64>
 <uInt32 name="U32N" presence="optional"><delta key="k"/></uInt32>
 <uInt64 name="U64D"><delta key="k"/></uInt64>
 <uInt32 name="U32I"><increment key="k"/></uInt32>
 <int32 name="I32I" presence="optional"><increment key="k"/></int32>
 <int64 name="I64C"><copy key="k"/></int64>
 <uInt64 name="U64N" presence="optional"><delta key="k"/></uInt64>
 <int32 name="I32N" presence="optional"><delta key="k"/></int32>
 <uInt32 name="U32C" presence="optional"><copy key="k"/></uInt32>
</template>
<template name="Deep" id="2">
 <group name="G1" presence="optional">
  <uInt32 name="a" presence="optional"><default value="4294967295"/></uInt32>
  <group name="G2">
   <sequence name="S1"><length name="n1"/>
    <int64 name="b" presence="optional"/>
    <sequence name="S2" presence="optional"><length name="n2"/>
     <string name="c"><copy/></string>
     <group name="G3" presence="optional"><uInt64 name="d" presence="optional"><copy/></uInt64></group>
    </sequence>
   </sequence>
  </group>
 </group>
 <decimal name="px" presence="optional"><exponent><default value="-63"/></exponent><mantissa><delta/></mantissa></decimal>
 <decimal name="qx"><exponent><delta/></exponent><mantissa><increment/></mantissa></decimal>
</template>
<template name="Wide" id="3">
 <sequence name="S" presence="optional"><length name="n"/>
  <uInt32 name="w1"><copy/></uInt32>
  <uInt32 name="w2" presence="optional"><default value="7"/></uInt32>
  <uInt64 name="w3"><increment value="18446744073709551615"/></uInt64>
  <int32 name="w4" presence="optional"><copy/></int32>
  <int32 name="w5"><increment value="2147483647"/></int32>
  <string name="w6"><copy value="x"/></string>
  <string name="w7" presence="optional"><default value="y"/></string>
  <string name="w8" presence="optional"><constant value="z"/></string>
  <uInt32 name="w9" presence="optional"><constant value="4294967295"/></uInt32>
  <int64 name="w10" presence="optional"><default/></int64>
  <decimal name="w11" presence="optional"><exponent><default value="63"/></exponent><mantissa><copy/></mantissa></decimal>
  <uInt32 name="w12"><increment value="4294967295"/></uInt32>
  <int64 name="w13" presence="optional"><increment value="9223372036854775807"/></int64>
 </sequence>
 <string name="t"/>
</template>
</templates>`

// asmEdgeLimits are the limits the edge streams are decoded with: the
// defaults, tight ones that the loops hit everywhere (depth, values,
// sequence length, arena bytes, two-byte presence maps), and one-byte
// presence maps with no nesting.
var asmEdgeLimits = []*DecoderOptions{
	nil,
	{Limits: Limits{MaxDepth: 3, MaxSequenceLen: 5, MaxValues: 40, MaxPMapBytes: 2, MaxMessageBytes: 6, MaxStringLen: 4, MaxByteVectorLen: 4}},
	{Limits: Limits{MaxDepth: 1, MaxPMapBytes: 1, MaxValues: 12}},
}

// edgeInts are integers at the limits of the kinds and of the encodings'
// lengths.
var edgeInts = []uint64{
	0, 1, 2, 63, 64, 0x7f, 0x80, 1<<14 - 1, 1 << 14, 1<<28 - 1, 1 << 28,
	math.MaxInt32, math.MaxInt32 + 1, math.MaxUint32 - 1, math.MaxUint32, math.MaxUint32 + 1,
	1<<55 - 1, 1 << 55, 1<<56 - 1, 1 << 56, math.MaxInt64 - 1, math.MaxInt64,
	1 << 63, math.MaxUint64 - 1, math.MaxUint64,
	// negative as int64
	1<<64 - 1<<6, 1<<64 - 1<<6 - 1, 1<<64 - 1<<31, 1<<64 - 1<<31 - 1, 1<<64 - 1<<55, 1<<64 - 1<<55 - 1,
}

// edgeStream returns n messages of the edge templates: a header with a
// template id, then fields made of integers at the limits (plain and
// nullable, signed and unsigned encodings), one-byte tokens, two-byte
// presence maps and random bytes. Most are invalid somewhere: diffStream
// then resumes one byte further, so every offset is a message start.
func edgeStream(r *rand.Rand, n int) []byte {
	var b []byte
	for i := 0; i < n; i++ {
		if r.IntN(4) == 0 { // a two-byte message presence map
			b = append(b, byte(0x40|r.IntN(64)), byte(0x80|r.IntN(128)))
		} else {
			b = append(b, byte(0xc0|r.IntN(64)))
		}
		b = append(b, byte(0x81+r.IntN(3)))
		for k := r.IntN(32); k > 0; k-- {
			v := edgeInts[r.IntN(len(edgeInts))]
			switch r.IntN(8) {
			case 0:
				b = AppendUint64(b, v)
			case 1:
				b = AppendInt64(b, int64(v))
			case 2:
				b = AppendNullableUint64(b, v, r.IntN(8) != 0)
			case 3:
				b = AppendNullableInt64(b, int64(v), r.IntN(8) != 0)
			case 4, 5: // a one-byte integer, length, character or map
				b = append(b, byte(0x80|r.IntN(128)))
			case 6: // a two-byte presence map (or integer)
				b = append(b, byte(r.IntN(128)), byte(0x80|r.IntN(128)))
			default:
				b = append(b, byte(r.Uint32()))
			}
		}
	}
	return b
}

// TestAsmLoopSharedKeyDelta decodes uInt32 deltas whose base a uInt64
// field of the same key left above 2^32: the sum carries past 2^64, or the
// difference stays above 2^32. Both are out of the uInt32 range (R4),
// whatever the loops.
func TestAsmLoopSharedKeyDelta(t *testing.T) {
	const xml = `<templates xmlns="http://www.fixprotocol.org/ns/fast/td/1.1">
<template name="S" id="1">
 <uInt64 name="A"><copy key="k"/></uInt64>
 <uInt32 name="B"><delta key="k"/></uInt32>
</template></templates>`
	ts, err := ParseTemplates([]byte(xml))
	if err != nil {
		t.Fatal(err)
	}
	msg := func(a uint64, delta int64) []byte {
		return AppendInt64(AppendUint64([]byte{0xe0, 0x81}, a), delta)
	}
	for _, c := range []struct {
		name string
		msg  []byte
		want uint64 // B, when in range
	}{
		// A = 2^64-1 (10 bytes: Go reads it), B = A + 1.
		{"carry", msg(math.MaxUint64, 1), 0},
		// A = 2^33 (5 bytes), B = A - 1.
		{"above", msg(1<<33, -1), 0},
		// A = 2^33, B = A - 2^33 + 1.
		{"in range", msg(1<<33, -(1<<33 - 1)), 1},
	} {
		for _, mode := range []int{loopDiff, loopPortable, loopAsm} {
			t.Run(fmt.Sprint(c.name, mode), func(t *testing.T) {
				useLoop(t, mode)
				diffStream(t, rand.New(rand.NewPCG(1, 2)), ts, nil, c.msg)
				d := mustNew(t, ts)
				var m Message
				n, err := d.Decode(c.msg, &m)
				if c.want != 0 {
					if err != nil || n != len(c.msg) || m.Values[1].U != c.want {
						t.Fatalf("%d bytes, %v, values %+v", n, err, m.Values)
					}
					return
				}
				if Code(err) != "R4" {
					t.Fatalf("%d bytes, values %+v, error %v; want R4", n, m.Values, err)
				}
			})
		}
	}
}

// TestAsmLoopEdgeTemplates compares the loops, at every loop run, and the
// tape decoder with the reference on edge streams of the edge templates
// under each of asmEdgeLimits.
func TestAsmLoopEdgeTemplates(t *testing.T) {
	ts, err := ParseTemplates([]byte(asmEdgeTemplates))
	if err != nil {
		t.Fatal(err)
	}
	seeds := 60
	if testing.Short() || raceEnabled {
		seeds = 6
	}
	runs := useLoop(t, loopDiff)
	fast := uint64(0)
	for seed := 0; seed < seeds; seed++ {
		r := rand.New(rand.NewPCG(uint64(seed), 12))
		stream := edgeStream(r, 40)
		for _, opts := range asmEdgeLimits {
			fast += diffStream(t, r, ts, opts, stream)
			guardedStream(t, r, ts, opts, stream)
		}
	}
	if fast == 0 || *runs == 0 {
		t.Errorf("%d loop runs, %d messages decoded on the fast path", *runs, fast)
	}
	t.Logf("%d loop runs compared, %d messages decoded on the fast path", *runs, fast)
}
