package fast

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Namespace is the FAST 1.1 template definition namespace. Elements in other
// namespaces are skipped, as the spec allows; elements without a namespace
// are read as FAST elements because many exchange files omit it.
const Namespace = "http://www.fixprotocol.org/ns/fast/td/1.1"

// Kind is the type of a field.
type Kind uint8

// Field kinds.
const (
	KindUint32 Kind = iota + 1
	KindInt32
	KindUint64
	KindInt64
	KindDecimal
	KindASCII
	KindUnicode
	KindByteVector
	KindSequence
	KindGroup
	KindTemplateRef
)

var kindNames = [...]string{"", "uInt32", "int32", "uInt64", "int64", "decimal", "string", "unicode", "byteVector", "sequence", "group", "templateRef"}

// String returns the XML element name of the kind ("unicode" for a string
// with charset="unicode").
func (k Kind) String() string {
	if int(k) < len(kindNames) && k != 0 {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// IsInteger reports whether k is one of the four integer kinds.
func (k Kind) IsInteger() bool { return k >= KindUint32 && k <= KindInt64 }

// IsBytes reports whether k is carried as bytes: ascii or unicode string, or
// byteVector.
func (k Kind) IsBytes() bool { return k >= KindASCII && k <= KindByteVector }

// OpKind is a field operator.
type OpKind uint8

// Field operators. OpNone means the field has no operator element.
const (
	OpNone OpKind = iota
	OpConstant
	OpDefault
	OpCopy
	OpIncrement
	OpDelta
	OpTail
)

var opNames = [...]string{"none", "constant", "default", "copy", "increment", "delta", "tail"}

// String returns the operator's XML element name, or "none".
func (o OpKind) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "OpKind(" + strconv.Itoa(int(o)) + ")"
}

// Dictionary names with a meaning in the spec; any other name is a named
// (user) dictionary shared by every field that names it.
const (
	DictGlobal   = "global"
	DictTemplate = "template"
	DictType     = "type"
)

// Operator is a field operator with its initial value and dictionary entry.
type Operator struct {
	Kind OpKind
	// Value is the initial value as written in the XML; it is only
	// meaningful when HasValue is true.
	Value    string
	HasValue bool
	// Key is the dictionary key. The loader fills it: the key attribute, or
	// else the field's name (for the individual operators of a decimal, the
	// decimal's name with "/exponent" or "/mantissa" appended).
	Key string
	// Dictionary is the dictionary the entry lives in, resolved by the
	// loader: the operator's attribute, else the nearest enclosing field,
	// template or templates element that sets one, else DictGlobal.
	Dictionary string
	// Attrs holds attributes the loader does not know, kept as written.
	Attrs []Attr
}

// Field is one field instruction of a template.
type Field struct {
	Name string
	// NS is the field's name namespace (ns attribute), often empty.
	NS string
	// ID is the id attribute as written (a FIX tag number in most files),
	// empty when absent.
	ID       string
	Kind     Kind
	Optional bool
	// Op is the field's operator. For a decimal with individual operators it
	// is OpNone and Exponent and Mantissa are set instead.
	Op Operator
	// Exponent and Mantissa are the individual operators of a decimal; both
	// are nil or both are non-nil (an omitted one is OpNone).
	Exponent, Mantissa *Operator
	// Length is the length field of a sequence (a uInt32 with its own
	// operator, optional when the sequence is). Its name is generated from
	// the sequence's when the XML has no length element. Nil for other
	// kinds.
	Length *Field
	// Fields are the members of a group or of each sequence element.
	Fields []*Field
	// Ref is the template name of a static templateRef; empty for a
	// dynamic one.
	Ref string
	// TypeRef is the typeRef of a group or sequence, if any.
	TypeRef string
	// Dictionary is the dictionary attribute set on this element itself,
	// empty when inherited.
	Dictionary string
	// Attrs holds attributes the loader does not know (SSE's decimalPlaces,
	// for instance), kept as written.
	Attrs []Attr
	// Line is the line of the field's element in the template file.
	Line int
}

// Attr is an XML attribute kept as written.
type Attr struct {
	Name, Value string
}

// Template is one template definition.
type Template struct {
	// ID is the template id; only valid when HasID is true. Templates
	// without an id can only be used through a static templateRef.
	ID    uint32
	HasID bool
	Name  string
	NS    string
	// Reset means every dictionary is reset before a message of this
	// template is decoded (reset="Y").
	Reset bool
	// Dictionary is the dictionary attribute of the template, or the one
	// inherited from the templates element; empty means global.
	Dictionary string
	// TypeRef is the application type (typeRef element), if any.
	TypeRef string
	Fields  []*Field
	Attrs   []Attr
	Line    int
}

// Templates is a set of templates loaded from one or more XML files. Treat it
// as read-only once decoders use it.
type Templates struct {
	// List holds the templates in file order.
	List   []*Template
	byID   map[uint32]*Template
	byName map[string]*Template
}

// ByID returns the template with the given id.
func (ts *Templates) ByID(id uint32) (*Template, bool) {
	t, ok := ts.byID[id]
	return t, ok
}

// ByName returns the template with the given name.
func (ts *Templates) ByName(name string) (*Template, bool) {
	t, ok := ts.byName[name]
	return t, ok
}

// TemplateError reports a malformed template file.
type TemplateError struct {
	Line    int    // 1-based line of the offending element, 0 if unknown
	Element string // element name, e.g. "uInt32" or "template"
	Name    string // name attribute of the element, if any
	Msg     string
	Err     error // underlying error (XML syntax, number syntax), may be nil
}

func (e *TemplateError) Error() string {
	var b strings.Builder
	b.WriteString("fast: templates")
	if e.Line > 0 {
		fmt.Fprintf(&b, " line %d", e.Line)
	}
	if e.Element != "" {
		fmt.Fprintf(&b, " <%s", e.Element)
		if e.Name != "" {
			fmt.Fprintf(&b, " name=%q", e.Name)
		}
		b.WriteString(">")
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(causeText(e.Err))
	}
	return b.String()
}

func (e *TemplateError) Unwrap() error { return e.Err }

// LoadTemplatesFile reads a template XML file.
func LoadTemplatesFile(path string) (*Templates, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseTemplates(data)
}

// LoadTemplates reads template XML from r.
func LoadTemplates(r io.Reader) (*Templates, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return ParseTemplates(data)
}

// ParseTemplates parses template XML: a <templates> element holding
// <template> elements, or a single <template> as the root. A malformed file
// gives a *TemplateError naming the line and the element.
func ParseTemplates(data []byte) (*Templates, error) {
	root, err := parseTree(data)
	if err != nil {
		return nil, err
	}
	ts := &Templates{}
	if err := ts.add(root); err != nil {
		return nil, err
	}
	return ts, nil
}

// Merge adds the templates of other to ts; ids and names must not clash.
func (ts *Templates) Merge(other *Templates) error {
	for _, t := range other.List {
		if err := ts.insert(t); err != nil {
			return err
		}
	}
	return ts.check()
}

// node is a FAST element of the parsed XML tree.
type node struct {
	name     string
	attrs    []xml.Attr
	children []*node
	line     int
}

func (n *node) attr(name string) (string, bool) {
	for _, a := range n.attrs {
		if a.Name.Local == name && (a.Name.Space == "" || a.Name.Space == Namespace) {
			return a.Value, true
		}
	}
	return "", false
}

func (n *node) fail(format string, args ...any) *TemplateError {
	name, _ := n.attr("name")
	return &TemplateError{Line: n.line, Element: n.name, Name: name, Msg: fmt.Sprintf(format, args...)}
}

// maxTemplateDepth bounds element nesting so a hostile file cannot exhaust
// the stack of the recursive converters.
const maxTemplateDepth = 64

func parseTree(data []byte) (*node, error) {
	dec := xml.NewDecoder(bytes.NewReader(data))
	var stack []*node
	var root *node
	skip := 0 // depth inside a foreign-namespace element
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			line, _ := dec.InputPos()
			var se *xml.SyntaxError
			if errors.As(err, &se) {
				line = se.Line
			}
			return nil, &TemplateError{Line: line, Msg: "malformed XML", Err: err}
		}
		switch t := tok.(type) {
		case xml.StartElement:
			line, _ := dec.InputPos()
			if skip > 0 || (t.Name.Space != "" && t.Name.Space != Namespace) {
				skip++
				continue
			}
			n := &node{name: t.Name.Local, attrs: t.Attr, line: line}
			if len(stack) == 0 {
				if root != nil {
					return nil, n.fail("second root element")
				}
				root = n
			} else {
				p := stack[len(stack)-1]
				p.children = append(p.children, n)
			}
			stack = append(stack, n)
			if len(stack) > maxTemplateDepth {
				return nil, n.fail("elements nested more than %d deep", maxTemplateDepth)
			}
		case xml.EndElement:
			if skip > 0 {
				skip--
				continue
			}
			stack = stack[:len(stack)-1]
		}
	}
	if root == nil {
		return nil, &TemplateError{Msg: "no template element"}
	}
	return root, nil
}

