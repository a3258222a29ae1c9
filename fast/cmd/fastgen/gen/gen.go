// Package gen generates typed, allocation-free FAST decoders and encoders in
// Go from template XML loaded by package fast. It is the library behind the
// fastgen command; tests use it to check that generated files are current.
//
// For every template with an id, the generated file holds a struct (named by
// the template's twf:goType attribute, else by its name), the template id as
// a constant, and a decode and an encode method. A Decoder holds the
// dictionary (one slot per dictionary entry, shared between templates as the
// spec's dictionary scopes say), a Handler interface has one method per
// template, and Decoder.DecodeRecord dispatches on the template id
// (Decoder.DecodeRecords does so for every record of a payload in one call).
//
// DecodeRecords first tries the token path (tokens.go) where package
// fast/internal/stopbit has an assembly kernel (amd64 with AVX2 and BMI2):
// one kernel call splits the whole buffer into stop-bit tokens, values
// already packed, and each field takes the next token its presence map
// says is there. The token path imports an internal package of this module:
// code generated for a package elsewhere (Options.External, fastgen
// -external) goes without it.
//
// A record is otherwise first tried by the window path (window.go): the stop bits of
// the 48 bytes at the record are gathered into one bitmap, which gives the
// end of every field at once, and each value is decoded from an 8-byte load
// without bounds checks; the dictionary is set only once the whole record is
// known to fit the path. Any other record (longer, values over 8 bytes,
// special encodings, errors) goes to the careful code described next.
//
// The generated decoder is straight-line code per template: the presence map
// is read into two words whose bits are tested with constant masks (one- and
// two-byte maps inline), and every integer or fixed-length string of up to 8
// bytes is decoded from one 8-byte load without a loop (uvarint8, ascii8 in
// the generated file). Longer values, the last bytes of a buffer and every
// error case go to package fast's careful primitives, so both paths agree on
// values, offsets and errors.
//
// Supported: the integer types (uInt32, int32, uInt64, int64) and ascii
// strings with the operators none, constant, default, copy and increment,
// mandatory or optional, in the global, template or a named dictionary.
// Anything else (decimal, unicode, byteVector, sequence, group, templateRef,
// delta, tail, the type dictionary, reset="Y") is rejected with an error
// naming the field, so the generated code never decodes a template wrongly.
//
// Attributes in any namespace (tickwire uses xmlns:twf="urn:tickwire:fast"):
//
//	twf:goType="Price"  on a template: the struct name; on an integer field:
//	                    the Go type of the struct field (an integer type
//	                    defined in the generated package).
//	twf:fixedLen="6"    on an ascii field (required): the value is held in a
//	                    [6]byte array, NUL-padded, or in a byte for 1.
package gen

import (
	"bytes"
	"fmt"
	"go/format"
	"go/token"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/tickwire/tickwire/fast"
)

// Options controls generation.
type Options struct {
	// Package is the package clause of the generated file.
	Package string
	// Source names the template file in the generated header comment.
	Source string
	// External generates code for a package outside module
	// github.com/tickwire/tickwire: without the token path, which imports
	// the module's internal package fast/internal/stopbit. DecodeRecords
	// then takes the window path.
	External bool
}

// Attribute local names read by the generator.
const (
	attrGoType   = "goType"
	attrFixedLen = "fixedLen"
)

// wire describes a FAST wire type as the generated code handles it.
type wire struct {
	goType   string // Go type of a decoded value and of the dictionary slot
	read     string // fast.Read... for a mandatory value
	readNull string // fast.ReadNullable... for an optional value
	app      string // fast.Append...
	appNull  string // fast.AppendNullable...
}

var wires = map[fast.Kind]wire{
	fast.KindUint32: {"uint32", "ReadUint32", "ReadNullableUint32", "AppendUint32", "AppendNullableUint32"},
	fast.KindInt32:  {"int32", "ReadInt32", "ReadNullableInt32", "AppendInt32", "AppendNullableInt32"},
	fast.KindUint64: {"uint64", "ReadUint64", "ReadNullableUint64", "AppendUint64", "AppendNullableUint64"},
	fast.KindInt64:  {"int64", "ReadInt64", "ReadNullableInt64", "AppendInt64", "AppendNullableInt64"},
	fast.KindASCII:  {"", "ReadASCII", "ReadNullableASCII", "AppendASCII", "AppendNullableASCII"},
}

type template struct {
	t      *fast.Template
	goName string
	fields []*field
}

type field struct {
	f        *fast.Field
	goName   string // struct field; "" for a mandatory constant
	goType   string // struct field type
	valType  string // wire value type: uint32..int64, [N]byte or byte
	fixedLen int    // ascii only
	init     string // Go expression of the initial value (wire value type), "" if none
	slot     *slot
}

func (f *field) isASCII() bool { return f.f.Kind == fast.KindASCII }

type slot struct {
	name    string // Go field name in the dictionary struct
	valType string
	owner   *field // first field using the slot, for error messages
}

// Error is a template the generator cannot handle.
type Error struct {
	Template string
	Field    string
	Line     int
	Msg      string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("fastgen: template %q field %q (line %d): %s", e.Template, e.Field, e.Line, e.Msg)
	}
	return fmt.Sprintf("fastgen: template %q (line %d): %s", e.Template, e.Line, e.Msg)
}

// Generate returns the gofmt-ed Go source for the templates of ts that have
// an id.
func Generate(ts *fast.Templates, opt Options) ([]byte, error) {
	if opt.Package == "" {
		return nil, fmt.Errorf("fastgen: no package name")
	}
	g := &generator{opt: opt, slots: map[string]*slot{}}
	for _, t := range ts.List {
		if !t.HasID {
			continue
		}
		if err := g.addTemplate(t); err != nil {
			return nil, err
		}
	}
	if len(g.templates) == 0 {
		return nil, fmt.Errorf("fastgen: no template with an id")
	}
	g.emit()
	src, err := format.Source(g.buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("fastgen: generated code does not parse (generator bug): %v\n%s", err, g.buf.Bytes())
	}
	return src, nil
}

