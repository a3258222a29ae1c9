package feature

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/tickwire/tickwire/fast"
	"github.com/tickwire/tickwire/fast/cmd/fastgen/gen"
	"github.com/tickwire/tickwire/fast/internal/generictest"
)

var fix = flag.Bool("fix", false, "rewrite feature_gen.go when it is stale")

//go:generate go test . -run=^TestGenerated$ -fix
func TestGenerated(t *testing.T) {
	xml, err := os.ReadFile("features.xml")
	if err != nil {
		t.Fatal(err)
	}
	ts, err := fast.ParseTemplates(xml)
	if err != nil {
		t.Fatal(err)
	}
	want, err := gen.Generate(ts, gen.Options{Package: "feature", Source: "features.xml"})
	if err != nil {
		t.Fatal(err)
	}
	have, _ := os.ReadFile("feature_gen.go")
	if bytes.Equal(have, want) {
		return
	}
	if *fix {
		if err := os.WriteFile("feature_gen.go", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("feature_gen.go is stale: run go generate in fast/cmd/fastgen/internal/feature")
}

// fill sets every field of the struct rec points to at random, favouring
// edge values and, with prev, the previous record's value or its successor
// (so copy and increment fields often need no wire bytes).
func fill(r *rand.Rand, rec, prev reflect.Value) { fillValues(r, rec, prev, false) }

// fillValues is fill; with small set, integers are drawn from values of at
// most 4 bytes on the wire, as most of a feed's are (the window path's
// case; edge values mostly take the careful path).
func fillValues(r *rand.Rand, rec, prev reflect.Value, small bool) {
	strs := []string{"", "A", "ab", "abc", "abcd", "zz", "Z", "0"}
	for i := range rec.NumField() {
		f := rec.Field(i)
		name := rec.Type().Field(i).Name
		if strings.HasPrefix(name, "Has") {
			f.SetBool(r.IntN(4) > 0)
			continue
		}
		if prev.IsValid() && r.IntN(3) == 0 {
			f.Set(prev.Field(i))
			switch f.Kind() {
			case reflect.Uint32, reflect.Uint64:
				f.SetUint(f.Uint() + uint64(r.IntN(2)))
			case reflect.Int16, reflect.Int32, reflect.Int64:
				f.SetInt(f.Int() + int64(r.IntN(2)))
			}
			continue
		}
		switch k := f.Kind(); {
		case small && (k == reflect.Uint32 || k == reflect.Uint64):
			f.SetUint([]uint64{0, 1, 7, 127, 128, 16383, 16384, 1<<28 - 2}[r.IntN(8)])
		case small && (k == reflect.Int16 || k == reflect.Int32 || k == reflect.Int64):
			f.SetInt([]int64{0, -1, -3, 63, 64, -64, -65, 8191, -8192, 1<<27 - 2, -1 << 27}[r.IntN(11)])
		case k == reflect.Uint32:
			f.SetUint([]uint64{0, 1, 7, 100, 127, 128, math.MaxUint32 - 1, math.MaxUint32}[r.IntN(8)])
		case k == reflect.Uint64:
			f.SetUint([]uint64{0, 1, 1 << 32, math.MaxUint64 - 1, math.MaxUint64}[r.IntN(5)])
		case k == reflect.Int16:
			f.SetInt([]int64{0, -1, math.MinInt16, math.MaxInt16}[r.IntN(4)])
		case k == reflect.Int32:
			f.SetInt([]int64{0, -1, -3, 63, 64, -64, -65, math.MinInt32, math.MaxInt32}[r.IntN(9)])
		case k == reflect.Int64:
			f.SetInt([]int64{0, -1, -5, -9, math.MinInt64, math.MaxInt64, 1 << 40}[r.IntN(7)])
		case k == reflect.Uint8:
			f.SetUint(uint64([]byte{0, 'A', 'z', '0'}[r.IntN(4)]))
		case k == reflect.Array:
			s := strs[r.IntN(len(strs))]
			for j := range f.Len() {
				c := byte(0)
				if j < len(s) {
					c = s[j]
				}
				f.Index(j).SetUint(uint64(c))
			}
		}
	}
}

// normalize zeroes the value of absent optional fields.
func normalize(rec reflect.Value) {
	for i := range rec.NumField() {
		name := rec.Type().Field(i).Name
		if h := rec.FieldByName("Has" + name); h.IsValid() && !h.Bool() {
			rec.Field(i).SetZero()
		}
	}
}

type collector struct {
	recs []any
	text []string
}

func (c *collector) OnInts(m *Ints) {
	c.recs = append(c.recs, *m)
	c.text = append(c.text, canonical(IntsTemplateID, m))
}

func (c *collector) OnStrings(m *Strings) {
	c.recs = append(c.recs, *m)
	c.text = append(c.text, canonical(StringsTemplateID, m))
}

// canonical renders a record as "Name=value ..." without absent fields; an
// optional constant renders as "Name=present".
func canonical(tid uint32, rec any) string {
	v := reflect.ValueOf(rec).Elem()
	var parts []string
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if strings.HasPrefix(name, "Has") {
			if _, ok := v.Type().FieldByName(strings.TrimPrefix(name, "Has")); !ok && v.Field(i).Bool() {
				parts = append(parts, strings.TrimPrefix(name, "Has")+"=present")
			}
			continue
		}
		if h := v.FieldByName("Has" + name); h.IsValid() && !h.Bool() {
			continue
		}
		f := v.Field(i)
		var s string
		switch f.Kind() {
		case reflect.Array:
			b := make([]byte, f.Len())
			reflect.Copy(reflect.ValueOf(b), f)
			s = string(bytes.TrimRight(b, "\x00"))
		case reflect.Uint8:
			s = strings.TrimRight(string([]byte{byte(f.Uint())}), "\x00")
		case reflect.Int16, reflect.Int32, reflect.Int64:
			s = fmt.Sprint(f.Int())
		default:
			s = fmt.Sprint(f.Uint())
		}
		parts = append(parts, name+"="+s)
	}
	return fmt.Sprintf("%d{%s}", tid, strings.Join(parts, " "))
}

func newGeneric(t testing.TB) *fast.Decoder {
	xml, err := os.ReadFile("features.xml")
	if err != nil {
		t.Fatal(err)
	}
	ts, err := fast.ParseTemplates(xml)
	if err != nil {
		t.Fatal(err)
	}
	gd, err := fast.NewDecoder(ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	return gd
}

// compare decodes b with both decoders (fresh dictionaries) and fails on any
// disagreement. It returns the typed decoder's records.
func compare(t testing.TB, gd *fast.Decoder, b []byte) *collector {
	t.Helper()
	typed := &collector{}
	var dec Decoder
	var typedErr error
	failAt := len(b)
	for off := 0; off < len(b); {
		next, err := dec.DecodeRecord(b, off, typed)
		if err != nil {
			typedErr, failAt = err, next
			break
		}
		off = next
	}
	// DecodeRecords (the token path where stopbit has a kernel) must agree
	// with DecodeRecord record by record, the failing record's offset too.
	batch := &collector{}
	var bdec Decoder
	reached, batchErr := bdec.DecodeRecords(b, batch)
	if fmt.Sprint(batch.text) != fmt.Sprint(typed.text) || fmt.Sprint(batchErr) != fmt.Sprint(typedErr) || reached != failAt {
		t.Fatalf("DecodeRecords differs from DecodeRecord on % x\nbatch  %v (err %v, offset %d)\nsingle %v (err %v, offset %d)", b, batch.text, batchErr, reached, typed.text, typedErr, failAt)
	}
	generic, genericErr := generictest.Records(gd, b)
	if errors.Is(typedErr, fast.ErrLimit) || errors.Is(typedErr, fast.ErrRange) {
		// Bounds of the typed representation: compare the records before.
		if len(generic) < len(typed.text) {
			t.Fatalf("typed decoded %d records before %v, generic %d (%v)", len(typed.text), typedErr, len(generic), genericErr)
		}
		generic, genericErr = generic[:len(typed.text)], typedErr
	}
	if fmt.Sprint(typed.text) != fmt.Sprint(generic) {
		t.Fatalf("records differ on % x\ntyped   %v (err %v)\ngeneric %v (err %v)", b, typed.text, typedErr, generic, genericErr)
	}
	if fast.Code(typedErr) != fast.Code(genericErr) {
		t.Fatalf("errors differ on % x\ntyped   %v\ngeneric %v", b, typedErr, genericErr)
	}
	return typed
}

// TestOperators encodes random records, decodes them with the generated and
// the generic decoder and checks both give back the records.
func TestOperators(t *testing.T) {
	gd := newGeneric(t)
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 4000 {
		small := round%2 == 1
		var enc Encoder
		var b []byte
		var want []any
		var prevInts, prevStrs reflect.Value
		for range 1 + r.IntN(6) {
			var err error
			if r.IntN(2) == 0 {
				var m Ints
				fillValues(r, reflect.ValueOf(&m).Elem(), prevInts, small)
				b, err = enc.AppendInts(b, &m)
				prevInts = reflect.ValueOf(m)
				normalize(reflect.ValueOf(&m).Elem())
				want = append(want, m)
			} else {
				var m Strings
				fillValues(r, reflect.ValueOf(&m).Elem(), prevStrs, small)
				b, err = enc.AppendStrings(b, &m)
				prevStrs = reflect.ValueOf(m)
				normalize(reflect.ValueOf(&m).Elem())
				want = append(want, m)
			}
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		got := compare(t, gd, b)
		if !reflect.DeepEqual(got.recs, want) {
			t.Fatalf("round %d: round trip on % x\n got %+v\nwant %+v", round, b, got.recs, want)
		}
		// Damaged and truncated copies: the decoders must still agree.
		bad := bytes.Clone(b)
		bad[r.IntN(len(bad))] ^= byte(1 << r.IntN(8))
		compare(t, gd, bad[:r.IntN(len(bad)+1)])
	}
}

// TestMinimalPMap checks that an unchanged record costs only its presence
// map and the fields without operator, and that a reset record (id 120)
// makes the next record carry everything again.
func TestMinimalPMap(t *testing.T) {
	var enc Encoder
	m := Strings{S4: [4]byte{'a', 'b'}, S1Default: 'A', S2Copy: [2]byte{'q', 'r'}, S2OptCopyInit: [2]byte{'z', 'z'}, HasS2OptCopyInit: true,
		S3OptDefault: [3]byte{'a', 'b', 'c'}, HasS3OptDefault: true}
	first, _ := enc.AppendStrings(nil, &m)
	second, _ := enc.AppendStrings(nil, &m)
	// pmap, S4 "ab", S4Opt absent; S3OptDefault is its default "abc".
	if want := []byte{0x80, 'a', 'b' | 0x80, 0x80}; !bytes.Equal(second, want) {
		t.Fatalf("second record % x, want % x (first % x)", second, want, first)
	}
	gd := newGeneric(t)
	stream := append(append(bytes.Clone(first), second...), 0xc0, 0x80|120)
	enc.Reset()
	stream, _ = enc.AppendStrings(stream, &m)
	if got := compare(t, gd, stream); len(got.recs) != 3 || got.recs[2] != any(m) {
		t.Fatalf("records %+v", got.recs)
	}
}

// TestRangeOfGoType: Wide is an int64 on the wire held in an int16.
func TestRangeOfGoType(t *testing.T) {
	var enc Encoder
	m := Ints{Wide: math.MaxInt16, HasWide: true}
	b, err := enc.AppendInts(nil, &m)
	if err != nil {
		t.Fatal(err)
	}
	var dec Decoder
	if _, err := dec.DecodeRecord(b, 0, &collector{}); err != nil {
		t.Fatal(err)
	}
	// Craft Wide = 40000 by encoding through the generic-free path: a
	// second record whose Wide is copied from a wider value is impossible
	// with the typed encoder, so patch the wire.
	wide := fast.AppendNullableInt64(nil, 40000, true)
	old := fast.AppendNullableInt64(nil, math.MaxInt16, true)
	i := bytes.LastIndex(b, old)
	if i < 0 {
		t.Fatalf("Wide not found in % x", b)
	}
	b = append(append(b[:i:i], wide...), b[i+len(old):]...)
	dec.Reset()
	_, err = dec.DecodeRecord(b, 0, &collector{})
	var de *fast.DecodeError
	if !errors.As(err, &de) || de.Field != "Wide" || !errors.Is(err, fast.ErrRange) {
		t.Fatalf("got %v", err)
	}
}

// TestReject lists what the generator refuses, each with a clear error.
func TestReject(t *testing.T) {
	cases := map[string]string{
		`<decimal name="D"/>`:                                 "decimal fields are not supported",
		`<uInt32 name="X"><delta/></uInt32>`:                  "operator delta is not supported",
		`<string name="S" twf:fixedLen="2"><tail/></string>`:  "operator tail is not supported",
		`<string name="S"/>`:                                  "twf:fixedLen",
		`<byteVector name="B"/>`:                              "byteVector fields are not supported",
		`<sequence name="Q"><uInt32 name="A"/></sequence>`:    "sequence fields are not supported",
		`<uInt32 name="X" dictionary="type"><copy/></uInt32>`: "type dictionary",
		`<uInt32 name="K"><copy/></uInt32><string name="K2" twf:fixedLen="2"><copy key="K"/></string>`: "D4",
		`<string name="S" twf:goType="Foo" twf:fixedLen="2"/>`:                                         "twf:goType",
		`<uInt32 name="HasX"/><uInt32 name="X" presence="optional"/>`:                                  "clashes",
		`<uInt32 name="TemplateID"><constant value="1"/></uInt32>`:                                     "clashes",
	}
	for body, want := range cases {
		xml := `<templates xmlns="http://www.fixprotocol.org/ns/fast/td/1.1" xmlns:twf="urn:tickwire:fast">` +
			`<template name="T" id="1">` + body + `</template></templates>`
		ts, err := fast.ParseTemplates([]byte(xml))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		_, err = gen.Generate(ts, gen.Options{Package: "x"})
		var ge *gen.Error
		if !errors.As(err, &ge) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", body, err, want)
		}
	}
	ts, _ := fast.ParseTemplates([]byte(`<templates xmlns="http://www.fixprotocol.org/ns/fast/td/1.1"><template name="T" id="1" reset="Y"/></templates>`))
	if _, err := gen.Generate(ts, gen.Options{Package: "x"}); err == nil {
		t.Error("reset template accepted")
	}
}

func TestZeroAllocs(t *testing.T) {
	var enc Encoder
	r := rand.New(rand.NewPCG(5, 6))
	var ints Ints
	var strs Strings
	fill(r, reflect.ValueOf(&ints).Elem(), reflect.Value{})
	fill(r, reflect.ValueOf(&strs).Elem(), reflect.Value{})
	buf := make([]byte, 0, 1024)
	buf, _ = enc.AppendInts(buf, &ints)
	buf, _ = enc.AppendStrings(buf, &strs)
	var dec Decoder
	h := &nop{}
	a := testing.AllocsPerRun(100, func() {
		dec.Reset()
		for off := 0; off < len(buf); {
			next, err := dec.DecodeRecord(buf, off, h)
			if err != nil {
				t.Fatal(err)
			}
			off = next
		}
		enc.Reset()
		out, _ := enc.AppendInts(buf[len(buf):], &ints)
		_, _ = enc.AppendStrings(out, &strs)
	})
	if a != 0 {
		t.Fatalf("%v allocations", a)
	}
}

type nop struct{}

func (*nop) OnInts(*Ints)       {}
func (*nop) OnStrings(*Strings) {}

// TestWindowPath checks that records with small values, every operator
// path of both templates among them, take the generated window path (the
// presence map of Ints is 3 bytes long), and that what it decodes is what
// the generic decoder decodes (compare, as in TestOperators).
func TestWindowPath(t *testing.T) {
	gd := newGeneric(t)
	r := rand.New(rand.NewPCG(5, 6))
	window := map[bool]int{}
	total := map[bool]int{}
	for range 500 {
		var enc Encoder
		var b []byte
		var ints []bool
		var prevInts, prevStrs reflect.Value
		for range 1 + r.IntN(6) {
			var err error
			if r.IntN(2) == 0 {
				var m Ints
				fillValues(r, reflect.ValueOf(&m).Elem(), prevInts, true)
				b, err = enc.AppendInts(b, &m)
				prevInts = reflect.ValueOf(m)
				ints = append(ints, true)
			} else {
				var m Strings
				fillValues(r, reflect.ValueOf(&m).Elem(), prevStrs, true)
				b, err = enc.AppendStrings(b, &m)
				prevStrs = reflect.ValueOf(m)
				ints = append(ints, false)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		var d Decoder
		d.tail.start = -1
		c := &collector{}
		for i, off := 0, 0; off < len(b); i++ {
			total[ints[i]]++
			if next := d.decodeWindow(b, off, c, false); next != off {
				window[ints[i]]++
				off = next
				continue
			}
			next, err := d.DecodeRecord(b, off, c)
			if err != nil {
				t.Fatal(err)
			}
			off = next
		}
		compare(t, gd, b)
	}
	for _, ints := range []bool{true, false} {
		if window[ints] < total[ints]/2 {
			t.Errorf("ints=%v: %d of %d records took the window path", ints, window[ints], total[ints])
		}
	}
}

// TestTokenPath is TestWindowPath for the token path: records with small
// values, every operator path of both templates among them, decoded by
// decodeTokens (the careful path taking the records it returns), and
// compared with the generic decoder; compare also runs DecodeRecords, which
// takes the token path where stopbit has a kernel.
func TestTokenPath(t *testing.T) {
	gd := newGeneric(t)
	r := rand.New(rand.NewPCG(7, 8))
	tokens := map[bool]int{}
	total := map[bool]int{}
	for range 500 {
		var enc Encoder
		var b []byte
		var ints []bool
		var starts []int
		var prevInts, prevStrs reflect.Value
		for range 1 + r.IntN(40) {
			starts = append(starts, len(b))
			var err error
			if r.IntN(2) == 0 {
				var m Ints
				fillValues(r, reflect.ValueOf(&m).Elem(), prevInts, true)
				b, err = enc.AppendInts(b, &m)
				prevInts = reflect.ValueOf(m)
				ints = append(ints, true)
			} else {
				var m Strings
				fillValues(r, reflect.ValueOf(&m).Elem(), prevStrs, true)
				b, err = enc.AppendStrings(b, &m)
				prevStrs = reflect.ValueOf(m)
				ints = append(ints, false)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		var d Decoder
		d.tokStart = -1
		c := &collector{}
		for i := 0; i < len(starts); {
			off := starts[i]
			next := d.decodeTokens(b, off, c)
			for ; i < len(starts) && starts[i] < next; i++ {
				tokens[ints[i]]++
				total[ints[i]]++
			}
			if next >= len(b) {
				break
			}
			if next != starts[i] {
				t.Fatalf("token path stopped at %d, not at a record start", next)
			}
			if _, err := d.DecodeRecord(b, next, c); err != nil {
				t.Fatal(err)
			}
			total[ints[i]]++
			i++
		}
		if len(c.text) != len(starts) {
			t.Fatalf("%d records decoded, want %d", len(c.text), len(starts))
		}
		compare(t, gd, b)
	}
	for _, ints := range []bool{true, false} {
		t.Logf("ints=%v: %d of %d records took the token path", ints, tokens[ints], total[ints])
		if tokens[ints] < total[ints]/2 {
			t.Errorf("ints=%v: %d of %d records took the token path", ints, tokens[ints], total[ints])
		}
	}
}
