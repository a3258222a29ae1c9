package fast

import (
	"errors"
	"math"
	"testing"
)

func mustTemplates(t *testing.T, body string) *Templates {
	t.Helper()
	ts, err := ParseTemplates([]byte(`<templates xmlns="http://www.fixprotocol.org/ns/fast/td/1.1">` + body + `</templates>`))
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func mustDecoder(t *testing.T, ts *Templates, opts *DecoderOptions) *Decoder {
	t.Helper()
	d, err := NewDecoder(ts, opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// decodeOne decodes hex bytes that must hold exactly one message.
func decodeOne(t *testing.T, d *Decoder, m *Message, h string) {
	t.Helper()
	b := unhex(t, h)
	n, err := d.Decode(b, m)
	if err != nil || n != len(b) {
		t.Fatalf("decode %s: n=%d err=%v", h, n, err)
	}
}

// field returns the value of the named top-level field.
func field(t *testing.T, m *Message, name string) (*Value, int) {
	t.Helper()
	i := m.Index(name)
	if i < 0 {
		t.Fatalf("no field %s", name)
	}
	return &m.Values[i], i
}

func wantErr(t *testing.T, d *Decoder, m *Message, h, code string) *DecodeError {
	t.Helper()
	_, err := d.Decode(unhex(t, h), m)
	var de *DecodeError
	if !errors.As(err, &de) || de.Code != code || Code(err) != code {
		t.Fatalf("decode %s: err %v, want code %s", h, err, code)
	}
	return de
}

// Spec 6.3.8: tail with an "empty" previous value and its bit clear is
// absent, even with an initial value (rs-fastlib returns the initial value).
func TestSpecTailEmptyPreviousIsAbsent(t *testing.T) {
	ts := mustTemplates(t, `<template name="T" id="1"><string name="S" presence="optional"><tail value="ABC"/></string></template>`)
	d := mustDecoder(t, ts, nil)
	var m Message
	decodeOne(t, d, &m, "e081"+"80") // bit set, NULL: previous becomes empty
	if v, _ := field(t, &m, "S"); v.Present {
		t.Fatal("NULL tail is present")
	}
	decodeOne(t, d, &m, "80") // bit clear, previous empty
	if v, _ := field(t, &m, "S"); v.Present {
		t.Error("tail with empty previous value and clear bit is present; spec says absent")
	}
	// Undefined previous value and clear bit: the initial value.
	d.Reset()
	decodeOne(t, d, &m, "c081")
	if v, i := field(t, &m, "S"); !v.Present || string(m.Bytes(i)) != "ABC" {
		t.Error("tail with undefined previous value is not the initial value")
	}
	// A present tail replaces the end of the base.
	decodeOne(t, d, &m, "a0da") // "Z"
	if _, i := field(t, &m, "S"); string(m.Bytes(i)) != "ABZ" {
		t.Errorf("tail = %q, want ABZ", m.Bytes(i))
	}
}

// Spec 10.6.3: "\0" is 00 80 (mandatory) and 00 00 80 (optional).
func TestSpecNULString(t *testing.T) {
	ts := mustTemplates(t, `<template name="T" id="1"><string name="M"/><string name="O" presence="optional"/></template>`)
	d := mustDecoder(t, ts, nil)
	var m Message
	decodeOne(t, d, &m, "c081"+"0080"+"000080")
	for _, name := range []string{"M", "O"} {
		if v, i := field(t, &m, name); !v.Present || string(m.Bytes(i)) != "\x00" {
			t.Errorf("%s = %q, want NUL", name, m.Bytes(i))
		}
	}
	decodeOne(t, d, &m, "c081"+"80"+"0080")
	for _, name := range []string{"M", "O"} {
		if v, i := field(t, &m, name); !v.Present || len(m.Bytes(i)) != 0 {
			t.Errorf("%s = %q, want empty", name, m.Bytes(i))
		}
	}
	enc, _ := NewEncoder(ts, nil)
	tm, _ := ts.ByID(1)
	var in Message
	in.SetTemplate(tm)
	in.AddBytes([]byte{0})
	in.AddBytes([]byte{0})
	if b, _ := enc.Encode(nil, &in); string(b) != string(unhex(t, "c081"+"0080"+"000080")) {
		t.Errorf("encoded NULs as %x", b)
	}
}

// Spec 6.3.6: increment wraps from the type's maximum to its minimum.
func TestSpecIncrementWraps(t *testing.T) {
	ts := mustTemplates(t, `<template name="T" id="1"><uInt32 name="U"><increment/></uInt32><int32 name="I"><increment/></int32></template>`)
	d := mustDecoder(t, ts, nil)
	var m Message
	decodeOne(t, d, &m, "f0"+"81"+"0f7f7f7fff"+"077f7f7fff") // U = MaxUint32, I = MaxInt32
	decodeOne(t, d, &m, "80")
	if v, _ := field(t, &m, "U"); v.U != 0 {
		t.Errorf("uInt32 max + 1 = %d, want 0", v.U)
	}
	if v, _ := field(t, &m, "I"); v.Int() != math.MinInt32 {
		t.Errorf("int32 max + 1 = %d, want MinInt32", v.Int())
	}
}

// Decimal initial values are normalised; values received by copy keep the
// transmitted mantissa and exponent.
func TestSpecDecimalNormalisation(t *testing.T) {
	ts := mustTemplates(t, `<template name="T" id="1"><decimal name="C"><constant value="12000"/></decimal>
		<decimal name="P"><copy value="1.50"/></decimal></template>`)
	d := mustDecoder(t, ts, nil)
	var m Message
	decodeOne(t, d, &m, "c081")
	if v, _ := field(t, &m, "C"); int64(v.U) != 12 || v.Exp != 3 {
		t.Errorf("constant 12000 = %d e%d, want 12 e3", int64(v.U), v.Exp)
	}
	if v, _ := field(t, &m, "P"); int64(v.U) != 15 || v.Exp != -1 {
		t.Errorf("copy initial 1.50 = %d e%d, want 15 e-1", int64(v.U), v.Exp)
	}
	decodeOne(t, d, &m, "a0"+"81"+"09b0") // exponent 1, mantissa 1200: not normalised
	if v, _ := field(t, &m, "P"); int64(v.U) != 1200 || v.Exp != 1 {
		t.Errorf("copied 1200e1 = %d e%d", int64(v.U), v.Exp)
	}
	decodeOne(t, d, &m, "80")
	if v, _ := field(t, &m, "P"); int64(v.U) != 1200 || v.Exp != 1 {
		t.Errorf("previous 1200e1 = %d e%d", int64(v.U), v.Exp)
	}
}

// Unicode delta and tail work on the UTF-8 bytes.
func TestSpecUnicodeDeltaTailOnBytes(t *testing.T) {
	ts := mustTemplates(t, `<template name="T" id="1"><string name="D" charset="unicode"><delta/></string>
		<string name="L" charset="unicode"><tail/></string></template>`)
	d := mustDecoder(t, ts, nil)
	var m Message
	// D: sub 0, append "hé" (68 c3 a9); L: tail "hé".
	decodeOne(t, d, &m, "e081"+"80"+"83"+"68c3a9"+"83"+"68c3a9")
	// D: remove 1 byte from the end (the second byte of é), append a9 again.
	// L: tail of one byte replaces the last byte.
	decodeOne(t, d, &m, "a0"+"81"+"81"+"a9"+"81"+"aa")
	if _, i := field(t, &m, "D"); string(m.Bytes(i)) != "hé" {
		t.Errorf("unicode delta = %q", m.Bytes(i))
	}
	if _, i := field(t, &m, "L"); string(m.Bytes(i)) != "h\xc3\xaa" {
		t.Errorf("unicode tail = %q", m.Bytes(i))
	}
}

// Nullable values may exceed the type by one: optional uInt32 max is
// 10 00 00 00 80.
func TestSpecNullableMax(t *testing.T) {
	ts := mustTemplates(t, `<template name="T" id="1"><uInt32 name="U" presence="optional"/></template>`)
	d := mustDecoder(t, ts, nil)
	var m Message
	decodeOne(t, d, &m, "c081"+"1000000080")
	if v, _ := field(t, &m, "U"); !v.Present || v.U != math.MaxUint32 {
		t.Errorf("optional uInt32 max = %d %v", v.U, v.Present)
	}
	wantErr(t, mustDecoder(t, ts, nil), &m, "c081"+"1000000081", "D2")
}

// Overlong presence maps and integers are accepted (R-class); 11-byte
// integers that overflow 64 bits are D2.
func TestSpecOverlong(t *testing.T) {
	ts := mustTemplates(t, `<template name="T" id="1"><uInt64 name="U"/><uInt32 name="C"><copy value="5"/></uInt32></template>`)
	d := mustDecoder(t, ts, nil)
	var m Message
	decodeOne(t, d, &m, "40"+"00"+"80"+"81"+"000081") // pmap 3 bytes, TID, overlong 1
	if v, _ := field(t, &m, "U"); v.U != 1 {
		t.Errorf("overlong integer = %d", v.U)
	}
	if v, _ := field(t, &m, "C"); v.U != 5 {
		t.Errorf("copy after overlong pmap = %d", v.U)
	}
	de := wantErr(t, mustDecoder(t, ts, nil), &m, "c081"+"0000000000000000000081", "D2")
	if de.Offset != 2 || de.Field != "U" || de.TemplateID != 1 {
		t.Errorf("D2 context = %+v", de)
	}
	wantErr(t, mustDecoder(t, ts, nil), &m, "c081"+"02000000000000000080", "D2")
}

// The global dictionary is keyed by field name across templates and nesting
// levels; individual decimal operators get keys derived from the decimal's
// name; template and named dictionaries scope entries.
func TestSpecDictionaryScopes(t *testing.T) {
	ts := mustTemplates(t, `
<template name="A" id="1"><uInt32 name="X"><copy/></uInt32>
  <decimal name="Px"><exponent><copy/></exponent><mantissa><copy/></mantissa></decimal>
  <uInt32 name="Y" dictionary="template"><copy/></uInt32></template>
<template name="B" id="2"><sequence name="S"><length name="N"/><uInt32 name="X"><copy/></uInt32></sequence>
  <decimal name="Px"><exponent><copy/></exponent><mantissa><delta/></mantissa></decimal>
  <uInt32 name="Y" dictionary="template"><copy value="9"/></uInt32></template>`)
	d := mustDecoder(t, ts, nil)
	var m Message
	// A: X=7, Px exponent -2 mantissa 100, Y=3.
	decodeOne(t, d, &m, "fc81"+"87"+"fe"+"00e4"+"83")
	// B: one element whose X is copied from A's top-level X; Px exponent
	// copied from A's (key Px/exponent); Y in B's template dictionary is
	// undefined, so its initial value 9.
	decodeOne(t, d, &m, "c082"+"81"+"80"+"81")
	first, _ := m.Children(m.Index("S"))
	if x := &m.Values[first+1]; x.U != 7 {
		t.Errorf("X in B's sequence = %d, want 7 from A", x.U)
	}
	if v, _ := field(t, &m, "Px"); v.Exp != -2 || int64(v.U) != 101 {
		t.Errorf("B.Px = %d e%d, want 101 e-2", int64(v.U), v.Exp)
	}
	if v, _ := field(t, &m, "Y"); v.U != 9 {
		t.Errorf("B.Y = %d, want 9 (template dictionary)", v.U)
	}
}

func TestResetPolicies(t *testing.T) {
	ts := mustTemplates(t, `<template name="T" id="1"><uInt32 name="X"><copy value="1"/></uInt32></template>
		<template name="R" id="2" reset="Y"><uInt32 name="X"><copy value="1"/></uInt32></template>`)
	var m Message
	x := func() uint64 { v, _ := field(t, &m, "X"); return v.U }

	d := mustDecoder(t, ts, nil) // never
	decodeOne(t, d, &m, "e08185")
	decodeOne(t, d, &m, "80")
	if x() != 5 {
		t.Errorf("never: X = %d, want 5", x())
	}
	d.Reset() // per block: the caller resets
	decodeOne(t, d, &m, "c081")
	if x() != 1 {
		t.Errorf("after Reset: X = %d, want initial 1", x())
	}
	d.Reset()
	if _, err := d.Decode(unhex(t, "80"), &m); Code(err) != "D5" {
		t.Errorf("Reset forgets the template id: got %v", err)
	}

	d = mustDecoder(t, ts, &DecoderOptions{ResetEachMessage: true})
	decodeOne(t, d, &m, "e08185")
	decodeOne(t, d, &m, "c081")
	if x() != 1 {
		t.Errorf("per message: X = %d, want 1", x())
	}

	d = mustDecoder(t, ts, nil)
	decodeOne(t, d, &m, "e08185")
	decodeOne(t, d, &m, "c082") // reset="Y" template
	if x() != 1 {
		t.Errorf("reset template: X = %d, want 1", x())
	}

	d = mustDecoder(t, ts, nil)
	decodeOne(t, d, &m, "e08185")
	decodeOne(t, d, &m, "c0f8") // undeclared template 120: reset
	if m.TemplateID != ResetTemplateID || m.Template != nil || len(m.Values) != 0 {
		t.Errorf("reset message = %+v", m)
	}
	decodeOne(t, d, &m, "c081")
	if x() != 1 {
		t.Errorf("after template 120: X = %d, want 1", x())
	}
	if s := d.Stats(); s.Messages != 3 || s.Resets != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestDecodeErrors(t *testing.T) {
	ts := mustTemplates(t, `
<template name="C" id="1"><uInt32 name="X"><copy/></uInt32></template>
<template name="O" id="2"><uInt32 name="X" presence="optional"><copy/></uInt32></template>
<template name="D" id="3"><string name="S"><delta/></string></template>
<template name="E" id="4"><decimal name="P"/></template>
<template name="R" id="5"><int32 name="I"><delta value="2147483647"/></int32></template>`)
	var m Message
	for _, tc := range []struct{ hex, code string }{
		{"c081", "D5"},              // copy, no previous, no initial value
		{"c0f7", "D9"},              // template 119
		{"c0" + "0f7f7f7ffe", "D9"}, // template 2^32-2: negative as a 32-bit int
		{"c083" + "8281", "D7"},     // delta removes 2 bytes from ""
		{"c084" + "c081", "R1"},     // exponent 64
		{"c085" + "81", "R4"},       // MaxInt32 + 1
		{"80", "D5"},                // no previous template id
		{"c083" + "80" + "7f7f7f7f7f7f7f7f7f7f", "LIMIT"}, // string longer than MaxStringLen... or never stopping
	} {
		d := mustDecoder(t, ts, &DecoderOptions{Limits: Limits{MaxStringLen: 8}})
		wantErr(t, d, &m, tc.hex, tc.code)
	}
	// D6: a mandatory copy whose shared previous value is empty.
	d := mustDecoder(t, ts, nil)
	decodeOne(t, d, &m, "e08280") // O: X NULL -> previous empty
	de := wantErr(t, d, &m, "c081", "D6")
	if de.TemplateID != 1 || de.Field != "X" || de.Offset != 2 {
		t.Errorf("D6 context %+v", de)
	}
	// Errors that may have corrupted the state are sticky until Reset.
	if _, err := d.Decode(unhex(t, "e08181"), &m); Code(err) != "D6" {
		t.Errorf("error not sticky: %v", err)
	}
	d.Reset()
	decodeOne(t, d, &m, "e08181")
	if s := d.Stats(); s.Errors != 1 {
		t.Errorf("stats %+v", s)
	}
}

// A message cut short is "need more bytes": not sticky, and the dictionary
// is left as it was, so decoding it again once complete gives the right
// values.
func TestNeedMoreBytesLeavesStateUnchanged(t *testing.T) {
	ts := mustTemplates(t, `<template name="T" id="1" reset="Y"><uInt32 name="X"><increment value="1"/></uInt32>
		<string name="S"><copy/></string><uInt64 name="Z"/></template>
		<template name="U" id="2"><uInt32 name="X"><increment value="1"/></uInt32><string name="S"><copy/></string><uInt64 name="Z"/></template>`)
	d := mustDecoder(t, ts, nil)
	var m Message
	decodeOne(t, d, &m, "f082"+"85"+"41c2"+"81") // U: X=5 S="AB" Z=1
	full := unhex(t, "c082"+"0182")              // U: X=6 (increment), S="AB" (copy), Z=130
	for cut := 0; cut < len(full); cut++ {
		_, err := d.Decode(full[:cut], &m)
		if !errors.Is(err, ErrShort) || Code(err) != "SHORT" {
			t.Fatalf("cut %d: %v", cut, err)
		}
	}
	decodeOne(t, d, &m, "c082"+"0182")
	if v, _ := field(t, &m, "X"); v.U != 6 {
		t.Errorf("X = %d after retries, want 6", v.U)
	}
	// A reset template cut short does not reset.
	cutReset := unhex(t, "f081"+"81"+"5ac1"+"81") // T: reset, X=1, S="ZA", Z=1
	for cut := 0; cut < len(cutReset); cut++ {
		if _, err := d.Decode(cutReset[:cut], &m); !errors.Is(err, ErrShort) {
			t.Fatal(err)
		}
	}
	decodeOne(t, d, &m, "c082"+"81")
	if v, i := field(t, &m, "S"); v.U != 0 || string(m.Bytes(i)) != "AB" {
		t.Errorf("S = %q after cut reset template", m.Bytes(i))
	}
	if v, _ := field(t, &m, "X"); v.U != 7 {
		t.Errorf("X = %d, want 7", v.U)
	}
	if s := d.Stats(); s.Short != uint64(len(full)+len(cutReset)) || s.Errors != 0 {
		t.Errorf("stats %+v", s)
	}
}

func TestLimits(t *testing.T) {
	ts := mustTemplates(t, `<template name="T" id="1"><sequence name="S"><length name="N"/><byteVector name="B"/></sequence></template>
		<template name="G" id="2"><group name="A"><group name="B"><group name="C"><uInt32 name="X"/></group></group></group></template>`)
	var m Message
	for _, tc := range []struct {
		hex    string
		limits Limits
	}{
		{"c081" + "85", Limits{MaxSequenceLen: 4}},
		{"c081" + "81" + "85" + "0102030405", Limits{MaxByteVectorLen: 4}},
		{"c081" + "81" + "0f7f7f7fff", Limits{}}, // a 4 GB byte vector: a bound, not an allocation
		{"4000000081", Limits{MaxPMapBytes: 3}},
		{"c082" + "81", Limits{MaxDepth: 2}},
		{"c081" + "8a" + "80808080808080808080", Limits{MaxValues: 8}},
	} {
		d := mustDecoder(t, ts, &DecoderOptions{Limits: tc.limits})
		de := wantErr(t, d, &m, tc.hex, "LIMIT")
		if !errors.Is(de, ErrLimit) || d.Stats().LimitHits != 1 {
			t.Errorf("%s: %v, stats %+v", tc.hex, de, d.Stats())
		}
	}
}

func TestDynamicTemplateRef(t *testing.T) {
	ts := mustTemplates(t, `<template name="Outer" id="1"><uInt32 name="A"/><templateRef/></template>
		<template name="Inner" id="2"><string name="S"><copy/></string></template>`)
	d := mustDecoder(t, ts, nil)
	var m Message
	decodeOne(t, d, &m, "c081"+"85"+"e082"+"41c2")
	if len(m.Values) != 3 || m.Values[1].Kind != KindTemplateRef || m.Values[1].U != 2 || string(m.Bytes(2)) != "AB" {
		t.Errorf("values %+v", m.Values)
	}
	if got := string(m.AppendJSON(nil)); got != `{"template":1,"name":"Outer","fields":{"A":5,"S":"AB"}}` {
		t.Errorf("JSON %s", got)
	}
}

func TestAppendDecimal(t *testing.T) {
	for _, tc := range []struct {
		m    int64
		e    int32
		want string
	}{
		{12345, -2, "123.45"}, {12, 3, "12000"}, {-5, -3, "-0.005"}, {0, 0, "0"}, {0, 5, "0"},
		{math.MinInt64, 0, "-9223372036854775808"}, {7, -1, "0.7"}, {-943, -1, "-94.3"},
	} {
		if got := string(AppendDecimal(nil, tc.m, tc.e)); got != tc.want {
			t.Errorf("AppendDecimal(%d, %d) = %s, want %s", tc.m, tc.e, got, tc.want)
		}
	}
}

// A message built with the Add methods renders like its decoding once
// encoded (Encode links composite values), and walking values a caller
// built badly still terminates.
func TestBuiltMessageRendering(t *testing.T) {
	ts := mustTemplates(t, `<template name="T" id="1"><sequence name="S"><length name="N"/><uInt32 name="X"/>
		<group name="G" presence="optional"><string name="Y"/></group></sequence><int64 name="Z"/></template>`)
	tm, _ := ts.ByID(1)
	var in Message
	in.SetTemplate(tm)
	in.AddSequence(2)
	in.AddElement()
	in.AddUint(1)
	in.AddGroup()
	in.AddBytes([]byte("a"))
	in.AddElement()
	in.AddUint(2)
	in.AddAbsent()
	in.AddInt(-3)
	enc, _ := NewEncoder(ts, nil)
	b, err := enc.Encode(nil, &in)
	if err != nil {
		t.Fatal(err)
	}
	var out Message
	if _, err := mustDecoder(t, ts, nil).Decode(b, &out); err != nil {
		t.Fatal(err)
	}
	want := `{"template":1,"name":"T","fields":{"S":[{"X":1,"G":{"Y":"a"}},{"X":2}],"Z":-3}}`
	if got := string(in.AppendJSON(nil)); got != want {
		t.Errorf("built:   %s", got)
	}
	if got := string(out.AppendJSON(nil)); got != want {
		t.Errorf("decoded: %s", got)
	}
	for i := range in.Values {
		in.Values[i].End = 0
	}
	in.AppendJSON(nil) // must terminate
	if in.Index("nope") != -1 {
		t.Error("Index found a missing field")
	}
}