type generator struct {
	opt       Options
	templates []*template
	slots     map[string]*slot
	slotList  []*slot
	buf       bytes.Buffer
}

func attr(attrs []fast.Attr, name string) (string, bool) {
	for _, a := range attrs {
		if a.Name == name {
			return a.Value, true
		}
	}
	return "", false
}

// goIdent turns a FAST name into an exported Go identifier.
func goIdent(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case unicode.IsLetter(r) || r == '_' || (i > 0 && unicode.IsDigit(r)):
			if b.Len() == 0 {
				r = unicode.ToUpper(r)
			}
			b.WriteRune(r)
		case unicode.IsDigit(r):
			b.WriteString("F")
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 || !token.IsExported(b.String()) {
		return "X" + b.String()
	}
	return b.String()
}

func (g *generator) addTemplate(ft *fast.Template) error {
	t := &template{t: ft}
	fail := func(f *fast.Field, format string, args ...any) error {
		e := &Error{Template: ft.Name, Line: ft.Line, Msg: fmt.Sprintf(format, args...)}
		if f != nil {
			e.Field, e.Line = f.Name, f.Line
		}
		return e
	}
	if ft.Reset {
		return fail(nil, `reset="Y" is not supported by the generator`)
	}
	t.goName = goIdent(ft.Name)
	if v, ok := attr(ft.Attrs, attrGoType); ok {
		t.goName = v
	}
	if !token.IsIdentifier(t.goName) || !token.IsExported(t.goName) {
		return fail(nil, "Go name %q is not an exported identifier", t.goName)
	}
	switch t.goName {
	case "Decoder", "Encoder", "Handler", "EncodeError", "TemplateNames", "DefaultMaxPMapBytes":
		return fail(nil, "Go name %s clashes with a generated identifier; set twf:goType", t.goName)
	}
	for _, o := range g.templates {
		if o.goName == t.goName {
			return fail(nil, "Go name %s used twice", t.goName)
		}
	}
	seen := map[string]bool{}
	for _, ff := range ft.Fields {
		w, ok := wires[ff.Kind]
		if !ok {
			return fail(ff, "%s fields are not supported by the generator", ff.Kind)
		}
		f := &field{f: ff, goName: goIdent(ff.Name), valType: w.goType}
		idents := []string{f.goName}
		if ff.Optional {
			idents = append(idents, "Has"+f.goName)
		}
		for _, id := range idents {
			if seen[id] {
				return fail(ff, "Go field name %s clashes with another field's", id)
			}
			seen[id] = true
		}
		if ff.Kind == fast.KindASCII && ff.Op.Kind != fast.OpConstant {
			v, ok := attr(ff.Attrs, attrFixedLen)
			n, err := strconv.Atoi(v)
			if !ok || err != nil || n < 1 || n > 64 {
				return fail(ff, "ascii fields need a twf:fixedLen attribute between 1 and 64")
			}
			f.fixedLen = n
			f.valType = fmt.Sprintf("[%d]byte", n)
			if n == 1 {
				f.valType = "byte"
			}
		}
		f.goType = f.valType
		if v, ok := attr(ff.Attrs, attrGoType); ok {
			if ff.Kind == fast.KindASCII || !token.IsIdentifier(v) {
				return fail(ff, "twf:goType %q: only integer fields take a Go integer type name", v)
			}
			f.goType = v
		}
		op := &ff.Op
		switch op.Kind {
		case fast.OpNone, fast.OpConstant, fast.OpDefault, fast.OpCopy, fast.OpIncrement:
		default:
			return fail(ff, "operator %s is not supported by the generator", op.Kind)
		}
		if op.HasValue && !(ff.Kind == fast.KindASCII && op.Kind == fast.OpConstant) {
			init, err := initExpr(f, op.Value)
			if err != nil {
				return fail(ff, "initial value %q: %v", op.Value, err)
			}
			f.init = init
		}
		if op.Kind == fast.OpConstant && f.goName == "TemplateID" {
			return fail(ff, "constant named TemplateID clashes with the generated template id constant")
		}
		if op.Kind == fast.OpConstant && !ff.Optional {
			f.goName = ""
		}
		if op.Kind == fast.OpCopy || op.Kind == fast.OpIncrement {
			var key string
			switch op.Dictionary {
			case fast.DictGlobal, "":
				key = "g\x00" + op.Key
			case fast.DictTemplate:
				key = "t\x00" + ft.Name + "\x00" + op.Key
			case fast.DictType:
				return fail(ff, "the type dictionary is not supported by the generator")
			default:
				key = "n\x00" + op.Dictionary + "\x00" + op.Key
			}
			s := g.slots[key]
			if s == nil {
				s = &slot{name: fmt.Sprintf("s%d%s", len(g.slotList), goIdent(op.Key)), valType: f.valType, owner: f}
				g.slots[key] = s
				g.slotList = append(g.slotList, s)
			} else if s.valType != f.valType {
				return fail(ff, "shares dictionary entry %q with field %q of another type (%s, %s): error D4",
					op.Key, s.owner.f.Name, s.valType, f.valType)
			}
			f.slot = s
		}
		t.fields = append(t.fields, f)
	}
	if bitsUsed := t.pmapBits(); bitsUsed > fast.MaxPMapBits {
		return fail(nil, "needs %d presence-map bits; the generator handles %d", bitsUsed, fast.MaxPMapBits)
	}
	g.templates = append(g.templates, t)
	return nil
}

// usesPMapBit reports whether the field has a presence-map bit (spec 6.3,
// table 4).
func (f *field) usesPMapBit() bool {
	switch f.f.Op.Kind {
	case fast.OpNone:
		return false
	case fast.OpConstant:
		return f.f.Optional
	}
	return true
}