func (ts *Templates) add(root *node) error {
	switch root.name {
	case "template":
		t, err := parseTemplate(root, "")
		if err != nil {
			return err
		}
		if err := ts.insert(t); err != nil {
			return err
		}
	case "templates":
		dict, _ := root.attr("dictionary")
		for _, c := range root.children {
			if c.name != "template" {
				return c.fail("unexpected element in <templates>")
			}
			t, err := parseTemplate(c, dict)
			if err != nil {
				return err
			}
			if err := ts.insert(t); err != nil {
				return err
			}
		}
	default:
		return root.fail("root element must be <templates> or <template>")
	}
	return ts.check()
}

func (ts *Templates) insert(t *Template) error {
	if ts.byID == nil {
		ts.byID = make(map[uint32]*Template)
		ts.byName = make(map[string]*Template)
	}
	if t.HasID {
		if _, dup := ts.byID[t.ID]; dup {
			return &TemplateError{Line: t.Line, Element: "template", Name: t.Name, Msg: fmt.Sprintf("duplicate template id %d", t.ID)}
		}
		ts.byID[t.ID] = t
	}
	if t.Name != "" {
		if _, dup := ts.byName[t.Name]; dup {
			return &TemplateError{Line: t.Line, Element: "template", Name: t.Name, Msg: "duplicate template name"}
		}
		ts.byName[t.Name] = t
	}
	ts.List = append(ts.List, t)
	return nil
}

