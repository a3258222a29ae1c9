package fast

import (
	"bytes"
	"errors"
	"testing"
)

// fuzzTemplates covers every field kind and operator, groups, sequences,
// static and dynamic templateRefs and several dictionaries.
const fuzzTemplates = `<templates xmlns="http://www.fixprotocol.org/ns/fast/td/1.1">
<template name="MDIncRefresh" id="35">
 <string name="ApplVerID"><constant value="FIX.5.0"/></string>
 <int32 name="MsgSeqNum"><increment/></int32>
 <int64 name="SendingTime"><delta/></int64>
 <sequence name="MDEntries"><length name="NoMDEntries"/>
  <uInt32 name="MDUpdateAction"><default value="0"/></uInt32>
  <string name="MDEntryType"><copy/></string>
  <uInt32 name="MDPriceLevel" presence="optional"><increment value="1"/></uInt32>
  <string name="SecurityDesc"><copy/></string>
  <decimal name="MDEntryPx"><exponent><default value="-3"/></exponent><mantissa><delta/></mantissa></decimal>
  <uInt32 name="MDEntrySize"><delta/></uInt32>
  <string name="QuoteCondition" presence="optional"><default/></string>
 </sequence>
</template>
<template name="Base"><uInt64 name="U64" presence="optional"/><byteVector name="BV" presence="optional"><copy/></byteVector></template>
<template name="All" id="1" dictionary="template">
 <templateRef name="Base"/>
 <decimal name="D" presence="optional"><copy value="1.5"/></decimal>
 <decimal name="DD"><delta/></decimal>
 <string name="U" charset="unicode" presence="optional"><tail value="ab"/></string>
 <string name="A"><delta/></string>
 <byteVector name="B"><tail/></byteVector>
 <group name="G" presence="optional"><int32 name="I" presence="optional"><copy/></int32>
  <sequence name="S" presence="optional"><length name="N"><increment/></length><uInt32 name="X"><copy/></uInt32></sequence></group>
 <templateRef/>
</template>
<template name="MD" id="2" reset="Y">
 <uInt32 name="SeqNum"/>
 <sequence name="E"><length name="NE"/>
  <uInt32 name="Action"><copy value="1"/></uInt32>
  <uInt32 name="Level" presence="optional"><default value="1"/></uInt32>
  <string name="Type"><copy value="0"/></string>
  <uInt32 name="Flag" presence="optional"/>
  <uInt32 name="Src"><constant value="9"/></uInt32>
  <uInt32 name="Sec"><copy/></uInt32>
  <uInt32 name="Rpt"><increment/></uInt32>
  <decimal name="Px"><exponent><default value="0"/></exponent><mantissa><delta/></mantissa></decimal>
  <int32 name="Size" presence="optional"><delta/></int32>
  <string name="Sess" presence="optional"><default value="2"/></string>
  <decimal name="Chg" presence="optional"><exponent><default/></exponent><mantissa><delta/></mantissa></decimal>
  <int64 name="Vol" presence="optional"><default/></int64>
  <group name="G" presence="optional"><uInt64 name="X"><copy/></uInt64></group>
 </sequence>
</template>
<template name="Reset" id="120"/>
</templates>`

