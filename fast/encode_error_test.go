package fast_test

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/tickwire/tickwire/fast"
)

// kindsTemplates has one mandatory field of every kind, and an optional
// copy of each in template 6.
const kindsTemplates = `<templates>
<template name="Kinds" id="5">
 <uInt32 name="U32"/><int32 name="I32"/><uInt64 name="U64"/><int64 name="I64"/>
 <decimal name="D"/><decimal name="DX"><exponent><copy/></exponent><mantissa><delta/></mantissa></decimal>
 <string name="A"/><string name="S" charset="unicode"/><byteVector name="B"/>
 <sequence name="Q"><length name="N"/><uInt32 name="X"/></sequence>
 <group name="G"><uInt32 name="Y"/></group>
</template>
<template name="OptKinds" id="6">
 <uInt32 name="U32" presence="optional"/><int32 name="I32" presence="optional"/>
 <uInt64 name="U64" presence="optional"/><int64 name="I64" presence="optional"/>
 <decimal name="D" presence="optional"/>
 <decimal name="DX" presence="optional"><exponent><copy/></exponent><mantissa><delta/></mantissa></decimal>
 <string name="A" presence="optional"/><string name="S" charset="unicode" presence="optional"/>
 <byteVector name="B" presence="optional"/>
 <sequence name="Q" presence="optional"><length name="N"/><uInt32 name="X"/></sequence>
 <group name="G" presence="optional"><uInt32 name="Y"/></group>
</template>
<template name="Nest" id="7">
 <sequence name="Legs"><length name="NoLegs"/><uInt32 name="Qty"/>
  <group name="Inst" presence="optional"><string name="Sym"/><int32 name="Px"/></group></sequence>
 <templateRef/>
 <int64 name="Tail"/>
</template>
<template name="Leaf" id="8"><uInt32 name="L"/></template>
<template name="Ops" id="9">
 <uInt32 name="C"><constant value="9"/></uInt32>
 <string name="T"><tail/></string>
</template>
</templates>`

var kindsFields = []string{"U32", "I32", "U64", "I64", "D", "DX", "A", "S", "B", "Q", "G"}

// validValue appends a valid value of the field kindsFields[k].
func validValue(m *fast.Message, k int) {
	switch kindsFields[k] {
	case "U32", "U64":
		m.AddUint(1)
	case "I32", "I64":
		m.AddInt(-1)
	case "D", "DX":
		m.AddDecimal(125, -2)
	case "A", "S", "B":
		m.AddBytes([]byte("a"))
	case "Q":
		m.AddSequence(1)
		m.AddElement()
		m.AddUint(2)
	case "G":
		m.AddGroup()
		m.AddUint(3)
	}
}

// wrongValues are the values each Add method builds, composite ones with
// valid members.
var wrongValues = []struct {
	add string
	fn  func(*fast.Message)
}{
	{"AddUint", func(m *fast.Message) { m.AddUint(65) }},
	{"AddInt", func(m *fast.Message) { m.AddInt(7) }},
	{"AddDecimal", func(m *fast.Message) { m.AddDecimal(12345, -2) }},
	{"AddBytes", func(m *fast.Message) { m.AddBytes([]byte("7")) }},
	{"AddSequence", func(m *fast.Message) { m.AddSequence(1); m.AddElement(); m.AddUint(2) }},
	{"AddGroup", func(m *fast.Message) { m.AddGroup(); m.AddUint(3) }},
	{"AddElement", func(m *fast.Message) { m.AddElement() }},
	{"AddTemplateRef", func(m *fast.Message) { m.AddTemplateRef(8); m.AddUint(4) }},
	{"AddAbsent", func(m *fast.Message) { m.AddAbsent() }},
}

// takesAdd lists the Add methods each field takes.
var takesAdd = map[string]string{
	"U32": "AddUint AddInt", "I32": "AddUint AddInt", "U64": "AddUint AddInt", "I64": "AddUint AddInt",
	"D": "AddDecimal", "DX": "AddDecimal", "A": "AddBytes", "S": "AddBytes", "B": "AddBytes",
	"Q": "AddSequence", "G": "AddGroup",
}