// pmBit returns the Go expression testing presence-map bit k (0 is the
// template id's bit) of the map held in the words pm and pmLo.
func pmBit(k int) string {
	if k < 64 {
		return fmt.Sprintf("pm&(1<<%d) != 0", 63-k)
	}
	return fmt.Sprintf("pmLo&(1<<%d) != 0", 127-k)
}

// initExpr returns the Go expression of an initial value in the field's
// wire value type.
func initExpr(f *field, v string) (string, error) {
	switch f.f.Kind {
	case fast.KindUint32, fast.KindUint64:
		bits := 32
		if f.f.Kind == fast.KindUint64 {
			bits = 64
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, bits)
		return strconv.FormatUint(n, 10), err
	case fast.KindInt32, fast.KindInt64:
		bits := 32
		if f.f.Kind == fast.KindInt64 {
			bits = 64
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, bits)
		return strconv.FormatInt(n, 10), err
	}
	if len(v) > f.fixedLen || strings.ContainsRune(v, 0) {
		return "", fmt.Errorf("longer than twf:fixedLen %d or holds NUL", f.fixedLen)
	}
	for i := 0; i < len(v); i++ {
		if v[i] >= 0x80 {
			return "", fmt.Errorf("not ASCII")
		}
	}
	if f.fixedLen == 1 {
		if v == "" {
			return "0", nil
		}
		return strconv.QuoteRune(rune(v[0])), nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s{", f.valType)
	for i := 0; i < len(v); i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.QuoteRune(rune(v[i])))
	}
	b.WriteString("}")
	return b.String(), nil
}

func (g *generator) hasTemplate(id uint32) bool {
	for _, t := range g.templates {
		if t.t.ID == id {
			return true
		}
	}
	return false
}

func (g *generator) p(format string, args ...any) {
	fmt.Fprintf(&g.buf, format, args...)
	g.buf.WriteByte('\n')
}

func (g *generator) emit() {
	g.p("// Code generated by fastgen. DO NOT EDIT.")
	if g.opt.Source != "" {
		g.p("// Source: %s", g.opt.Source)
	}
	g.p("")
	g.p("package %s", g.opt.Package)
	g.p("")
	g.p("import (")
	g.p(`"encoding/binary"`)
	g.p(`"math/bits"`)
	g.p(`"strconv"`)
	g.p("")
	g.p(`"github.com/tickwire/tickwire/fast"`)
	if !g.opt.External {
		g.p(`"github.com/tickwire/tickwire/fast/internal/stopbit"`)
	}
	g.p(")")
	g.p("")
	g.emitTypes()
	g.emitDictionary()
	g.emitDecoder()
	g.emitWindowDispatch()
	if !g.opt.External {
		g.emitTokenDispatch()
	}
	for _, t := range g.templates {
		g.emitDecode(t)
	}
	g.emitEncoder()
	for _, t := range g.templates {
		g.emitEncode(t)
	}
	g.emitHelpers()
}

func fieldDoc(f *fast.Field) string {
	pres := "mandatory"
	if f.Optional {
		pres = "optional"
	}
	id := ""
	if f.ID != "" {
		id = ", id " + f.ID
	}
	s := fmt.Sprintf("%s %s%s, %s", f.Kind, f.Name, id, pres)
	if f.Op.Kind != fast.OpNone {
		s += ", " + f.Op.Kind.String()
		if f.Op.HasValue {
			s += fmt.Sprintf(" %q", f.Op.Value)
		}
	}
	for _, a := range f.Attrs {
		if a.Name != attrGoType && a.Name != attrFixedLen {
			s += fmt.Sprintf(", %s=%q", a.Name, a.Value)
		}
	}
	return s
}

func (g *generator) emitTypes() {
	g.p("// Template ids.")
	g.p("const (")
	for _, t := range g.templates {
		g.p("%sTemplateID = %d // template %q", t.goName, t.t.ID, t.t.Name)
	}
	g.p(")")
	g.p("")
	for _, t := range g.templates {
		var consts []string
		for _, f := range t.fields {
			if f.f.Op.Kind == fast.OpConstant {
				v := f.f.Op.Value
				if f.isASCII() {
					v = strconv.Quote(v)
				}
				consts = append(consts, fmt.Sprintf("%s%s = %s", t.goName, goIdent(f.f.Name), v))
			}
		}
		if len(consts) > 0 {
			g.p("// Constant fields of template %q (not on the wire).", t.t.Name)
			g.p("const (")
			for _, c := range consts {
				g.p("%s", c)
			}
			g.p(")")
			g.p("")
		}
		g.p("// %s is a record of template %q (id %d).", t.goName, t.t.Name, t.t.ID)
		g.p("// An optional field X is only valid when HasX is true.")
		g.p("type %s struct {", t.goName)
		for _, f := range t.fields {
			if f.goName == "" {
				continue
			}
			if f.f.Op.Kind == fast.OpConstant {
				g.p("// Has%s reports whether the optional constant %s is present.", f.goName, f.f.Name)
			} else {
				g.p("// %s is the %s.", f.goName, fieldDoc(f.f))
				g.p("%s %s", f.goName, f.goType)
			}
			if f.f.Optional {
				g.p("Has%s bool", f.goName)
			}
		}
		g.p("}")
		g.p("")
	}
}

func (g *generator) emitDictionary() {
	g.p("// Dictionary slot states. slotAssigned is slotEmpty+1, so that the state")
	g.p("// of an optional field's slot is slotEmpty plus its presence (one add).")
	g.p("const (")
	g.p("slotUndefined uint8 = iota")
	g.p("slotEmpty")
	g.p("slotAssigned")
	g.p(")")
	g.p("")
	g.p("// dictionary holds the previous values of the copy and increment fields,")
	g.p("// one slot per dictionary entry; its zero value is the reset state.")
	g.p("type dictionary struct {")
	g.p("tid uint32")
	g.p("tidState uint8")
	for _, s := range g.slotList {
		g.p("%s %s", s.name, s.valType)
		g.p("%sState uint8", s.name)
	}
	g.p("}")
	g.p("")
}

