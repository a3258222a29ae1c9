package fast

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func TestReadUintVectors(t *testing.T) {
	for _, tc := range []struct {
		hex  string
		v    uint64
		is32 bool
		err  error
	}{
		{"80", 0, true, nil},
		{"81", 1, true, nil},
		{"ff", 127, true, nil},
		{"0180", 128, true, nil},
		{"39419a", 942234, true, nil},
		{"0000000081", 1, true, nil}, // overlong is accepted (R-class)
		{"0f7f7f7fff", math.MaxUint32, true, nil},
		{"1000000080", 0, true, ErrOverflow}, // MaxUint32+1
		{"017f7f7f7f7f7f7f7f7fff", 0, false, ErrOverflow},
		{"017f7f7f7f7f7f7f7fff", math.MaxUint64, false, nil},
		{"027f7f7f7f7f7f7f7fff", 0, false, ErrOverflow},
		{"00000000000000000000000081", 0, false, ErrOverflow}, // 11+ bytes
		{"", 0, true, ErrShort},
		{"0101", 0, true, ErrShort},
	} {
		b := unhex(t, tc.hex)
		if tc.is32 {
			v, next, err := ReadUint32(b, 0)
			if !errors.Is(err, tc.err) || (err == nil && (uint64(v) != tc.v || next != len(b))) {
				t.Errorf("ReadUint32(%s) = %d, %d, %v; want %d, %d, %v", tc.hex, v, next, err, tc.v, len(b), tc.err)
			}
		}
		v, next, err := ReadUint64(b, 0)
		want := tc.err
		if tc.is32 && tc.err == ErrOverflow {
			want = nil
			tc.v = math.MaxUint32 + 1
		}
		if !errors.Is(err, want) || (err == nil && (v != tc.v || next != len(b))) {
			t.Errorf("ReadUint64(%s) = %d, %d, %v; want %d, %v", tc.hex, v, next, err, tc.v, want)
		}
	}
}

func TestReadIntVectors(t *testing.T) {
	for _, tc := range []struct {
		hex string
		v   int64
		err error
	}{
		{"80", 0, nil},
		{"ff", -1, nil},
		{"c0", -64, nil},
		{"bf", 63, nil},
		{"00c0", 64, nil}, // sign-extension byte needed
		{"7fbf", -65, nil},
		{"39419a", 942234, nil},
		{"7c1b1b9d", -7942755, nil}, // spec appendix example
		{"0000000080", 0, nil},
		{"7f7f7f7fff", -1, nil},
		{"077f7f7fff", math.MaxInt32, nil},
		{"7800000080", math.MinInt32, nil},
	} {
		b := unhex(t, tc.hex)
		v, next, err := ReadInt64(b, 0)
		if !errors.Is(err, tc.err) || v != tc.v || next != len(b) {
			t.Errorf("ReadInt64(%s) = %d, %d, %v; want %d", tc.hex, v, next, err, tc.v)
		}
		v32, next, err := ReadInt32(b, 0)
		if err != nil || int64(v32) != tc.v || next != len(b) {
			t.Errorf("ReadInt32(%s) = %d, %d, %v; want %d", tc.hex, v32, next, err, tc.v)
		}
	}
	for _, h := range []string{"0800000080", "777f7f7fff"} {
		if _, _, err := ReadInt32(unhex(t, h), 0); err != ErrOverflow {
			t.Errorf("ReadInt32(%s) err = %v, want ErrOverflow", h, err)
		}
	}
	for _, h := range []string{"01000000000000000080", "7e7f7f7f7f7f7f7f7fff", "0000000000000000000080"} {
		if _, _, err := ReadInt64(unhex(t, h), 0); err != ErrOverflow {
			t.Errorf("ReadInt64(%s) err = %v, want ErrOverflow", h, err)
		}
	}
	if _, _, err := ReadInt64(unhex(t, "7f"), 0); err != ErrShort {
		t.Errorf("ReadInt64(7f) err = %v, want ErrShort", err)
	}
}

