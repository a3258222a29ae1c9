package fast

import (
	"math/rand/v2"
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