func (g *generator) emitDecoder() {
	g.p("// Handler receives decoded records. The record is valid until the method")
	g.p("// returns: the decoder reuses its storage for the next record.")
	g.p("type Handler interface {")
	for _, t := range g.templates {
		g.p("On%s(*%s)", t.goName, t.goName)
	}
	g.p("}")
	g.p("")
	g.p("// DefaultMaxPMapBytes is the default bound on a presence map in bytes.")
	g.p("const DefaultMaxPMapBytes = 16")
	g.p("")
	g.p("// Decoder decodes records of the generated templates into reusable")
	g.p("// values, without allocating. Its dictionary persists across records until")
	g.p("// Reset. An error is sticky: every later call returns it until Reset.")
	g.p("// A Decoder is not safe for concurrent use; the zero value is ready to use.")
	g.p("type Decoder struct {")
	g.p("// MaxPMapBytes bounds a presence map; 0 means DefaultMaxPMapBytes.")
	g.p("MaxPMapBytes int")
	g.p("dict dictionary")
	g.p("err error")
	g.p("tail tail // windows near the end of a buffer")
	if !g.opt.External {
		g.p("// The token path's batch: tokens of the buffer from offset tokStart on,")
		g.p("// tokN of them (tokFull: Scan stopped for room), tokI the first token of")
		g.p("// the record the path last stopped at, tokLim the last token a record")
		g.p("// may start at (tokenLimit). tokStart is -1 when there is none.")
		g.p("tok      stopbit.Tokens")
		g.p("tokStart int")
		g.p("tokN     int")
		g.p("tokFull  bool")
		g.p("tokI     int")
		g.p("tokLim   int")
	}
	for _, t := range g.templates {
		g.p("rec%s %s", t.goName, t.goName)
	}
	for _, t := range g.templates {
		g.p("n%s uint64 // records passed to On%s, never reset", t.goName, t.goName)
	}
	g.p("}")
	g.p("")
	g.p("// Reset forgets the dictionary, including the previous template id, and a")
	g.p("// sticky error.")
	g.p("func (d *Decoder) Reset() {")
	g.p("d.dict = dictionary{}")
	g.p("d.err = nil")
	g.p("}")
	g.p("")
	g.p("// DecodeRecord decodes the record (presence map, template id when its bit")
	g.p("// is set, fields) starting at b[off], calls the handler's method for its")
	g.p("// template and returns the offset just past the record. The whole record")
	g.p("// must be in b: a record cut short is an error wrapping fast.ErrShort.")
	g.p("// Errors are *fast.DecodeError values; the offset returned with one is")
	g.p("// the record's start. A record with the reset template id")
	g.p("// (fast.ResetTemplateID, 120), when no generated template has it, resets")
	g.p("// the dictionary and calls no handler method.")
	g.p("func (d *Decoder) DecodeRecord(b []byte, off int, h Handler) (int, error) {")
	g.p("return d.decode(b, off, h, false)")
	g.p("}")
	g.p("")
	g.p("// DecodeRecords decodes the records of b from its start to its end, in")
	g.p("// order, as DecodeRecord would one by one but without a call per record.")
	g.p("// It returns the offset reached: len(b), or the start of the record that")
	g.p("// failed with the error.")
	g.p("func (d *Decoder) DecodeRecords(b []byte, h Handler) (int, error) {")
	g.p("if len(b) == 0 {")
	g.p("return 0, d.err")
	g.p("}")
	if !g.opt.External {
		g.p("// The usual case without decode's setup: the token path takes every")
		g.p("// record (decode goes on from where it stops).")
		g.p("if d.err == nil && stopbit.Accelerated && (d.MaxPMapBytes <= 0 || d.MaxPMapBytes >= windowPMapBytes) {")
		g.p("d.tail.start, d.tokStart = -1, -1")
		g.p("if next := d.decodeTokens(b, 0, h); next < len(b) {")
		g.p("return d.decode(b, next, h, true)")
		g.p("} else {")
		g.p("return next, nil")
		g.p("}")
		g.p("}")
	}
	g.p("return d.decode(b, 0, h, true)")
	g.p("}")
	g.p("")
	g.p("// decode decodes the record at b[off], and the records after it to the end")
	g.p("// of b when all is set.")
	g.p("func (d *Decoder) decode(b []byte, off int, h Handler, all bool) (int, error) {")
	g.p("if d.err != nil {")
	g.p("return off, d.err")
	g.p("}")
	g.p("maxPMap := d.MaxPMapBytes")
	g.p("if maxPMap <= 0 {")
	g.p("maxPMap = DefaultMaxPMapBytes")
	g.p("}")
	g.p("var err error")
	g.p("d.tail.start = -1")
	if g.opt.External {
		g.p("for {")
		g.p("if next := d.decodeWindow(b, off, h, all); next != off {")
	} else {
		g.p("d.tokStart = -1")
		g.p("// The token path reads presence maps of up to windowPMapBytes (all a")
		g.p("// token holds); a lower bound leaves DecodeRecords to the window path.")
		g.p("tokens := all && stopbit.Accelerated && (d.MaxPMapBytes <= 0 || d.MaxPMapBytes >= windowPMapBytes)")
		g.p("for {")
		g.p("if tokens {")
		g.p("if next := d.decodeTokens(b, off, h); next != off {")
		g.p("if off = next; off >= len(b) {")
		g.p("return off, nil")
		g.p("}")
		g.p("}")
		g.p("} else if next := d.decodeWindow(b, off, h, all); next != off {")
	}
	g.p("if off = next; !all || off >= len(b) {")
	g.p("return off, nil")
	g.p("}")
	g.p("}")
	g.p("start := off")
	g.p("var pm, pmLo uint64")
	g.p("if len(b)-off >= 2 && b[off]&0x80 != 0 {")
	g.p("pm, off = uint64(b[off])<<57, off+1")
	g.p("} else if len(b)-off >= 2 && b[off+1]&0x80 != 0 && maxPMap >= 2 {")
	g.p("pm, off = uint64(b[off])<<57|uint64(b[off+1]&0x7f)<<50, off+2")
	g.p("} else if pm, pmLo, off, err = readPMap(b, off, maxPMap); err != nil {")
	g.p(`return start, d.fail(err, 0, "", off)`)
	g.p("}")
	g.p("_ = pmLo")
	g.p("if %s {", pmBit(0))
	g.p("var tid uint32")
	g.p("if x, n := uvarint8(b, off); n <= 8 && x <= 0xffffffff {")
	g.p("tid, off = uint32(x), off+n")
	g.p("} else if tid, off, err = fast.ReadUint32(b, off); err != nil {")
	g.p(`return start, d.fail(err, 0, "", off)`)
	g.p("}")
	g.p("d.dict.tid, d.dict.tidState = tid, slotAssigned")
	g.p("} else if d.dict.tidState != slotAssigned {")
	g.p(`return start, d.fail(fast.ErrNoPrevious, 0, "", off)`)
	g.p("}")
	g.p("switch d.dict.tid {")
	for _, t := range g.templates {
		g.p("case %sTemplateID:", t.goName)
		g.p("if off, err = d.decode%s(b, start, off, pm, pmLo, &d.rec%s); err != nil {", t.goName, t.goName)
		g.p("return off, err")
		g.p("}")
		g.p("d.n%s++", t.goName)
		g.p("h.On%s(&d.rec%s)", t.goName, t.goName)
	}
	if !g.hasTemplate(fast.ResetTemplateID) {
		g.p("case fast.ResetTemplateID:")
		g.p("d.dict = dictionary{}")
	}
	g.p("default:")
	g.p(`return start, d.fail(fast.ErrUnknownTemplate, d.dict.tid, "", off)`)
	g.p("}")
	g.p("if !all || off >= len(b) {")
	g.p("return off, nil")
	g.p("}")
	g.p("}")
	g.p("}")
	g.p("")
}

