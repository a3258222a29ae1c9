package fast

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tickwire/tickwire/internal/shareddata"
)

func TestLoadSharedTemplateFiles(t *testing.T) {
	dir := shareddata.Path(t, "fast-vectors")
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.xml"))
	files = append(files, filepath.Join(filepath.Dir(dir), "sse", "3201_legacy_reconstructed.xml"))
	loaded := 0
	for _, f := range files {
		if strings.HasSuffix(f, "data.xml") {
			continue // FPL expected values, not templates
		}
		ts, err := LoadTemplatesFile(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(ts.List) == 0 {
			t.Errorf("%s: no templates", f)
		}
		loaded++
	}
	if loaded < 10 {
		t.Errorf("loaded only %d template files", loaded)
	}
}

func TestTemplateModel(t *testing.T) {
	ts, err := ParseTemplates([]byte(`<?xml version="1.0"?>
<templates xmlns="http://www.fixprotocol.org/ns/fast/td/1.1" dictionary="outer">
  <template name="Base"><uInt32 name="A"><copy/></uInt32></template>
  <template name="T" id="7" reset="Y" decimalPlaces="3">
    <typeRef name="Ty"/>
    <decimal name="Px" presence="optional"><exponent><copy value="-2"/></exponent><mantissa><delta/></mantissa></decimal>
    <decimal name="Q"><delta value="12000"/></decimal>
    <sequence name="S" presence="optional" dictionary="template">
      <length name="N"><increment key="k"/></length>
      <string name="Str" charset="unicode"><tail value="ab"/></string>
    </sequence>
    <templateRef name="Base"/>
    <templateRef/>
    <uInt64 name="X" decimalPlaces="2"><copy dictionary="named"/></uInt64>
  </template>
</templates>`))
	if err != nil {
		t.Fatal(err)
	}
	tm, ok := ts.ByID(7)
	if !ok || tm.Name != "T" || !tm.Reset || tm.TypeRef != "Ty" || tm.Dictionary != "outer" {
		t.Fatalf("template = %+v", tm)
	}
	if len(tm.Attrs) != 1 || tm.Attrs[0] != (Attr{"decimalPlaces", "3"}) {
		t.Errorf("unknown template attrs = %v", tm.Attrs)
	}
	px := tm.Fields[0]
	if px.Kind != KindDecimal || !px.Optional || px.Exponent.Kind != OpCopy || px.Exponent.Value != "-2" ||
		px.Mantissa.Kind != OpDelta || px.Exponent.Key != "Px/exponent" || px.Mantissa.Dictionary != "outer" {
		t.Errorf("Px = %+v exp=%+v mant=%+v", px, px.Exponent, px.Mantissa)
	}
	init, err := parseInitial(KindDecimal, tm.Fields[1].Op.Value)
	if err != nil || int64(init.u) != 12 || init.exp != 3 {
		t.Errorf("decimal 12000 normalised to %d e%d, %v", int64(init.u), init.exp, err)
	}
	s := tm.Fields[2]
	if s.Kind != KindSequence || s.Length.Name != "N" || s.Length.Op.Kind != OpIncrement || s.Length.Op.Key != "k" ||
		s.Length.Op.Dictionary != "template" || !s.Length.Optional || s.Fields[0].Kind != KindUnicode ||
		s.Fields[0].Op.Kind != OpTail || s.Fields[0].Op.Dictionary != "template" {
		t.Errorf("S = %+v len=%+v", s, s.Length)
	}
	if r := tm.Fields[3]; r.Kind != KindTemplateRef || r.Ref != "Base" {
		t.Errorf("static ref = %+v", r)
	}
	if r := tm.Fields[4]; r.Kind != KindTemplateRef || r.Ref != "" {
		t.Errorf("dynamic ref = %+v", r)
	}
	if x := tm.Fields[5]; x.Op.Dictionary != "named" || len(x.Attrs) != 1 {
		t.Errorf("X = %+v", x)
	}
	if _, ok := ts.ByName("Base"); !ok {
		t.Error("Base not found by name")
	}
}

func TestTemplateErrors(t *testing.T) {
	for _, tc := range []struct {
		xml, want string
		line      int
	}{
		{"<templates>\n<template name=\"a\">\n<uInt32 name=\"x\"><increment/></uInt32>\n<string name=\"s\"><increment/></string></template></templates>", "increment on a string", 4},
		{"<templates>\n<template name=\"a\">\n<uInt32 name=\"x\"><constant/></uInt32></template></templates>", "S4", 3},
		{"<templates>\n<template name=\"a\">\n<uInt32 name=\"x\"><default/></uInt32></template></templates>", "S5", 3},
		{"<templates>\n<template name=\"a\">\n<uInt32 name=\"x\"><copy value=\"-1\"/></uInt32></template></templates>", "S3", 3},
		{"<templates>\n<template name=\"a\">\n<blob name=\"x\"/></template></templates>", "unknown field element", 3},
		{"<templates>\n<template name=\"a\">\n<templateRef name=\"nope\"/></template></templates>", "unknown template", 3},
		{"<templates>\n<template name=\"a\">\n<uInt32 name=\"x\">\n</template></templates>", "malformed XML", 4},
		{"<templates>\n<template name=\"a\" id=\"x\"/></templates>", "bad id", 2},
		{"<templates>\n<template name=\"a\"><templateRef name=\"a\"/></template></templates>", "cycle", 2},
		{"<templates>\n<template name=\"a\">\n<decimal name=\"d\"><exponent><copy value=\"64\"/></exponent></decimal></template></templates>", "R1", 3},
	} {
		_, err := ParseTemplates([]byte(tc.xml))
		var te *TemplateError
		if !errors.As(err, &te) || !strings.Contains(err.Error(), tc.want) || te.Line != tc.line {
			t.Errorf("%q: err = %v, want %q at line %d", tc.xml, err, tc.want, tc.line)
		}
	}
}

func TestParseDecimal(t *testing.T) {
	for s, want := range map[string][2]int64{
		"12000": {12, 3}, "123.45": {12345, -2}, "-0.5": {-5, -1}, "0": {0, 0}, "1.50": {15, -1}, "9e2": {9, 2},
		"-9223372036854775808": {-9223372036854775808, 0},
	} {
		m, e, err := ParseDecimal(s)
		if err != nil || m != want[0] || int64(e) != want[1] {
			t.Errorf("ParseDecimal(%q) = %d, %d, %v; want %v", s, m, e, err, want)
		}
	}
	for _, s := range []string{"", "x", "1e64", "99999999999999999999", "1.2.3"} {
		if _, _, err := ParseDecimal(s); err == nil {
			t.Errorf("ParseDecimal(%q) succeeded", s)
		}
	}
}

func TestMerge(t *testing.T) {
	a, err := ParseTemplates([]byte(`<templates><template name="A" id="1"><templateRef name="B"/></template><template name="B"><uInt32 name="X"/></template></templates>`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ParseTemplates([]byte(`<template name="C" id="2"><uInt32 name="Y"/></template>`))
	if err := a.Merge(b); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.ByID(2); !ok || len(a.List) != 3 {
		t.Errorf("merged set: %d templates", len(a.List))
	}
	dup, _ := ParseTemplates([]byte(`<template name="D" id="1"/>`))
	var te *TemplateError
	if err := a.Merge(dup); !errors.As(err, &te) || !strings.Contains(err.Error(), "duplicate template id 1") {
		t.Errorf("duplicate id: %v", err)
	}
}