func TestNullableEdges(t *testing.T) {
	// Optional uInt32 max is 10 00 00 00 80: the wire value exceeds the type by one.
	b := unhex(t, "1000000080")
	v, present, next, err := ReadNullableUint32(b, 0)
	if err != nil || !present || v != math.MaxUint32 || next != 5 {
		t.Fatalf("ReadNullableUint32(max) = %d %v %d %v", v, present, next, err)
	}
	if got := AppendNullableUint32(nil, math.MaxUint32, true); !bytes.Equal(got, b) {
		t.Errorf("AppendNullableUint32(max) = %x", got)
	}
	if _, present, next, err := ReadNullableUint32([]byte{0x80}, 0); present || next != 1 || err != nil {
		t.Errorf("null uInt32: present=%v next=%d err=%v", present, next, err)
	}
	u, present, _, err := ReadNullableUint64(AppendNullableUint64(nil, math.MaxUint64, true), 0)
	if err != nil || !present || u != math.MaxUint64 {
		t.Errorf("nullable MaxUint64 round trip = %d %v %v", u, present, err)
	}
	i, present, _, err := ReadNullableInt64(AppendNullableInt64(nil, math.MaxInt64, true), 0)
	if err != nil || !present || i != math.MaxInt64 {
		t.Errorf("nullable MaxInt64 round trip = %d %v %v", i, present, err)
	}
	// Overlong NULLs (R-class, accepted) are absent in every nullable type.
	for _, h := range []string{"0080", "000080"} {
		b := unhex(t, h)
		_, p32, n32, e32 := ReadNullableUint32(b, 0)
		_, p64, n64, e64 := ReadNullableUint64(b, 0)
		_, pi32, ni32, ei32 := ReadNullableInt32(b, 0)
		_, pi64, ni64, ei64 := ReadNullableInt64(b, 0)
		if p32 || p64 || pi32 || pi64 || e32 != nil || e64 != nil || ei32 != nil || ei64 != nil ||
			n32 != len(b) || n64 != len(b) || ni32 != len(b) || ni64 != len(b) {
			t.Errorf("overlong NULL %s: present %v %v %v %v, next %d %d %d %d, err %v %v %v %v",
				h, p32, p64, pi32, pi64, n32, n64, ni32, ni64, e32, e64, ei32, ei64)
		}
	}
	// Spec examples: nullable int32 -1 is ff, 0 is 81, null is 80.
	for h, want := range map[string]int32{"ff": -1, "81": 0, "bf": 62, "00c0": 63} {
		v, present, _, err := ReadNullableInt32(unhex(t, h), 0)
		if err != nil || !present || v != want {
			t.Errorf("ReadNullableInt32(%s) = %d %v %v; want %d", h, v, present, err, want)
		}
	}
}

func TestIntRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	edges64 := []int64{0, 1, -1, 63, 64, -64, -65, math.MaxInt64, math.MinInt64, math.MaxInt32, math.MinInt32}
	var buf []byte
	for i := 0; i < 20000; i++ {
		var x int64
		if i < len(edges64) {
			x = edges64[i]
		} else {
			x = r.Int64() >> (r.UintN(64))
			if r.IntN(2) == 0 {
				x = -x
			}
		}
		buf = AppendInt64(buf[:0], x)
		got, next, err := ReadInt64(buf, 0)
		if err != nil || got != x || next != len(buf) {
			t.Fatalf("int64 %d: %x -> %d %d %v", x, buf, got, next, err)
		}
		buf = AppendNullableInt64(buf[:0], x, true)
		got, present, next, err := ReadNullableInt64(buf, 0)
		if err != nil || got != x || !present || next != len(buf) {
			t.Fatalf("nullable int64 %d: %x -> %d %d %v", x, buf, got, next, err)
		}
		u := uint64(x)
		buf = AppendUint64(buf[:0], u)
		gu, next, err := ReadUint64(buf, 0)
		if err != nil || gu != u || next != len(buf) {
			t.Fatalf("uint64 %d: %x -> %d %v", u, buf, gu, err)
		}
		buf = AppendNullableUint64(buf[:0], u, true)
		gu, present, next, err = ReadNullableUint64(buf, 0)
		if err != nil || gu != u || !present || next != len(buf) {
			t.Fatalf("nullable uint64 %d: %x -> %d %v", u, buf, gu, err)
		}
		x32 := int32(x)
		buf = AppendNullableInt32(buf[:0], x32, true)
		g32, present, _, err := ReadNullableInt32(buf, 0)
		if err != nil || g32 != x32 || !present {
			t.Fatalf("nullable int32 %d: %x -> %d %v", x32, buf, g32, err)
		}
		// Every strict prefix is "need more bytes", never an error.
		for k := 0; k < len(buf); k++ {
			if _, _, _, err := ReadNullableInt32(buf[:k], 0); err != ErrShort {
				t.Fatalf("prefix %x of %x: err %v", buf[:k], buf, err)
			}
		}
	}
}