// Integer wire types as the generated fast paths see them: the 8-byte
// decoder's call (uvarint8, wrapped in signed for signed types) and the Go condition under which
// it is in range for the type; the careful fast.Read... call handles the rest
// (longer encodings, overflow, the end of b) and reports errors.
type intPath struct {
	helper   string
	inRange  string // in terms of x; "" when always in range
	nullable string // the same for the nullable encoding
}

var intPaths = map[fast.Kind]intPath{
	fast.KindUint32: {"uvarint8", "x <= 0xffffffff", "x <= 0x100000000"},
	fast.KindUint64: {"uvarint8", "", ""},
	fast.KindInt32:  {"signed(uvarint8", "x >= -0x80000000 && x <= 0x7fffffff", "x >= -0x80000000 && x <= 0x80000000"},
	fast.KindInt64:  {"signed(uvarint8", "", ""},
}

// decodeRead emits the read of a field's wire value (and of ok for an
// optional field), returning on error. It returns the expression holding the
// value: local v, or for a string array dst itself, which it fills in place
// rather than through a temporary array.
//
// Each read has an inline fast path for the common case (an integer or a
// string of at most 8 bytes with 8 bytes of b to load, a one-character
// string) and falls back to package fast's careful primitive, which decides
// every other case, errors included, exactly as before.
func (g *generator) decodeRead(t *template, f *field, dst string) string {
	w := wires[f.f.Kind]
	fail := fmt.Sprintf(`return start, d.fail(err, %sTemplateID, %q, off)`, t.goName, f.f.Name)
	opt := f.f.Optional
	if f.isASCII() {
		careful := func() {
			g.p("var s []byte")
			if opt {
				g.p("if s, ok, off, err = fast.%s(b, off, %d); err != nil {", w.readNull, f.fixedLen)
			} else {
				g.p("if s, off, err = fast.%s(b, off, %d); err != nil {", w.read, f.fixedLen)
			}
			g.p("%s", fail)
			g.p("}")
		}
		setOK := func() {
			if opt {
				g.p("ok = true")
			}
		}
		switch {
		case f.fixedLen == 1:
			// One character with its stop bit, not NUL (0x80 is "" or absent).
			g.p("var v byte")
			g.p("if off < len(b) && b[off] > 0x80 {")
			g.p("v, off = b[off]&0x7f, off+1")
			setOK()
			g.p("} else {")
			careful()
			g.p("v = asciiByte(s)")
			g.p("}")
			return "v"
		case f.fixedLen <= 8:
			// A first byte of 0 or 0x80 is one of the spec's special
			// encodings (10.6.3): left to the careful path.
			g.p("if w, n := ascii8(b, off); n <= %d && w&0xff != 0 {", f.fixedLen)
			g.p("var a [8]byte")
			g.p("binary.LittleEndian.PutUint64(a[:], w)")
			g.p("%s, off = %s(a[:%d]), off+n", dst, f.valType, f.fixedLen)
			setOK()
			g.p("} else {")
			careful()
			g.p("%s = %s{}", dst, f.valType)
			g.p("fast.CopyASCII(%s[:], s)", dst)
			g.p("}")
			return dst
		}
		careful()
		g.p("%s = %s{}", dst, f.valType)
		g.p("fast.CopyASCII(%s[:], s)", dst)
		return dst
	}
	ip := intPaths[f.f.Kind]
	cond := ip.inRange
	if opt {
		cond = ip.nullable
	}
	if cond != "" {
		cond = " && " + cond
	}
	g.p("var v %s", f.valType)
	call := ip.helper + "(b, off)"
	if strings.HasPrefix(ip.helper, "signed(") {
		call += ")"
	}
	g.p("if x, n := %s; n <= 8%s {", call, cond)
	if opt {
		// Nullable: 0 is absent, positive values are one up (spec 10.6.1).
		g.p("v, ok, off = %s(x), x != 0, off+n", f.valType)
		g.p("if x > 0 {")
		g.p("v--")
		g.p("}")
		g.p("} else if v, ok, off, err = fast.%s(b, off); err != nil {", w.readNull)
	} else {
		g.p("v, off = %s(x), off+n", f.valType)
		g.p("} else if v, off, err = fast.%s(b, off); err != nil {", w.read)
	}
	g.p("%s", fail)
	g.p("}")
	return "v"
}

