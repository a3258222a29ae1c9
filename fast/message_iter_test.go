package fast

import (
	"slices"
	"testing"
)

// TestMessageIterators reads nested values of a decoded message through
// Elements, Members, IndexIn and GetIn, and checks the cases where they
// yield or find nothing.
func TestMessageIterators(t *testing.T) {
	ts := mustTemplates(t, `<template name="Inst"><string name="Sym"/></template>
		<template name="Leaf" id="2"><uInt32 name="L"/></template>
		<template name="T" id="1"><uInt32 name="A"/>
		<sequence name="S"><length name="N"/><uInt32 name="X"/>
		 <group name="G" presence="optional"><templateRef name="Inst"/><int32 name="Y"/></group></sequence>
		<sequence name="Empty" presence="optional"><length name="NE"/><uInt32 name="Z"/></sequence>
		<templateRef/></template>`)
	tm, _ := ts.ByID(1)
	var m Message
	m.SetTemplate(tm)
	m.AddUint(1)
	m.AddSequence(3)
	for k := range 3 {
		m.AddElement()
		m.AddUint(uint64(10 + k))
		if k == 1 {
			m.AddAbsent()
			continue
		}
		m.AddGroup()
		m.AddBytes([]byte{'a' + byte(k)})
		m.AddInt(int64(-k))
	}
	m.AddAbsent()
	m.AddTemplateRef(2)
	m.AddUint(7)
	enc, _ := NewEncoder(ts, nil)
	b, err := enc.Encode(nil, &m)
	if err != nil {
		t.Fatal(err)
	}
	for _, which := range []string{"built", "decoded"} {
		if which == "decoded" {
			if _, err := mustDecoder(t, ts, nil).Decode(b, &m); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		for k, e := range m.Elements(m.Index("S")) {
			s := string(rune('0'+k)) + ":" + string(rune('0'+m.GetIn(e, "X").Uint()-10))
			if g := m.IndexIn(e, "G"); m.Values[g].Present {
				s += string(m.Bytes(m.IndexIn(g, "Sym")))
				if y := m.GetIn(g, "Y"); y.Int() != -int64(k) {
					t.Errorf("%s: element %d Y = %d", which, k, y.Int())
				}
			}
			got = append(got, s)
		}
		if want := []string{"0:0a", "1:1", "2:2c"}; !slices.Equal(got, want) {
			t.Errorf("%s: elements %q, want %q", which, got, want)
		}
		// Early exit.
		for k := range m.Elements(m.Index("S")) {
			if k > 0 {
				t.Errorf("%s: Elements went on after break", which)
			}
			break
		}
		ref := -1
		for i := 0; i < len(m.Values); i = int(m.Values[i].End) {
			if m.Values[i].Kind == KindTemplateRef {
				ref = i
			}
		}
		if l := m.GetIn(ref, "L"); l == nil || l.Uint() != 7 {
			t.Errorf("%s: L in the dynamic templateRef = %v", which, l)
		}
		nothing := []int{-1, len(m.Values), m.Index("A"), m.Index("Empty"), ref}
		for _, i := range nothing {
			for range m.Elements(i) {
				t.Errorf("%s: Elements(%d) yields", which, i)
			}
		}
		for _, i := range append(nothing[:4], m.Index("S")) {
			for range m.Members(i) {
				t.Errorf("%s: Members(%d) yields", which, i)
			}
			if m.IndexIn(i, "X") != -1 || m.GetIn(i, "X") != nil {
				t.Errorf("%s: IndexIn(%d) found a member", which, i)
			}
		}
	}

	// Reading a decoded message this way allocates nothing.
	seq := m.Index("S")
	sum := uint64(0)
	allocs := testing.AllocsPerRun(100, func() {
		for _, e := range m.Elements(seq) {
			sum += m.GetIn(e, "X").Uint()
			for j := range m.Members(e) {
				sum += uint64(j)
			}
		}
	})
	if allocs != 0 {
		t.Errorf("Elements, Members and GetIn allocate %v times", allocs)
	}
}