// check verifies that every static templateRef names a template and that
// static references do not form a cycle.
func (ts *Templates) check() error {
	state := make(map[*Template]uint8) // 1 visiting, 2 done
	var visit func(t *Template) error
	var walk func(fs []*Field) error
	walk = func(fs []*Field) error {
		for _, f := range fs {
			switch f.Kind {
			case KindTemplateRef:
				if f.Ref == "" {
					continue
				}
				r, ok := ts.byName[f.Ref]
				if !ok {
					return &TemplateError{Line: f.Line, Element: "templateRef", Name: f.Ref, Msg: "unknown template"}
				}
				if state[r] == 1 {
					return &TemplateError{Line: f.Line, Element: "templateRef", Name: f.Ref, Msg: "static templateRef cycle"}
				}
				if err := visit(r); err != nil {
					return err
				}
			case KindGroup, KindSequence:
				if err := walk(f.Fields); err != nil {
					return err
				}
			}
		}
		return nil
	}
	visit = func(t *Template) error {
		if state[t] != 0 {
			return nil
		}
		state[t] = 1
		err := walk(t.Fields)
		state[t] = 2
		return err
	}
	for _, t := range ts.List {
		if err := visit(t); err != nil {
			return err
		}
	}
	return nil
}

var knownTemplateAttrs = []string{"name", "ns", "templateNs", "id", "reset", "dictionary", "xmlns"}

func parseTemplate(n *node, inheritedDict string) (*Template, error) {
	t := &Template{Line: n.line}
	t.Name, _ = n.attr("name")
	t.NS, _ = n.attr("ns")
	if id, ok := n.attr("id"); ok {
		v, err := strconv.ParseUint(strings.TrimSpace(id), 10, 32)
		if err != nil {
			e := n.fail("bad id %q", id)
			e.Err = err
			return nil, e
		}
		t.ID, t.HasID = uint32(v), true
	}
	if r, ok := n.attr("reset"); ok {
		t.Reset = isYes(r)
	}
	t.Dictionary = inheritedDict
	if d, ok := n.attr("dictionary"); ok {
		t.Dictionary = d
	}
	t.Attrs = unknownAttrs(n, knownTemplateAttrs)
	children := n.children
	if len(children) > 0 && children[0].name == "typeRef" {
		t.TypeRef, _ = children[0].attr("name")
		children = children[1:]
	}
	fs, err := parseFields(children, dictOrGlobal(t.Dictionary))
	if err != nil {
		return nil, err
	}
	t.Fields = fs
	return t, nil
}