// conv returns the expression assigning wire value expr to the struct field.
func conv(f *field, expr string) string {
	if f.goType != f.valType {
		return f.goType + "(" + expr + ")"
	}
	return expr
}

// goTypeMisfit returns the Go condition under which wire value v, converted
// to the field's Go type as t, does not hold the same number. It is written
// so that the compiler folds it to false when the Go type holds every value
// of the wire type (^T(0) > 0 is a constant: whether T is unsigned).
func goTypeMisfit(f *field, t, v string) string {
	switch f.f.Kind {
	case fast.KindInt32, fast.KindInt64:
		return fmt.Sprintf("%s(%s) != %s || ^%s(0) > 0 && %s < 0", f.valType, t, v, f.goType, v)
	}
	return fmt.Sprintf("%s(%s) != %s || %s < 0", f.valType, t, v, t)
}

// emitDecode emits the method decoding a record's fields into m. The
// presence map comes in two words; each field tests its own bit with a
// constant mask. On error it returns start, the record's offset.
func (g *generator) emitDecode(t *template) {
	g.p("func (d *Decoder) decode%s(b []byte, start, off int, pm, pmLo uint64, m *%s) (int, error) {", t.goName, t.goName)
	g.p("var err error")
	g.p("var ok bool")
	g.p("_, _, _ = err, ok, pmLo")
	bit := 0 // the template id's
	next := func() string {
		bit++
		return pmBit(bit)
	}
	for _, f := range t.fields {
		g.p("// %s", fieldDoc(f.f))
		op := f.f.Op
		set := func(expr string) {
			if f.goType != f.valType && !f.isASCII() {
				// The Go type may be narrower or of another sign.
				g.p("if x := %s; %s {", conv(f, expr), goTypeMisfit(f, "x", expr))
				g.p(`return start, d.fail(fast.ErrRange, %sTemplateID, %q, off)`, t.goName, f.f.Name)
				g.p("}")
			}
			g.p("m.%s = %s", f.goName, conv(f, expr))
		}
		present := func(expr string) {
			if f.f.Optional {
				g.p("m.Has%s = %s", f.goName, expr)
			}
		}
		absent := func() { // optional only
			zero := "0"
			if f.isASCII() && f.fixedLen > 1 {
				zero = f.valType + "{}"
			}
			g.p("m.%s, m.Has%s = %s, false", f.goName, f.goName, zero)
		}
		switch op.Kind {
		case fast.OpConstant:
			if f.f.Optional {
				g.p("m.Has%s = %s", f.goName, next())
			}
		case fast.OpNone:
			g.p("{")
			if v := g.decodeRead(t, f, "m."+f.goName); v == "v" {
				set(v)
			}
			present("ok")
			g.p("}")
		case fast.OpDefault:
			g.p("if %s {", next())
			if v := g.decodeRead(t, f, "m."+f.goName); v == "v" {
				set(v)
			}
			present("ok")
			g.p("} else {")
			if f.init != "" {
				set(f.init)
				present("true")
			} else {
				absent() // mandatory default without a value is S5, rejected by the loader
			}
			g.p("}")
		case fast.OpCopy, fast.OpIncrement:
			s := "d.dict." + f.slot.name
			st := s + "State"
			d5 := fmt.Sprintf(`return start, d.fail(fast.ErrNoPrevious, %sTemplateID, %q, off)`, t.goName, f.f.Name)
			d6 := fmt.Sprintf(`return start, d.fail(fast.ErrEmptyPrevious, %sTemplateID, %q, off)`, t.goName, f.f.Name)
			g.p("if %s {", next())
			assign := fmt.Sprintf("%s, %s = v, slotAssigned", s, st)
			if g.decodeRead(t, f, s) != "v" {
				assign = fmt.Sprintf("%s = slotAssigned", st) // read in place
			}
			if f.f.Optional {
				g.p("if ok {")
				g.p("%s", assign)
				g.p("} else {")
				g.p("%s = slotEmpty", st)
				g.p("}")
			} else {
				g.p("%s", assign)
			}
			g.p("} else {")
			g.p("switch %s {", st)
			if op.Kind == fast.OpIncrement {
				g.p("case slotAssigned:")
				g.p("%s++ // wraps from the type's maximum to its minimum (6.3.6)", s)
			}
			g.p("case slotUndefined:")
			switch {
			case f.init != "":
				g.p("%s, %s = %s, slotAssigned", s, st, f.init)
			case f.f.Optional:
				g.p("%s = slotEmpty", st)
			default:
				g.p("%s", d5)
			}
			if !f.f.Optional {
				g.p("case slotEmpty:")
				g.p("%s", d6)
			}
			g.p("}")
			g.p("}")
			if f.f.Optional {
				g.p("if %s == slotAssigned {", st)
				set(s)
				present("true")
				g.p("} else {")
				absent()
				g.p("}")
			} else {
				set(s)
			}
		}
	}
	g.p("return off, nil")
	g.p("}")
	g.p("")
}

func (g *generator) emitEncoder() {
	g.p("// Encoder encodes records of the generated templates with minimal presence")
	g.p("// maps: a field is left out whenever the decoder's dictionary or initial")
	g.p("// value gives it, and the template id is left out when it repeats. Its")
	g.p("// dictionary mirrors a Decoder's: call Reset wherever the decoder resets.")
	g.p("// An Encoder is not safe for concurrent use; the zero value is ready to use")
	g.p("// and allocates nothing in steady state.")
	g.p("type Encoder struct {")
	g.p("// ExplicitTemplateID makes every record carry its template id, even")
	g.p("// when it repeats (the decoder accepts both forms).")
	g.p("ExplicitTemplateID bool")
	g.p("dict dictionary")
	g.p("pm fast.PMapBuilder")
	g.p("scratch []byte")
	g.p("}")
	g.p("")
	g.p("// Reset forgets the dictionary, including the previous template id.")
	g.p("func (e *Encoder) Reset() {")
	g.p("e.dict = dictionary{}")
	g.p("}")
	g.p("")
}

