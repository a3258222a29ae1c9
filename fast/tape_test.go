package fast

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestShortIntegers checks the inline two- and three-byte integer decoders
// of the tape against the wire primitives on every two-byte encoding and on
// three-byte encodings spread over the whole range.
func TestShortIntegers(t *testing.T) {
	check := func(b []byte) {
		t.Helper()
		buf := append(append([]byte(nil), b...), 0x80) // room for the three-byte read
		if x, n := shortUint(buf, 0); n != 0 {
			want, next, err := ReadUint64(buf, 0)
			if err != nil || next != n || want != x {
				t.Fatalf("shortUint(%x) = %d, %d; ReadUint64 = %d, %d, %v", b, x, n, want, next, err)
			}
			for _, nullable := range []bool{false, true} {
				nv, present, _, _ := ReadNullableUint64(buf, 0)
				if got := nullAdjust(x, nullable); nullable && (present != (x != 0) || (present && got != nv)) {
					t.Fatalf("nullAdjust(%x) = %d; ReadNullableUint64 = %d, %v", b, got, nv, present)
				}
			}
		} else if len(b) <= 3 {
			t.Fatalf("shortUint(%x) declined", b)
		}
		if x, n := shortInt(buf, 0); n != 0 {
			want, next, err := ReadInt64(buf, 0)
			if err != nil || next != n || want != x {
				t.Fatalf("shortInt(%x) = %d, %d; ReadInt64 = %d, %d, %v", b, x, n, want, next, err)
			}
		} else if len(b) <= 3 {
			t.Fatalf("shortInt(%x) declined", b)
		}
	}
	for c0 := 0; c0 < 0x80; c0++ {
		for c1 := 0x80; c1 < 0x100; c1++ {
			check([]byte{byte(c0), byte(c1)})
			check([]byte{byte(c0), byte(c1 - 0x80), byte(c1)})
			check([]byte{byte(c0), byte(c0 ^ 0x55), byte(c1 ^ 0x2a)})
		}
	}
	// Longer values and ones cut short are left to readIntFast.
	for _, b := range [][]byte{{0x01, 0x02, 0x03, 0x84}, {0x01}, {0x01, 0x02}} {
		if _, n := shortUint(b, 0); n != 0 {
			t.Errorf("shortUint(%x) accepted", b)
		}
		if _, n := shortInt(b, 0); n != 0 {
			t.Errorf("shortInt(%x) accepted", b)
		}
	}
}

// TestTapeDoesNotAllocate decodes streams of random templates (groups,
// sequences, dynamic templateRefs, every operator) again and again: once
// the message, arena and dictionary buffers have grown, decoding allocates
// nothing, on the inline paths and the general ones alike.
func TestTapeDoesNotAllocate(t *testing.T) {
	for seed := 0; seed < 20; seed++ {
		r := rand.New(rand.NewPCG(uint64(seed), 5))
		ts, err := ParseTemplates([]byte(genTemplates(r)))
		if err != nil {
			t.Fatal(err)
		}
		enc, err := NewEncoder(ts, nil)
		if err != nil {
			t.Fatal(err)
		}
		clear(lastInt)
		clear(lastBytes)
		clear(lastDec)
		tails := tailLengths(ts)
		var in Message
		var stream []byte
		for k := 0; k < 20; k++ {
			tm, _ := ts.ByID(uint32(1 + r.IntN(3)))
			genMessage(r, ts, tm, &in, tails)
			if stream, err = enc.Encode(stream, &in); err != nil {
				t.Fatalf("seed %d: encode: %v", seed, err)
			}
		}
		d, err := NewDecoder(ts, nil)
		if err != nil {
			t.Fatal(err)
		}
		var m Message
		decodeAll := func() {
			d.Reset()
			for off := 0; off < len(stream); {
				n, err := d.Decode(stream[off:], &m)
				if err != nil {
					t.Fatalf("seed %d at %d: %v", seed, off, err)
				}
				off += n
			}
		}
		for i := 0; i < 3; i++ {
			decodeAll()
		}
		if allocs := testing.AllocsPerRun(5, decodeAll); allocs != 0 {
			t.Errorf("seed %d: decoding the stream allocates %v times", seed, allocs)
		}
	}
}