// fuzzMDSeed encodes two messages of the fuzz template MD (id 2), whose
// fields all take Decode's fast path, as a seed.
func fuzzMDSeed(t testing.TB, ts *Templates) []byte {
	tm, _ := ts.ByID(2)
	enc, err := NewEncoder(ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	var m Message
	var out []byte
	for k := 0; k < 2; k++ {
		m.SetTemplate(tm)
		m.AddUint(uint64(7 + k))
		m.AddSequence(2)
		for e := 0; e < 2; e++ {
			m.AddElement()
			m.AddUint(1)                         // Action
			m.AddUint(uint64(1 + e))             // Level
			m.AddBytes([]byte{'0' + byte(e)})    // Type
			m.AddAbsent()                        // Flag
			m.AddUint(9)                         // Src
			m.AddUint(uint64(1000 + 300*k))      // Sec
			m.AddUint(uint64(50 + 2*k + e))      // Rpt
			m.AddDecimal(int64(12345+e*700), -2) // Px
			m.AddInt(int64(-5 + 20*e))           // Size
			m.AddBytes([]byte("2"))              // Sess
			if e == 0 {
				m.AddDecimal(-3, -1) // Chg
			} else {
				m.AddAbsent()
			}
			m.AddInt(int64(1) << (20 * e)) // Vol
			if e == 1 {
				m.AddGroup()
				m.AddUint(1 << 40) // X
			} else {
				m.AddAbsent()
			}
		}
		if out, err = enc.Encode(out, &m); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func fuzzDecoder(t testing.TB) (*Templates, *Decoder) {
	ts, err := ParseTemplates([]byte(fuzzTemplates))
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDecoder(ts, &DecoderOptions{Limits: Limits{MaxSequenceLen: 64, MaxStringLen: 256, MaxByteVectorLen: 256}})
	if err != nil {
		t.Fatal(err)
	}
	return ts, d
}

// FuzzDecode decodes arbitrary bytes as a stream of messages. Invariants:
// no panic; every error has a code; a decoded message re-encoded from a
// fresh state decodes to the same values; every prefix of a message that
// decoded from a fresh state is "need more bytes".
func FuzzDecode(f *testing.F) {
	f.Add(unhex(f, "e0a33a6f19bd23512e71364611bc83aab047455ab60560f5b286cb84ff7a26ba998380055994c9fd80"))
	f.Add(unhex(f, "c081"))
	ts, d := fuzzDecoder(f)
	f.Add(fuzzMDSeed(f, ts))
	f.Fuzz(func(t *testing.T, b []byte) {
		d.Reset()
		var m Message
		for off := 0; off < len(b); {
			n, err := d.Decode(b[off:], &m)
			if err != nil {
				if Code(err) == "" {
					t.Fatalf("error without a code: %v", err)
				}
				break
			}
			if n <= 0 || n > len(b)-off {
				t.Fatalf("consumed %d of %d", n, len(b)-off)
			}
			off += n
		}
		// The first message alone, from a fresh state.
		fresh, _ := NewDecoder(ts, nil)
		n, err := fresh.Decode(b, &m)
		if err != nil {
			return
		}
		for cut := 0; cut < n; cut++ {
			d2, _ := NewDecoder(ts, nil)
			var m2 Message
			if _, err := d2.Decode(b[:cut], &m2); !errors.Is(err, ErrShort) {
				t.Fatalf("prefix %d of %d: %v", cut, n, err)
			}
		}
		enc, _ := NewEncoder(ts, nil)
		out, err := enc.Encode(nil, &m)
		if err != nil {
			// Some decodable inputs have no encoding from the same
			// state (a tail that shortens nothing is still fine, but
			// e.g. a delta of a value sent as 2^64 wraps): skip.
			return
		}
		var m2 Message
		if _, err := (mustNew(t, ts)).Decode(out, &m2); err != nil {
			t.Fatalf("re-encoded %x -> %x does not decode: %v", b[:n], out, err)
		}
		if !bytes.Equal(m.AppendJSON(nil), m2.AppendJSON(nil)) {
			t.Fatalf("re-encoded message differs:\n%s\n%s", m.AppendJSON(nil), m2.AppendJSON(nil))
		}
	})
}

func mustNew(t testing.TB, ts *Templates) *Decoder {
	d, err := NewDecoder(ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// FuzzLoadTemplates parses arbitrary template XML; when it loads, decoders
// and encoders build and decode a few bytes without panicking.
func FuzzLoadTemplates(f *testing.F) {
	f.Add([]byte(fuzzTemplates))
	f.Add([]byte(`<template name="T" id="1"><uInt32 name="X"><copy value="1"/></uInt32></template>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, err := ParseTemplates(data)
		if err != nil {
			var te *TemplateError
			if !errors.As(err, &te) {
				t.Fatalf("error is not a *TemplateError: %v", err)
			}
			return
		}
		d, err := NewDecoder(ts, nil)
		if err != nil {
			return
		}
		var m Message
		for _, in := range [][]byte{{0xc0, 0x81, 0x80, 0x80}, {0xff, 0x81, 0x81, 0x82, 0x83, 0x84}} {
			d.Reset()
			d.Decode(in, &m)
			m.AppendJSON(nil)
		}
		if _, err := NewEncoder(ts, nil); err != nil {
			t.Fatalf("decoder built but encoder failed: %v", err)
		}
	})
}

// FuzzWire checks the primitives: a value read back from its encoding is
// the same, and reads never run past the buffer.
func FuzzWire(f *testing.F) {
	f.Add([]byte{0x00, 0xc0}, uint64(1<<63), int64(-65))
	f.Fuzz(func(t *testing.T, b []byte, u uint64, i int64) {
		for _, read := range []func([]byte, int) (int, error){
			func(b []byte, o int) (int, error) { _, n, err := ReadUint32(b, o); return n, err },
			func(b []byte, o int) (int, error) { _, n, err := ReadUint64(b, o); return n, err },
			func(b []byte, o int) (int, error) { _, n, err := ReadInt32(b, o); return n, err },
			func(b []byte, o int) (int, error) { _, n, err := ReadInt64(b, o); return n, err },
			func(b []byte, o int) (int, error) { _, _, n, err := ReadNullableUint64(b, o); return n, err },
			func(b []byte, o int) (int, error) { _, _, n, err := ReadNullableInt64(b, o); return n, err },
			func(b []byte, o int) (int, error) { _, n, err := ReadASCII(b, o, 16); return n, err },
			func(b []byte, o int) (int, error) { _, _, n, err := ReadNullableASCII(b, o, 16); return n, err },
			func(b []byte, o int) (int, error) { _, n, err := ReadByteVector(b, o, 16); return n, err },
			func(b []byte, o int) (int, error) { _, n, err := ReadPMap(b, o, 4); return n, err },
		} {
			n, err := read(b, 0)
			if err == nil && (n <= 0 || n > len(b)) {
				t.Fatalf("next %d for %d bytes", n, len(b))
			}
		}
		if v, _, err := ReadUint64(AppendUint64(nil, u), 0); err != nil || v != u {
			t.Fatalf("uint64 %d -> %d %v", u, v, err)
		}
		if v, ok, _, err := ReadNullableInt64(AppendNullableInt64(nil, i, true), 0); err != nil || !ok || v != i {
			t.Fatalf("nullable int64 %d -> %d %v", i, v, err)
		}
		s := make([]byte, len(b))
		for k, c := range b {
			s[k] = c & 0x7f
		}
		if !badLeadingNUL(s) {
			got, _, err := ReadASCII(AppendASCII(nil, s), 0, len(s)+1)
			if err != nil || !bytes.Equal(AppendASCIIValue(nil, got), s) {
				t.Fatalf("ascii %q -> %q %v", s, got, err)
			}
		}
	})
}