func isYes(s string) bool {
	switch strings.TrimSpace(strings.ToLower(s)) {
	case "y", "yes", "true", "1":
		return true
	}
	return false
}

func dictOrGlobal(d string) string {
	if d == "" {
		return DictGlobal
	}
	return d
}

func unknownAttrs(n *node, known []string) []Attr {
	var out []Attr
next:
	for _, a := range n.attrs {
		if a.Name.Space == "xmlns" {
			continue
		}
		for _, k := range known {
			if a.Name.Local == k {
				continue next
			}
		}
		out = append(out, Attr{Name: a.Name.Local, Value: a.Value})
	}
	return out
}

var fieldKinds = map[string]Kind{
	"uInt32": KindUint32, "int32": KindInt32, "uInt64": KindUint64, "int64": KindInt64,
	"decimal": KindDecimal, "string": KindASCII, "byteVector": KindByteVector,
	"sequence": KindSequence, "group": KindGroup, "templateRef": KindTemplateRef,
}

var knownFieldAttrs = []string{"name", "ns", "id", "presence", "charset", "dictionary", "xmlns"}

func parseFields(nodes []*node, dict string) ([]*Field, error) {
	fs := make([]*Field, 0, len(nodes))
	for _, c := range nodes {
		f, err := parseField(c, dict)
		if err != nil {
			return nil, err
		}
		fs = append(fs, f)
	}
	return fs, nil
}

func parseField(n *node, dict string) (*Field, error) {
	kind, ok := fieldKinds[n.name]
	if !ok {
		return nil, n.fail("unknown field element")
	}
	f := &Field{Kind: kind, Line: n.line}
	f.Name, _ = n.attr("name")
	f.NS, _ = n.attr("ns")
	f.ID, _ = n.attr("id")
	f.Attrs = unknownAttrs(n, knownFieldAttrs)
	if f.Name == "" && kind != KindTemplateRef {
		return nil, n.fail("field without a name")
	}
	if p, ok := n.attr("presence"); ok {
		switch p {
		case "optional":
			f.Optional = true
		case "mandatory":
		default:
			return nil, n.fail("bad presence %q", p)
		}
	}
	if d, ok := n.attr("dictionary"); ok {
		f.Dictionary = d
		dict = d
	}
	if kind == KindASCII {
		if cs, ok := n.attr("charset"); ok {
			switch cs {
			case "unicode":
				f.Kind = KindUnicode
			case "ascii":
			default:
				return nil, n.fail("bad charset %q", cs)
			}
		}
	}
	switch kind {
	case KindTemplateRef:
		f.Ref = f.Name
		if len(n.children) > 0 {
			return nil, n.fail("templateRef has children")
		}
		return f, nil
	case KindGroup, KindSequence:
		return f, parseComposite(f, n, dict)
	case KindDecimal:
		return f, parseDecimal(f, n, dict)
	}
	f.Op = Operator{Key: f.Name, Dictionary: dict}
	// Scalar: at most one operator element; strings and byteVectors may
	// also carry a <length> element naming their length field, which has no
	// wire meaning of its own.
	for _, c := range n.children {
		if c.name == "length" && (kind == KindASCII || kind == KindByteVector) {
			continue
		}
		if f.Op.Kind != OpNone {
			return nil, c.fail("second operator")
		}
		op, err := parseOperator(c, f.Name, dict)
		if err != nil {
			return nil, err
		}
		f.Op = op
	}
	return f, checkOperator(n, f.Kind, f.Optional, &f.Op)
}