func TestASCIIPreamble(t *testing.T) {
	for _, tc := range []struct {
		hex      string
		optional bool
		want     string
		present  bool
	}{
		{"80", false, "", true},
		{"0080", false, "\x00", true},
		{"41c2", false, "AB", true},
		{"80", true, "", false},
		{"0080", true, "", true},
		{"000080", true, "\x00", true},
		{"41c2", true, "AB", true},
	} {
		b := unhex(t, tc.hex)
		var s []byte
		var present bool
		var next int
		var err error
		if tc.optional {
			s, present, next, err = ReadNullableASCII(b, 0, 16)
		} else {
			s, next, err = ReadASCII(b, 0, 16)
			present = true
		}
		got := string(AppendASCIIValue(nil, s))
		if err != nil || present != tc.present || got != tc.want || next != len(b) {
			t.Errorf("read %s optional=%v = %q %v %d %v", tc.hex, tc.optional, got, present, next, err)
		}
		var enc []byte
		if tc.optional {
			enc = AppendNullableASCII(nil, []byte(tc.want), tc.present)
		} else {
			enc = AppendASCII(nil, []byte(tc.want))
		}
		if !bytes.Equal(enc, b) {
			t.Errorf("encode %q optional=%v = %x, want %s", tc.want, tc.optional, enc, tc.hex)
		}
	}
	dst := make([]byte, 4)
	if n := CopyASCII(dst, []byte{'A', 'B' | 0x80}); n != 2 || string(dst[:2]) != "AB" {
		t.Errorf("CopyASCII = %d %q", n, dst[:n])
	}
}

func TestASCIILimits(t *testing.T) {
	b := []byte("ABCDE")
	b[4] |= 0x80
	if _, _, err := ReadASCII(b, 0, 4); err != ErrLimit {
		t.Errorf("5 chars with limit 4: %v", err)
	}
	if _, _, err := ReadASCII(b, 0, 5); err != nil {
		t.Errorf("5 chars with limit 5: %v", err)
	}
	if _, _, err := ReadASCII(b[:4], 0, 5); err != ErrShort {
		t.Errorf("cut string: %v", err)
	}
	if _, _, err := ReadASCII(make([]byte, 100), 0, 10); err != ErrLimit {
		t.Errorf("long unterminated string: %v", err)
	}
}

func TestByteVector(t *testing.T) {
	enc := AppendByteVector(nil, []byte{1, 2, 3})
	v, next, err := ReadByteVector(enc, 0, 8)
	if err != nil || !bytes.Equal(v, []byte{1, 2, 3}) || next != 4 {
		t.Fatalf("ReadByteVector = %x %d %v", v, next, err)
	}
	if _, _, err := ReadByteVector(enc, 0, 2); err != ErrLimit {
		t.Errorf("limit: %v", err)
	}
	if _, _, err := ReadByteVector(enc[:3], 0, 8); err != ErrShort {
		t.Errorf("short: %v", err)
	}
	// A huge length on the wire is a limit error, not an allocation.
	if _, _, err := ReadByteVector(unhex(t, "0f7f7f7fff"), 0, 1<<20); err != ErrLimit {
		t.Errorf("huge length: %v", err)
	}
	enc = AppendNullableByteVector(nil, nil, false)
	if _, present, _, err := ReadNullableByteVector(enc, 0, 8); present || err != nil {
		t.Errorf("null vector: %v %v", present, err)
	}
	enc = AppendNullableByteVector(nil, []byte{}, true)
	if v, present, _, err := ReadNullableByteVector(enc, 0, 8); !present || err != nil || len(v) != 0 {
		t.Errorf("empty vector: %v %v", present, err)
	}
}

