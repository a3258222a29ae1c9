package fast

import (
	"fmt"
	"math"
)

// instr is a template field compiled for the decoder and encoder: operator
// and presence rules resolved, initial value parsed, dictionary entry bound
// to a slot.
type instr struct {
	f        *Field
	fid      int32 // index of f in compiled.fields
	kind     Kind
	op       OpKind
	optional bool
	nullable bool // the wire value is nullable: optional and not constant
	signed   bool // int32 or int64
	pmapBit  bool // consumes a bit of the enclosing presence map
	hasInit  bool
	init     initial
	slot     int32 // dictionary slot; -1 when the operator keeps no state
	poolOff  int   // offset of init.b in compiled.pool
	maxLen   int   // bound for strings and byte vectors
	// Individual operators of a decimal (nil for a single operator).
	exp, mant *instr
	// Group and sequence-element members; needPMap says whether they carry
	// their own presence map.
	children []instr
	needPMap bool
	length   *instr // sequence length field
}

// program is one template compiled.
type program struct {
	t      *Template
	fields []instr
	tape   []op  // fields flattened for the decoder
	fast   []fop // tape in runFast's form; nil when runFast cannot run it
}

// compiler assigns dictionary slots. Entries are shared by (dictionary
// scope, key): the global dictionary by key alone across all templates and
// nesting levels; the template dictionary per template; the type dictionary
// per application type (typeRef); a named dictionary by its name.
type compiler struct {
	ts       *Templates
	limits   Limits
	slots    map[string]int32
	fieldTab []*Field
	fids     map[*Field]int32
	pool     []byte
}

func (c *compiler) fid(f *Field) int32 {
	id, ok := c.fids[f]
	if !ok {
		id = int32(len(c.fieldTab))
		c.fids[f] = id
		c.fieldTab = append(c.fieldTab, f)
	}
	return id
}

func (c *compiler) slot(op *Operator, kind Kind, t *Template, typeName string) int32 {
	// Fields of different value classes never share an entry: the spec
	// makes such sharing an error (D4), and keeping them apart means a
	// template file that reuses a name with another type still decodes.
	k := "i"
	switch {
	case kind.IsBytes():
		k = "b"
	case kind == KindDecimal:
		k = "d"
	}
	switch op.Dictionary {
	case "", DictGlobal:
		k += "g\x00" + op.Key
	case DictTemplate:
		k += "t\x00" + t.Name + "\x00" + op.Key
	case DictType:
		k += "y\x00" + typeName + "\x00" + op.Key
	default:
		k += "n\x00" + op.Dictionary + "\x00" + op.Key
	}
	s, ok := c.slots[k]
	if !ok {
		s = int32(len(c.slots))
		c.slots[k] = s
	}
	return s
}

func compileError(f *Field, format string, args ...any) error {
	return &TemplateError{Line: f.Line, Element: f.Kind.String(), Name: f.Name, Msg: fmt.Sprintf(format, args...)}
}

func (c *compiler) fields(fs []*Field, t *Template, typeName string, depth int) ([]instr, error) {
	if depth > maxTemplateDepth {
		return nil, &TemplateError{Line: t.Line, Element: "template", Name: t.Name, Msg: "templates nested too deep (templateRef cycle?)"}
	}
	out := make([]instr, 0, len(fs))
	for _, f := range fs {
		switch f.Kind {
		case KindTemplateRef:
			if f.Ref == "" {
				out = append(out, instr{f: f, fid: c.fid(f), kind: KindTemplateRef, slot: -1})
				continue
			}
			r, ok := c.ts.ByName(f.Ref)
			if !ok {
				return nil, compileError(f, "unknown template %q", f.Ref)
			}
			tn := r.TypeRef
			if tn == "" {
				tn = typeName
			}
			sub, err := c.fields(r.Fields, r, tn, depth+1)
			if err != nil {
				return nil, err
			}
			// A static templateRef is processed as if its fields were
			// written in place: they share the current presence map.
			out = append(out, sub...)
		case KindGroup, KindSequence:
			in := instr{f: f, fid: c.fid(f), kind: f.Kind, optional: f.Optional, slot: -1}
			tn := typeName
			if f.TypeRef != "" {
				tn = f.TypeRef
			}
			children, err := c.fields(f.Fields, t, tn, depth+1)
			if err != nil {
				return nil, err
			}
			in.children = children
			for i := range children {
				if children[i].pmapBit || (children[i].exp != nil && (children[i].exp.pmapBit || children[i].mant.pmapBit)) {
					in.needPMap = true
				}
			}
			if f.Kind == KindGroup {
				in.pmapBit = f.Optional
			} else {
				l, err := c.scalar(f.Length, f.Length.Op, KindUint32, f.Optional, t, typeName)
				if err != nil {
					return nil, err
				}
				in.length = &l
				in.pmapBit = l.pmapBit
			}
			out = append(out, in)
		case KindDecimal:
			if f.Exponent == nil {
				in, err := c.scalar(f, f.Op, KindDecimal, f.Optional, t, typeName)
				if err != nil {
					return nil, err
				}
				out = append(out, in)
				continue
			}
			e, err := c.scalar(f, *f.Exponent, KindInt32, f.Optional, t, typeName)
			if err != nil {
				return nil, err
			}
			m, err := c.scalar(f, *f.Mantissa, KindInt64, false, t, typeName)
			if err != nil {
				return nil, err
			}
			out = append(out, instr{f: f, fid: c.fid(f), kind: KindDecimal, optional: f.Optional, slot: -1, exp: &e, mant: &m})
		default:
			in, err := c.scalar(f, f.Op, f.Kind, f.Optional, t, typeName)
			if err != nil {
				return nil, err
			}
			out = append(out, in)
		}
	}
	return out, nil
}