// TestPlainRuns decodes a template that is one run of plain scalars (no
// operator, constant, default) with values on and off runPlain's common
// paths (integers of one to five bytes, nulls, strings of zero to two
// characters, absent defaults, optional constants) and every prefix of each
// message, against the reference decoder; and with a message byte limit
// that runPlain's one-character strings run into.
func TestPlainRuns(t *testing.T) {
	const xml = `<templates xmlns="http://www.fixprotocol.org/ns/fast/td/1.1">
  <template name="Plain" id="1">
    <uInt32 name="A"/>
    <int64 name="B" presence="optional"/>
    <string name="C" presence="optional"><default value="x"/></string>
    <uInt32 name="D" presence="optional"><constant value="7"/></uInt32>
    <uInt64 name="E"><default value="5"/></uInt64>
    <string name="F"/>
    <int32 name="G"><constant value="-3"/></int32>
  </template>
</templates>`
	ts, err := LoadTemplates(strings.NewReader(xml))
	if err != nil {
		t.Fatal(err)
	}
	probe, err := NewDecoder(ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tape := probe.c.lookup(1).tape; tape[0].plain != int32(len(tape)-1) {
		t.Fatalf("the template's %d fields are not one plain run: plain = %d", len(tape)-1, tape[0].plain)
	}
	r := rand.New(rand.NewPCG(1, 2))
	as := []uint32{0, 127, 128, 16383, 16384, 1<<21 - 1, 1 << 21, 1<<32 - 1}
	bs := []int64{0, -1, 63, -64, 64, -65, 8191, -8193, 1 << 40}
	cs := []string{"", "y", "yz"}
	var stream []byte
	var starts []int
	for i := 0; i < 300; i++ {
		starts = append(starts, len(stream))
		var pm PMapBuilder
		pm.Add(true) // template id
		var body []byte
		body = AppendUint32(body, 1)
		body = AppendUint32(body, as[r.IntN(len(as))])
		bPresent := r.IntN(4) != 0
		body = AppendNullableInt64(body, bs[r.IntN(len(bs))], bPresent)
		if c := r.IntN(5); c < 4 { // C in the stream: null, or a string
			pm.Add(true)
			if c == 3 {
				body = AppendNullableASCII(body, nil, false)
			} else {
				body = AppendNullableASCII(body, []byte(cs[c]), true)
			}
		} else {
			pm.Add(false)
		}
		pm.Add(r.IntN(2) == 0) // D
		if r.IntN(2) == 0 {
			pm.Add(true)
			body = AppendUint64(body, uint64(r.IntN(400)))
		} else {
			pm.Add(false)
		}
		body = AppendASCII(body, []byte(cs[r.IntN(len(cs))]))
		stream = append(pm.AppendTo(stream), body...)
	}
	for _, limit := range []int{0, 1, 3} {
		opts := &DecoderOptions{Limits: Limits{MaxMessageBytes: limit}}
		dt, _ := NewDecoder(ts, opts)
		dr, _ := NewDecoder(ts, opts)
		var mt, mr Message
		errs := 0
		for i, off := range starts {
			end := len(stream)
			if i+1 < len(starts) {
				end = starts[i+1]
			}
			for cut := off; cut < end; cut++ {
				if _, diff, _ := sameResult(stream[off:cut], dt, dr, &mt, &mr); diff != "" {
					t.Fatalf("limit %d, message %d cut at %d: %s\n%x", limit, i, cut-off, diff, stream[off:end])
				}
			}
			n, diff, err := sameResult(stream[off:], dt, dr, &mt, &mr)
			if diff != "" {
				t.Fatalf("limit %d, message %d: %s\n%x", limit, i, diff, stream[off:end])
			}
			if err != nil {
				dt.Reset()
				dr.Reset()
				errs++
			} else if n != end-off {
				t.Fatalf("limit %d, message %d: decoded %d bytes of %d", limit, i, n, end-off)
			}
		}
		if (errs == 0) != (limit == 0) {
			t.Errorf("limit %d: %d messages over the limit", limit, errs)
		}
	}
}

// TestFastPathComplex30000 checks that every message of mFAST's file takes
// runFast to the end: a valid feed must not fall back to run.
func TestFastPathComplex30000(t *testing.T) {
	ts, recs, _ := loadComplex30000(t)
	d, err := NewDecoder(ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	var m Message
	for i, r := range recs {
		if _, err := d.Decode(r, &m); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if d.fastGaveUp != 0 || d.fastDone != uint64(len(recs)) {
		t.Errorf("runFast decoded %d and gave up on %d of %d messages", d.fastDone, d.fastGaveUp, len(recs))
	}
}

// TestFastIntegers decodes integers of every kind and encoded length (1 to
// 10 bytes), mandatory and nullable, with runFast's inline reads, and checks
// them against the values encoded.
func TestFastIntegers(t *testing.T) {
	const xml = `<templates xmlns="http://www.fixprotocol.org/ns/fast/td/1.1">
<template name="I" id="1">
 <uInt32 name="A"/><uInt32 name="B" presence="optional"/>
 <int32 name="C"/><int32 name="D" presence="optional"/>
 <uInt64 name="E"/><uInt64 name="F" presence="optional"/>
 <int64 name="G"/><int64 name="H" presence="optional"/>
 <int64 name="J"><delta/></int64><uInt32 name="K" presence="optional"><delta/></uInt32>
</template></templates>`
	ts, err := ParseTemplates([]byte(xml))
	if err != nil {
		t.Fatal(err)
	}
	tm, _ := ts.ByID(1)
	enc, _ := NewEncoder(ts, nil)
	d, _ := NewDecoder(ts, nil)
	r := rand.New(rand.NewPCG(5, 6))
	// value returns a random value of about bits bits, either sign for
	// signed kinds.
	value := func(bits int, signed bool) uint64 {
		x := r.Uint64() >> (64 - bits)
		if signed {
			x >>= 1
			if r.IntN(2) == 0 {
				x = -x
			}
		}
		return x
	}
	var in, out Message
	var buf []byte
	for i := 0; i < 20000; i++ {
		in.SetTemplate(tm)
		bits32, bits64 := 1+r.IntN(32), 1+r.IntN(64)
		in.AddUint(value(bits32, false))
		if r.IntN(4) == 0 {
			in.AddAbsent()
		} else {
			in.AddUint(value(bits32, false))
		}
		in.AddInt(int64(int32(value(bits32, true))))
		in.AddInt(int64(int32(value(bits32, true))))
		in.AddUint(value(bits64, false))
		if r.IntN(4) == 0 {
			in.AddAbsent()
		} else {
			in.AddUint(value(bits64, false) >> 1) // nullable: not the maximum
		}
		in.AddInt(int64(value(bits64, true)))
		in.AddInt(int64(value(bits64, true)) >> 1)
		in.AddInt(int64(value(bits64, true)) >> 2) // deltas stay in range
		in.AddAbsent()
		if buf, err = enc.Encode(buf[:0], &in); err != nil {
			t.Fatal(err)
		}
		n, err := d.Decode(buf, &out)
		if err != nil || n != len(buf) {
			t.Fatalf("%x: %d, %v", buf, n, err)
		}
		for k := range in.Values {
			a, b := in.Values[k], out.Values[k]
			if a.U != b.U || a.Present != b.Present {
				t.Fatalf("%x: field %d: decoded %d %v, want %d %v", buf, k, b.U, b.Present, a.U, a.Present)
			}
		}
	}
	if d.fastDone == 0 {
		t.Error("runFast decoded nothing")
	}
}

// TestFastPathFuzzSeed checks that the fuzz seed of template MD decodes,
// both messages with runFast, so that the fuzz targets start from the fast
// path.
func TestFastPathFuzzSeed(t *testing.T) {
	ts, d := fuzzDecoder(t)
	b := fuzzMDSeed(t, ts)
	var m Message
	for off := 0; off < len(b); {
		n, err := d.Decode(b[off:], &m)
		if err != nil {
			t.Fatalf("at %d: %v", off, err)
		}
		off += n
	}
	if d.fastDone != 2 || d.fastGaveUp != 0 {
		t.Errorf("runFast decoded %d messages and gave up on %d, want 2 and 0", d.fastDone, d.fastGaveUp)
	}
}