// encodeWrite emits the append of expression val (wire value type) to
// e.scratch, nullable when the field is optional, present being the Go
// expression of its presence.
func (g *generator) encodeWrite(f *field, val, present string) {
	w := wires[f.f.Kind]
	arg := val
	if f.isASCII() {
		if f.fixedLen == 1 {
			arg = "asciiOne(&one, " + val + ")"
		} else {
			arg = "trimNUL(" + val + "[:])"
		}
	}
	if f.f.Optional {
		g.p("e.scratch = fast.%s(e.scratch, %s, %s)", w.appNull, arg, present)
	} else {
		g.p("e.scratch = fast.%s(e.scratch, %s)", w.app, arg)
	}
}

func (g *generator) emitEncode(t *template) {
	g.p("// Append%s appends the encoding of m (presence map, template id unless it", t.goName)
	g.p("// repeats, fields) to dst and returns the extended slice. It fails only when")
	g.p("// a value does not fit its wire type; dst is then returned unchanged.")
	g.p("func (e *Encoder) Append%s(dst []byte, m *%s) ([]byte, error) {", t.goName, t.goName)
	g.p("e.pm.Reset()")
	g.p("e.scratch = e.scratch[:0]")
	for _, f := range t.fields {
		if f.fixedLen == 1 && f.f.Op.Kind != fast.OpConstant {
			g.p("var one [1]byte // backs a one-character string")
			break
		}
	}
	g.p("dict := e.dict // committed at the end, so a failed call changes nothing")
	g.p("if !e.ExplicitTemplateID && dict.tidState == slotAssigned && dict.tid == %sTemplateID {", t.goName)
	g.p("e.pm.Add(false)")
	g.p("} else {")
	g.p("e.pm.Add(true)")
	g.p("e.scratch = fast.AppendUint32(e.scratch, %sTemplateID)", t.goName)
	g.p("dict.tid, dict.tidState = %sTemplateID, slotAssigned", t.goName)
	g.p("}")
	for _, f := range t.fields {
		g.p("// %s", fieldDoc(f.f))
		op := f.f.Op
		if op.Kind == fast.OpConstant {
			if f.f.Optional {
				g.p("e.pm.Add(m.Has%s)", f.goName)
			}
			continue
		}
		g.p("{")
		has := "true"
		if f.f.Optional && op.Kind != fast.OpConstant {
			has = "m.Has" + f.goName
		}
		if f.isASCII() {
			g.p("v := m.%s", f.goName)
			if f.fixedLen > 1 {
				// Spec 10.6.3 gives 00 xx a meaning of its own: a string
				// longer than one character cannot start with NUL
				// (fast.Encoder refuses it too).
				g.p("if s := trimNUL(v[:]); len(s) > 1 && s[0] == 0 {")
				g.p(`return dst, &EncodeError{TemplateID: %sTemplateID, Field: %q, Err: fast.ErrNotEncodable}`, t.goName, f.f.Name)
				g.p("}")
			}
		} else {
			g.p("v := %s(m.%s)", f.valType, f.goName)
		}
		if op.Kind != fast.OpNone || f.f.Optional {
			g.p("has := %s", has)
		}
		if !f.isASCII() && f.goType != f.valType {
			// Absent values are not written, so only present ones must fit.
			check := "has && "
			if !f.f.Optional {
				check = ""
			}
			g.p("if %s%s != m.%s {", check, conv(f, "v"), f.goName)
			g.p(`return dst, &EncodeError{TemplateID: %sTemplateID, Field: %q, Err: fast.ErrRange}`, t.goName, f.f.Name)
			g.p("}")
		}
		switch op.Kind {
		case fast.OpNone:
			g.encodeWrite(f, "v", "has")
		case fast.OpDefault:
			switch {
			case f.init != "":
				g.p("if has && v == %s {", f.init)
			case f.f.Optional:
				g.p("if !has {")
			default:
				g.p("if false {")
			}
			g.p("e.pm.Add(false)")
			g.p("} else {")
			g.p("e.pm.Add(true)")
			g.encodeWrite(f, "v", "has")
			g.p("}")
		case fast.OpCopy, fast.OpIncrement:
			s := "dict." + f.slot.name
			st := s + "State"
			// What the decoder derives from a clear bit: implied, impliedHas,
			// and whether a clear bit is possible at all (canImply).
			g.p("var implied %s", f.valType)
			g.p("impliedHas, canImply := false, true")
			g.p("switch %s {", st)
			g.p("case slotAssigned:")
			if op.Kind == fast.OpIncrement {
				g.p("implied, impliedHas = %s+1, true", s)
			} else {
				g.p("implied, impliedHas = %s, true", s)
			}
			switch {
			case f.init != "":
				g.p("case slotUndefined:")
				g.p("implied, impliedHas = %s, true", f.init)
				if !f.f.Optional {
					g.p("case slotEmpty:")
					g.p("canImply = false")
				}
			case !f.f.Optional:
				g.p("default: // a mandatory field must be sent")
				g.p("canImply = false")
			}
			g.p("}")
			g.p("if canImply && has == impliedHas && (!has || v == implied) {")
			g.p("e.pm.Add(false)")
			g.p("} else {")
			g.p("e.pm.Add(true)")
			g.encodeWrite(f, "v", "has")
			g.p("}")
			g.p("if has {")
			g.p("%s, %s = v, slotAssigned", s, st)
			g.p("} else {")
			g.p("%s = slotEmpty", st)
			g.p("}")
		}
		g.p("}")
	}
	g.p("e.dict = dict")
	g.p("dst = e.pm.AppendTo(dst)")
	g.p("return append(dst, e.scratch...), nil")
	g.p("}")
	g.p("")
}

