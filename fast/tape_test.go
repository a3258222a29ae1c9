package fast

import "testing"

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