// wantText is the field's kind as the error's Want names it.
var wantText = map[string]string{
	"U32": "uInt32", "I32": "int32", "U64": "uInt64", "I64": "int64", "D": "decimal", "DX": "decimal",
	"A": "ascii string", "S": "unicode string", "B": "byteVector", "Q": "sequence", "G": "group",
}

func kindsEncoder(t *testing.T) (*fast.Templates, *fast.Encoder) {
	t.Helper()
	ts, err := fast.ParseTemplates([]byte(kindsTemplates))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := fast.NewEncoder(ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ts, enc
}

// checkEncodeError checks that err is an *EncodeError for template tid
// (named name) and field, wrapping cause, whose text names both and holds
// each of texts, with one "fast:" prefix.
func checkEncodeError(t *testing.T, what string, err error, tid uint32, name, field string, cause error, texts ...string) {
	t.Helper()
	var ee *fast.EncodeError
	if !errors.As(err, &ee) {
		t.Errorf("%s: %v (%T), want an *EncodeError", what, err, err)
		return
	}
	if !errors.Is(err, cause) {
		t.Errorf("%s: %v does not wrap %v", what, err, cause)
	}
	if ee.TemplateID != tid || ee.Template != name || ee.Field != field {
		t.Errorf("%s: template %d %q field %q, want %d %q %q", what, ee.TemplateID, ee.Template, ee.Field, tid, name, field)
	}
	msg := err.Error()
	if field != "" {
		texts = append(texts, "field "+field)
	}
	for _, s := range append(texts, name) {
		if !strings.Contains(msg, s) {
			t.Errorf("%s: %q does not say %q", what, msg, s)
		}
	}
	if n := strings.Count(msg, "fast:"); n != 1 {
		t.Errorf("%s: %q has %d \"fast:\"", what, msg, n)
	}
}

// TestEncodeWrongKind gives every field kind, mandatory and optional, the
// value of every Add method: those it takes encode, the others fail with an
// error naming the field, the template, the kind the field takes and what
// it was given.
func TestEncodeWrongKind(t *testing.T) {
	ts, enc := kindsEncoder(t)
	for _, tid := range []uint32{5, 6} {
		tm, _ := ts.ByID(tid)
		for k, name := range kindsFields {
			for _, w := range wrongValues {
				var m fast.Message
				m.SetTemplate(tm)
				for j := range kindsFields {
					if j == k {
						w.fn(&m)
					} else {
						validValue(&m, j)
					}
				}
				enc.Reset()
				_, err := enc.Encode(nil, &m)
				what := tm.Name + "." + name + " given " + w.add
				kind := wantText[name]
				if tid == 6 {
					kind = "optional " + kind
				}
				switch {
				case strings.Contains(takesAdd[name], w.add), w.add == "AddAbsent" && tid == 6:
					if err != nil {
						t.Errorf("%s: %v", what, err)
					}
				case w.add == "AddAbsent":
					checkEncodeError(t, what, err, tid, tm.Name, name, fast.ErrMissingValue,
						"want "+kind, "got absent (AddAbsent)")
				default:
					checkEncodeError(t, what, err, tid, tm.Name, name, fast.ErrWrongKind,
						"want "+kind, "("+w.add+")")
				}
			}
		}
	}
}

// TestEncodeRange gives integer fields values that do not fit their type.
func TestEncodeRange(t *testing.T) {
	ts, enc := kindsEncoder(t)
	tm, _ := ts.ByID(5)
	for _, tc := range []struct {
		field string
		fn    func(*fast.Message)
		text  string
	}{
		{"U32", func(m *fast.Message) { m.AddUint(1 << 32) }, "4294967296 out of range for uInt32"},
		{"U32", func(m *fast.Message) { m.AddInt(-1) }, "-1 out of range for uInt32"},
		{"I32", func(m *fast.Message) { m.AddInt(math.MaxInt32 + 1) }, "2147483648 out of range for int32"},
		{"I32", func(m *fast.Message) { m.AddInt(math.MinInt32 - 1) }, "-2147483649 out of range for int32"},
		{"I32", func(m *fast.Message) { m.AddUint(1 << 31) }, "2147483648 out of range for int32"},
		{"U64", func(m *fast.Message) { m.AddInt(-5) }, "-5 out of range for uInt64"},
		{"I64", func(m *fast.Message) { m.AddUint(1 << 63) }, "9223372036854775808 out of range for int64"},
		{"D", func(m *fast.Message) { m.AddDecimal(1, 64) }, "64 out of range for decimal exponent (-63..63)"},
		{"DX", func(m *fast.Message) { m.AddDecimal(1, -64) }, "-64 out of range for decimal exponent (-63..63)"},
		{"A", func(m *fast.Message) { m.AddBytes([]byte("é")) }, `"é" out of range for ascii string (7-bit characters)`},
		{"Q", func(m *fast.Message) { m.AddSequence(-1) }, "length -1 out of range for its length, a uInt32"},
		{"Q", func(m *fast.Message) {
			if strconv.IntSize == 32 {
				m.AddSequence(-2) // int cannot hold 1<<32 here; another bad length
				return
			}
			shift := 32
			m.AddSequence(1 << shift)
		}, map[bool]string{true: "length -2 out of range", false: "length 4294967296 out of range"}[strconv.IntSize == 32]},
	} {
		var m fast.Message
		m.SetTemplate(tm)
		for j, name := range kindsFields {
			if name == tc.field {
				tc.fn(&m)
			} else {
				validValue(&m, j)
			}
		}
		enc.Reset()
		_, err := enc.Encode(nil, &m)
		cause := fast.ErrRange
		if tc.field == "D" || tc.field == "DX" {
			cause = fast.ErrExponent
		}
		checkEncodeError(t, tc.text, err, 5, "Kinds", tc.field, cause, tc.text)
	}
	// The edges fit.
	var m fast.Message
	m.SetTemplate(tm)
	m.AddUint(math.MaxUint32)
	m.AddInt(math.MinInt32)
	m.AddUint(math.MaxUint64)
	m.AddUint(math.MaxInt64)
	for j := 4; j < len(kindsFields); j++ {
		validValue(&m, j)
	}
	if _, err := enc.Encode(nil, &m); err != nil {
		t.Errorf("edge values: %v", err)
	}
}

// TestEncodeStructure covers values that do not line up with the template:
// a sequence short of elements, a message that ends early or has values
// left over, errors inside sequences, groups and dynamic templateRefs
// (reported with the field's path), and operator errors.
func TestEncodeStructure(t *testing.T) {
	ts, enc := kindsEncoder(t)
	nest, _ := ts.ByID(7)
	leg := func(m *fast.Message, qty uint64, sym string) {
		m.AddElement()
		m.AddUint(qty)
		if sym == "" {
			m.AddAbsent()
			return
		}
		m.AddGroup()
		m.AddBytes([]byte(sym))
		m.AddInt(-5)
	}
	for _, tc := range []struct {
		name  string
		build func(*fast.Message)
		field string
		cause error
		texts []string
	}{
		{"valid", func(m *fast.Message) {
			m.AddSequence(2)
			leg(m, 1, "A")
			leg(m, 2, "")
			m.AddTemplateRef(8)
			m.AddUint(4)
			m.AddInt(9)
		}, "", nil, nil},
		{"element missing, next field follows", func(m *fast.Message) {
			m.AddSequence(3)
			leg(m, 1, "A")
			leg(m, 2, "")
			m.AddTemplateRef(8)
			m.AddUint(4)
			m.AddInt(9)
		}, "Legs", fast.ErrMissingElement,
			[]string{"sequence has fewer elements than its length", "want element 3 of 3 (AddElement)", "got templateRef to template 8 (AddTemplateRef)"}},
		{"element missing at the end", func(m *fast.Message) {
			m.AddSequence(2)
			leg(m, 1, "A")
		}, "Legs", fast.ErrMissingElement, []string{"want element 2 of 2 (AddElement)", "got end of message"}},
		{"message ends early", func(m *fast.Message) {
			m.AddSequence(0)
			m.AddTemplateRef(8)
			m.AddUint(4)
		}, "Tail", fast.ErrMissingValue, []string{"value missing: want int64 (AddUint or AddInt), got end of message"}},
		{"extra values", func(m *fast.Message) {
			m.AddSequence(1)
			leg(m, 1, "")
			leg(m, 2, "")
			m.AddTemplateRef(8)
			m.AddUint(4)
			m.AddInt(9)
		}, "templateRef", fast.ErrWrongKind, []string{"want templateRef (AddTemplateRef), got sequence element (AddElement)"}},
		{"values past the end", func(m *fast.Message) {
			m.AddSequence(0)
			m.AddTemplateRef(8)
			m.AddUint(4)
			m.AddInt(9)
			m.AddUint(1)
			m.AddUint(2)
		}, "", fast.ErrExtraValue, []string{"1 (AddUint) and 1 more value past the template's last field"}},
		{"inside a group in an element", func(m *fast.Message) {
			m.AddSequence(2)
			leg(m, 1, "A")
			m.AddElement()
			m.AddUint(2)
			m.AddGroup()
			m.AddBytes([]byte("B"))
			m.AddBytes([]byte("5"))
			m.AddTemplateRef(8)
			m.AddUint(4)
			m.AddInt(9)
		}, "Legs[1].Inst.Px", fast.ErrWrongKind, []string{`want int32 (AddUint or AddInt), got bytes "5" (AddBytes)`}},
		{"inside a dynamic templateRef", func(m *fast.Message) {
			m.AddSequence(0)
			m.AddTemplateRef(8)
			m.AddInt(-4)
			m.AddInt(9)
		}, "templateRef(Leaf).L", fast.ErrRange, []string{"-4 out of range for uInt32"}},
		{"unknown template in a templateRef", func(m *fast.Message) {
			m.AddSequence(0)
			m.AddTemplateRef(99)
			m.AddInt(9)
		}, "templateRef", fast.ErrUnknownTemplate, []string{"unknown template id: got templateRef to template 99"}},
	} {
		var m fast.Message
		m.SetTemplate(nest)
		tc.build(&m)
		enc.Reset()
		_, err := enc.Encode(nil, &m)
		if tc.cause == nil {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		checkEncodeError(t, tc.name, err, 7, "Nest", tc.field, tc.cause, tc.texts...)
	}

	ops, _ := ts.ByID(9)
	var m fast.Message
	m.SetTemplate(ops)
	m.AddUint(8)
	m.AddBytes([]byte("ab"))
	_, err := enc.Encode(nil, &m)
	checkEncodeError(t, "constant", err, 9, "Ops", "C", fast.ErrNotEncodable,
		`value not encodable with its operator: want uInt32 with operator constant "9", got 8 (AddUint)`)

	// The template id itself.
	m.Reset()
	m.TemplateID = 77
	_, err = enc.Encode(nil, &m)
	var ee *fast.EncodeError
	if !errors.As(err, &ee) || !errors.Is(err, fast.ErrUnknownTemplate) || err.Error() != "fast: template id 77: unknown template id" {
		t.Errorf("unknown template: %v", err)
	}
}

// TestEncodeDecodedIntoBuilt decodes into a Message that the Add methods
// built before: the decoder's values replace the built ones entirely, so
// the message re-encodes to the same bytes.
func TestEncodeDecodedIntoBuilt(t *testing.T) {
	ts, enc := kindsEncoder(t)
	tm, _ := ts.ByID(5)
	var m fast.Message
	m.SetTemplate(tm)
	for j := range kindsFields {
		validValue(&m, j)
	}
	b, err := enc.Encode(nil, &m)
	if err != nil {
		t.Fatal(err)
	}
	// Build a message of other kinds into the same storage, then decode.
	m.SetTemplate(tm)
	for range 20 {
		m.AddBytes([]byte("x"))
	}
	dec, _ := fast.NewDecoder(ts, nil)
	if _, err := dec.Decode(b, &m); err != nil {
		t.Fatal(err)
	}
	enc.Reset()
	again, err := enc.Encode(nil, &m)
	if err != nil || string(again) != string(b) {
		t.Errorf("re-encoded %x, %v; want %x", again, err, b)
	}
}