func (g *generator) emitHelpers() {
	g.p("// EncodeError describes a record value that cannot be encoded.")
	g.p("type EncodeError struct {")
	g.p("TemplateID uint32")
	g.p("Field string")
	g.p("Err error // fast.ErrRange or fast.ErrNotEncodable")
	g.p("}")
	g.p("")
	g.p("func (e *EncodeError) Error() string {")
	g.p("return %q + strconv.FormatUint(uint64(e.TemplateID), 10) + \" field \" + e.Field + \": \" + e.Err.Error()", g.opt.Package+": encode template ")
	g.p("}")
	g.p("")
	g.p("// Unwrap returns the cause.")
	g.p("func (e *EncodeError) Unwrap() error { return e.Err }")
	g.p("")
	g.p("// fail makes the sticky error for a failure at byte offset off.")
	g.p("func (d *Decoder) fail(err error, tid uint32, field string, off int) error {")
	g.p("d.err = &fast.DecodeError{Code: fast.Code(err), TemplateID: tid, Field: field, Offset: off, Err: err}")
	g.p("return d.err")
	g.p("}")
	g.p("")
	g.p("%s", decodeHelpers)
	g.p("%s", windowHelpers)
	if !g.opt.External {
		g.p("%s", tokenHelpers)
	}
	g.p("// asciiByte returns the single character of s, a string in wire form, or")
	g.p("// 0 for the empty string.")
	g.p("func asciiByte(s []byte) byte {")
	g.p("if len(s) == 0 {")
	g.p("return 0")
	g.p("}")
	g.p("return s[0] & 0x7f")
	g.p("}")
	g.p("")
	g.p("// asciiOne returns c as a string: empty when c is 0.")
	g.p("func asciiOne(buf *[1]byte, c byte) []byte {")
	g.p("if c == 0 {")
	g.p("return buf[:0]")
	g.p("}")
	g.p("buf[0] = c")
	g.p("return buf[:]")
	g.p("}")
	g.p("")
	g.p("// trimNUL drops the NUL padding of a fixed-length string.")
	g.p("func trimNUL(s []byte) []byte {")
	g.p("for len(s) > 0 && s[len(s)-1] == 0 {")
	g.p("s = s[:len(s)-1]")
	g.p("}")
	g.p("return s")
	g.p("}")
	g.p("")
	g.p("// TemplateNames maps the generated template ids to their template names.")
	g.p("var TemplateNames = map[uint32]string{")
	ids := make([]*template, len(g.templates))
	copy(ids, g.templates)
	sort.Slice(ids, func(i, j int) bool { return ids[i].t.ID < ids[j].t.ID })
	for _, t := range ids {
		g.p("%d: %q,", t.t.ID, t.t.Name)
	}
	g.p("}")
}

// decodeHelpers are the inlinable fast paths of the generated decoder. Each
// returns n == 0 when the careful primitive of package fast must decide.
const decodeHelpers = `// readPMap reads the presence map at b[off] into two words, the first bit in
// the top bit of hi (bits past the transmitted ones read as zeros), through
// fast.ReadPMap, which enforces maxBytes and fast.MaxPMapBits. DecodeRecord
// reads the usual one- and two-byte maps inline and calls it for the rest.
func readPMap(b []byte, off, maxBytes int) (hi, lo uint64, next int, err error) {
	pm, next, err := fast.ReadPMap(b, off, maxBytes)
	if err != nil {
		return 0, 0, next, err
	}
	for i := 0; i < 128; i++ {
		hi, lo = hi<<1|lo>>63, lo<<1
		if pm.Next() {
			lo |= 1
		}
	}
	return hi, lo, next, nil
}

// uvarint8 decodes an unsigned stop-bit integer of at most 8 bytes at b[off]
// with one 8-byte load and no loop: the stop byte is found with a trailing-zero
// count, the bytes are put in big-endian order and their 7-bit groups are
// packed by halves (14, 28, then 56 bits). n is the length; n > 8 when fewer
// than 8 bytes are left or the integer is longer (the careful path's cases).
// It is small enough to be inlined.
func uvarint8(b []byte, off int) (v uint64, n int) {
	if len(b)-off < 8 {
		return 0, 9
	}
	w := binary.LittleEndian.Uint64(b[off:])
	t := bits.TrailingZeros64(w & 0x8080808080808080) // 8n-1; 64 without a stop bit
	// The shift keeps the n bytes, the stop byte on top; the shift count is
	// masked so that the compiler emits a plain shift (without a stop bit
	// the result is unused). The masks of the first packing step drop the
	// stop bit.
	x := bits.ReverseBytes64(w << (^t & 63)) // ^t&63 is 63-t
	x = x&0x007f007f007f007f | x>>1&0x3f803f803f803f80
	x = x&0x00003fff00003fff | x>>2&0x0fffc0000fffc000
	x = x&0x000000000fffffff | x>>4&0x00fffffff0000000
	return x, t>>3 + 1
}

// signed turns uvarint8's result into a signed integer's: the 7n-bit value
// is sign-extended from the first byte's sign bit (0x40). It is separate from
// uvarint8 so that both stay within the inlining budget.
func signed(x uint64, n int) (v int64, m int) {
	sh := (64 - 7*uint(n)) & 63
	return int64(x<<sh) >> sh, n
}

// ascii8 finds an ASCII string of at most 8 bytes at b[off] with one 8-byte
// load: w holds its bytes in order from the low byte, stop bit cleared,
// bytes past it zero. n is the length; n > 8 as for uvarint8.
func ascii8(b []byte, off int) (w uint64, n int) {
	if len(b)-off < 8 {
		return 0, 9
	}
	w = binary.LittleEndian.Uint64(b[off:])
	n = bits.TrailingZeros64(w&0x8080808080808080)>>3 + 1
	sh := (64 - 8*uint(n)) & 63
	return w << sh >> sh & 0x7f7f7f7f7f7f7f7f, n
}
`