func parseComposite(f *Field, n *node, dict string) error {
	children := n.children
	if len(children) > 0 && children[0].name == "typeRef" {
		f.TypeRef, _ = children[0].attr("name")
		children = children[1:]
	}
	if f.Kind == KindSequence {
		f.Length = &Field{Name: f.Name + "Length", Kind: KindUint32, Optional: f.Optional, Line: n.line}
		if len(children) > 0 && children[0].name == "length" {
			ln := children[0]
			children = children[1:]
			if name, ok := ln.attr("name"); ok && name != "" {
				f.Length.Name = name
			}
			f.Length.ID, _ = ln.attr("id")
			f.Length.NS, _ = ln.attr("ns")
			f.Length.Attrs = unknownAttrs(ln, knownFieldAttrs)
			ldict := dict
			if d, ok := ln.attr("dictionary"); ok {
				f.Length.Dictionary, ldict = d, d
			}
			for _, c := range ln.children {
				if f.Length.Op.Kind != OpNone {
					return c.fail("second operator")
				}
				op, err := parseOperator(c, f.Length.Name, ldict)
				if err != nil {
					return err
				}
				f.Length.Op = op
			}
			if err := checkOperator(ln, KindUint32, f.Optional, &f.Length.Op); err != nil {
				return err
			}
		} else {
			f.Length.Op = Operator{Key: f.Length.Name, Dictionary: dict}
		}
	}
	fs, err := parseFields(children, dict)
	if err != nil {
		return err
	}
	f.Fields = fs
	return nil
}

func parseDecimal(f *Field, n *node, dict string) error {
	f.Op = Operator{Key: f.Name, Dictionary: dict}
	for _, c := range n.children {
		switch c.name {
		case "exponent", "mantissa":
			if f.Op.Kind != OpNone || f.Op.HasValue {
				return c.fail("decimal has both a field operator and individual operators")
			}
			if f.Exponent == nil {
				f.Exponent = &Operator{Key: f.Name + "/exponent", Dictionary: dict}
				f.Mantissa = &Operator{Key: f.Name + "/mantissa", Dictionary: dict}
			}
			dst := f.Exponent
			if c.name == "mantissa" {
				dst = f.Mantissa
			}
			if dst.Kind != OpNone {
				return c.fail("second <%s>", c.name)
			}
			subDict := dict
			if d, ok := c.attr("dictionary"); ok {
				subDict = d
			}
			for _, oc := range c.children {
				if dst.Kind != OpNone {
					return oc.fail("second operator")
				}
				op, err := parseOperator(oc, dst.Key, subDict)
				if err != nil {
					return err
				}
				*dst = op
			}
		default:
			if f.Exponent != nil || f.Op.Kind != OpNone {
				return c.fail("second operator")
			}
			op, err := parseOperator(c, f.Name, dict)
			if err != nil {
				return err
			}
			f.Op = op
		}
	}
	if f.Exponent != nil {
		if err := checkOperator(n, KindInt32, f.Optional, f.Exponent); err != nil {
			return err
		}
		if err := checkOperator(n, KindInt64, false, f.Mantissa); err != nil {
			return err
		}
		if f.Exponent.HasValue {
			if v, err := strconv.ParseInt(f.Exponent.Value, 10, 32); err != nil || v < -63 || v > 63 {
				return n.fail("exponent initial value %q outside -63..63 (R1)", f.Exponent.Value)
			}
		}
		return nil
	}
	return checkOperator(n, KindDecimal, f.Optional, &f.Op)
}

var operatorKinds = map[string]OpKind{
	"constant": OpConstant, "default": OpDefault, "copy": OpCopy,
	"increment": OpIncrement, "delta": OpDelta, "tail": OpTail,
}

func parseOperator(n *node, defaultKey, dict string) (Operator, error) {
	k, ok := operatorKinds[n.name]
	if !ok {
		return Operator{}, n.fail("unknown operator")
	}
	op := Operator{Kind: k, Key: defaultKey, Dictionary: dict}
	op.Value, op.HasValue = n.attr("value")
	if key, ok := n.attr("key"); ok && key != "" {
		op.Key = key
	}
	if d, ok := n.attr("dictionary"); ok && d != "" {
		op.Dictionary = d
	}
	op.Attrs = unknownAttrs(n, []string{"value", "key", "dictionary", "nsKey", "xmlns"})
	if len(n.children) > 0 {
		return op, n.children[0].fail("unexpected element inside an operator")
	}
	return op, nil
}