func (c *compiler) scalar(f *Field, op Operator, kind Kind, optional bool, t *Template, typeName string) (instr, error) {
	in := instr{f: f, fid: c.fid(f), kind: kind, op: op.Kind, optional: optional, slot: -1}
	in.nullable = optional && op.Kind != OpConstant
	in.signed = kind == KindInt32 || kind == KindInt64
	switch op.Kind {
	case OpConstant:
		in.pmapBit = optional
	case OpDefault, OpCopy, OpIncrement, OpTail:
		in.pmapBit = true
	}
	switch op.Kind {
	case OpCopy, OpIncrement, OpDelta, OpTail:
		in.slot = c.slot(&op, kind, t, typeName)
	}
	if op.HasValue {
		v, err := parseInitial(kind, op.Value)
		if err != nil {
			return in, compileError(f, "bad initial value %q: %s", op.Value, causeText(err))
		}
		in.init, in.hasInit = v, true
		in.poolOff = len(c.pool)
		c.pool = append(c.pool, v.b...)
		if kind == KindInt32 && f.Kind == KindDecimal && (int64(v.u) < -63 || int64(v.u) > 63) {
			return in, compileError(f, "exponent initial value %d outside -63..63 (R1)", int64(v.u))
		}
	}
	switch kind {
	case KindASCII, KindUnicode:
		in.maxLen = c.limits.MaxStringLen
	case KindByteVector:
		in.maxLen = c.limits.MaxByteVectorLen
	}
	switch {
	case op.Kind == OpConstant && !op.HasValue:
		return in, compileError(f, "constant without a value (S4)")
	case op.Kind == OpDefault && !op.HasValue && !optional:
		return in, compileError(f, "mandatory default without a value (S5)")
	case op.Kind == OpIncrement && !kind.IsInteger():
		return in, compileError(f, "increment on %s (S2)", kind)
	case op.Kind == OpTail && !kind.IsBytes():
		return in, compileError(f, "tail on %s (S2)", kind)
	}
	return in, nil
}

// compiled is a template set compiled once and shared by decoders and
// encoders built from it.
type compiled struct {
	ts     *Templates
	dense  []*program // indexed by template id when ids are small
	sparse map[uint32]*program
	nslots int
	fields []*Field // resolves Value.field
	pool   []byte   // constant and initial byte values
}

// maxDenseID bounds the table indexed directly by template id.
const maxDenseID = 4096

func compileTemplates(ts *Templates, limits Limits) (*compiled, error) {
	c := &compiler{ts: ts, limits: limits, slots: make(map[string]int32), fids: make(map[*Field]int32)}
	out := &compiled{ts: ts, sparse: make(map[uint32]*program)}
	for _, t := range ts.List {
		if !t.HasID {
			continue
		}
		fs, err := c.fields(t.Fields, t, t.TypeRef, 0)
		if err != nil {
			return nil, err
		}
		p := &program{t: t, fields: fs, tape: buildTape(fs)}
		p.fast = buildFast(p.tape)
		if t.ID < maxDenseID {
			for int(t.ID) >= len(out.dense) {
				out.dense = append(out.dense, nil)
			}
			out.dense[t.ID] = p
		} else {
			out.sparse[t.ID] = p
		}
	}
	out.nslots = len(c.slots)
	out.fields = c.fieldTab
	out.pool = c.pool
	if len(out.pool) >= poolBit {
		return nil, &TemplateError{Msg: "constant values too large"}
	}
	return out, nil
}

func (c *compiled) lookup(id uint32) *program {
	// Compared as uint32: where int is 32 bits, int(id) of a wire id past
	// MaxInt32 is negative and would pass an int comparison.
	if id < uint32(len(c.dense)) {
		return c.dense[id]
	}
	return c.sparse[id]
}

// intRange returns the bounds of an integer kind, as int64 for signed kinds
// and uint64 for unsigned ones.
func intRange(k Kind) (min int64, max uint64) {
	switch k {
	case KindUint32:
		return 0, math.MaxUint32
	case KindInt32:
		return math.MinInt32, math.MaxInt32
	case KindInt64:
		return math.MinInt64, math.MaxInt64
	}
	return 0, math.MaxUint64
}