func TestPMap(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var pb PMapBuilder
	var buf []byte
	for n := 0; n <= MaxPMapBits; n++ {
		bits := make([]bool, n)
		for i := range bits {
			bits[i] = r.IntN(3) == 0
		}
		pb.Reset()
		for _, bit := range bits {
			pb.Add(bit)
		}
		buf = pb.AppendTo(buf[:0])
		if len(buf) > 1 && buf[len(buf)-1] == 0x80 {
			t.Fatalf("map %x is not minimal", buf)
		}
		p, next, err := ReadPMap(buf, 0, 64)
		if err != nil || next != len(buf) {
			t.Fatalf("ReadPMap(%x) = %d %v", buf, next, err)
		}
		for i, bit := range bits {
			if p.Next() != bit {
				t.Fatalf("n=%d bit %d differs (map %x)", n, i, buf)
			}
		}
		for i := 0; i < 20; i++ {
			if p.Next() {
				t.Fatalf("bit past the end is set (map %x)", buf)
			}
		}
	}
	// Overlong map accepted; limit enforced; short detected.
	p, next, err := ReadPMap(unhex(t, "400080"), 0, 3)
	if err != nil || next != 3 || !p.Next() || p.Next() {
		t.Errorf("overlong pmap: %d %v", next, err)
	}
	if _, _, err := ReadPMap(unhex(t, "40000080"), 0, 3); err != ErrLimit {
		t.Errorf("pmap over limit: %v", err)
	}
	if _, _, err := ReadPMap(unhex(t, "4000"), 0, 3); err != ErrShort {
		t.Errorf("cut pmap: %v", err)
	}
	// Past MaxPMapBits: zero groups are an overlong encoding, set bits a
	// limit.
	long := append(bytes.Repeat([]byte{0x7f}, MaxPMapBits/7), 0x00, 0x80)
	if p, next, err := ReadPMap(long, 0, 32); err != nil || next != len(long) || !p.Next() {
		t.Errorf("overlong 20-byte pmap: %d %v", next, err)
	}
	long[len(long)-1] = 0x81
	if _, _, err := ReadPMap(long, 0, 32); err != ErrLimit {
		t.Errorf("pmap with bit %d set: %v", MaxPMapBits+7, err)
	}
}

func TestWirePrimitivesDoNotAllocate(t *testing.T) {
	var buf []byte
	buf = AppendUint32(buf, 942234)
	buf = AppendNullableInt64(buf, -7942755, true)
	buf = AppendASCII(buf, []byte("600000"))
	buf = AppendByteVector(buf, []byte{1, 2})
	buf = append(buf, 0x01)
	dst := make([]byte, 8)
	var pb PMapBuilder
	out := make([]byte, 0, 64)
	allocs := testing.AllocsPerRun(100, func() {
		_, off, _ := ReadUint32(buf, 0)
		_, _, off, _ = ReadNullableInt64(buf, off)
		s, off, _ := ReadASCII(buf, off, 16)
		CopyASCII(dst, s)
		_, off, _ = ReadByteVector(buf, off, 16)
		_, _, err := ReadUint64(buf, off)
		if err != ErrShort {
			t.Fatal("want ErrShort")
		}
		p, _, _ := ReadPMap(buf, 0, 8)
		p.Next()
		pb.Reset()
		pb.Add(true)
		out = pb.AppendTo(out[:0])
		out = AppendNullableInt64(out, 5, true)
	})
	if allocs != 0 {
		t.Errorf("wire primitives allocate %v times per run", allocs)
	}
}