// checkOperator applies the static rules of the spec: which operators a type
// accepts (S2), constant needs a value (S4), mandatory default needs one
// (S5), and initial values parse as the field's type (S3).
func checkOperator(n *node, kind Kind, optional bool, op *Operator) error {
	switch op.Kind {
	case OpIncrement:
		if !kind.IsInteger() {
			return n.fail("increment on a %s field (S2)", kind)
		}
	case OpTail:
		if !kind.IsBytes() {
			return n.fail("tail on a %s field (S2)", kind)
		}
	case OpConstant:
		if !op.HasValue {
			return n.fail("constant without a value (S4)")
		}
	case OpDefault:
		if !op.HasValue && !optional {
			return n.fail("mandatory default without a value (S5)")
		}
	}
	if op.HasValue {
		if _, err := parseInitial(kind, op.Value); err != nil {
			e := n.fail("bad initial value %q for %s (S3)", op.Value, kind)
			e.Err = err
			return e
		}
	}
	return nil
}

// initial is a parsed initial value.
type initial struct {
	u   uint64 // integer bits (two's complement for signed kinds) or mantissa
	exp int32  // decimal exponent
	b   []byte // string and byteVector value
}

// parseInitial parses an initial value as the spec's chapter 7 says: integers
// in decimal, decimals normalised so that the mantissa has no trailing zero
// ("12000" is mantissa 12, exponent 3), byteVectors in hex, strings as is.
func parseInitial(kind Kind, s string) (initial, error) {
	switch kind {
	case KindUint32, KindUint64:
		bits := 64
		if kind == KindUint32 {
			bits = 32
		}
		v, err := strconv.ParseUint(strings.TrimSpace(s), 10, bits)
		return initial{u: v}, err
	case KindInt32, KindInt64:
		bits := 64
		if kind == KindInt32 {
			bits = 32
		}
		v, err := strconv.ParseInt(strings.TrimSpace(s), 10, bits)
		return initial{u: uint64(v)}, err
	case KindDecimal:
		m, e, err := ParseDecimal(s)
		return initial{u: uint64(m), exp: e}, err
	case KindByteVector:
		// The spec writes byteVector initial values in hex; QuickFAST's test
		// files write raw text, so anything that is not hex is taken as is.
		if b, ok := parseHex(s); ok {
			return initial{b: b}, nil
		}
		return initial{b: []byte(s)}, nil
	case KindASCII:
		for i := 0; i < len(s); i++ {
			if s[i] >= 0x80 {
				return initial{}, errors.New("non-ASCII character")
			}
		}
	}
	return initial{b: []byte(s)}, nil
}

// ParseDecimal parses a decimal number such as "-123.450" or "1.5e3" into the
// normalised FAST form: the mantissa without trailing zeros and the exponent
// (so "12000" is 12, 3). It fails when the exponent is outside -63..63 or the
// mantissa does not fit an int64.
func ParseDecimal(s string) (mantissa int64, exponent int32, err error) {
	s = strings.TrimSpace(s)
	exp := 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil {
			return 0, 0, fmt.Errorf("fast: bad decimal %q", s)
		}
		exp, s = e, s[:i]
	}
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	exp -= len(frac)
	if intPart+frac == "" {
		return 0, 0, fmt.Errorf("fast: bad decimal %q", s)
	}
	for _, c := range intPart + frac {
		if c < '0' || c > '9' {
			return 0, 0, fmt.Errorf("fast: bad decimal %q", s)
		}
	}
	if digits == "" {
		return 0, 0, nil
	}
	for len(digits) > 1 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
		exp++
	}
	m, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || m > 1<<63 || (m == 1<<63 && !neg) {
		return 0, 0, fmt.Errorf("fast: decimal %q: mantissa out of range", s)
	}
	if exp < -63 || exp > 63 {
		return 0, 0, fmt.Errorf("fast: decimal %q: exponent out of range -63..63 (R1)", s)
	}
	if neg {
		return -int64(m), int32(exp), nil
	}
	return int64(m), int32(exp), nil
}

func parseHex(s string) ([]byte, bool) {
	h := strings.Join(strings.Fields(s), "")
	if len(h)%2 != 0 {
		return nil, false
	}
	b := make([]byte, 0, len(h)/2)
	for i := 0; i < len(h); i += 2 {
		v, err := strconv.ParseUint(h[i:i+2], 16, 8)
		if err != nil {
			return nil, false
		}
		b = append(b, byte(v))
	}
	return b, true
}
