package fast

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// fieldProto is one field definition of the random template generator. A
// name always has the same definition, so fields that share a dictionary
// entry across templates agree on its type and operator.
type fieldProto struct {
	name      string
	kind      Kind
	optional  bool
	op        OpKind
	init      string // "" means no initial value
	dict      string
	split     bool   // decimal with individual operators
	expOp     OpKind // split decimal: exponent operator
	expInit   string
	mantOp    OpKind
	mantInit  string
	tailLen   int // tail fields: every value has this length
	intBounds int // 0 full range, 1 small (for delta)
}

var genKinds = []Kind{KindUint32, KindInt32, KindUint64, KindInt64, KindDecimal, KindASCII, KindUnicode, KindByteVector}

func genOps(k Kind) []OpKind {
	switch {
	case k.IsInteger():
		return []OpKind{OpNone, OpConstant, OpDefault, OpCopy, OpIncrement, OpDelta}
	case k == KindDecimal:
		return []OpKind{OpNone, OpConstant, OpDefault, OpCopy, OpDelta}
	}
	return []OpKind{OpNone, OpConstant, OpDefault, OpCopy, OpDelta, OpTail}
}

func genIntValue(r *rand.Rand, k Kind, small bool) uint64 {
	if small {
		return uint64(r.Int64N(2000) - 1000 + 1000*int64(k&1))
	}
	neg := func(i int64) uint64 { return uint64(i) }
	edges := map[Kind][]uint64{
		KindUint32: {0, 1, 63, 64, 127, 128, math.MaxUint32, math.MaxUint32 - 1},
		KindUint64: {0, 1, math.MaxUint64, math.MaxUint64 - 1, math.MaxInt64, 1 << 63},
		KindInt32:  {0, 1, neg(-1), 63, 64, neg(-64), neg(-65), math.MaxInt32, neg(math.MinInt32)},
		KindInt64:  {0, neg(-1), math.MaxInt64, 1 << 63, neg(-65)},
	}[k]
	if r.IntN(3) == 0 {
		return edges[r.IntN(len(edges))]
	}
	v := r.Uint64() >> r.UintN(64)
	switch k {
	case KindUint32:
		return uint64(uint32(v))
	case KindInt32:
		return uint64(int64(int32(v)))
	}
	return v
}

func genBytes(r *rand.Rand, k Kind, n int) []byte {
	if n < 0 {
		switch r.IntN(6) {
		case 0:
			return []byte{}
		case 1:
			if k == KindASCII {
				return []byte{0}
			}
		}
		n = r.IntN(8)
	}
	b := make([]byte, n)
	for i := range b {
		switch k {
		case KindASCII:
			b[i] = byte(r.IntN(0x7f) + 1)
		case KindUnicode:
			b[i] = byte('a' + r.IntN(26))
		default:
			b[i] = byte(r.IntN(256))
		}
	}
	return b
}

func initString(r *rand.Rand, p *fieldProto) string {
	switch {
	case p.kind.IsInteger():
		u := genIntValue(r, p.kind, p.intBounds == 1)
		if p.kind == KindInt32 || p.kind == KindInt64 {
			return fmt.Sprint(int64(u))
		}
		return fmt.Sprint(u)
	case p.kind == KindDecimal:
		return []string{"0", "12000", "-1.5", "123.45", "7e-3"}[r.IntN(5)]
	case p.kind == KindByteVector:
		return fmt.Sprintf("%x", genBytes(r, p.kind, r.IntN(4)))
	}
	n := r.IntN(4)
	if p.tailLen > 0 {
		n = min(n, p.tailLen)
	}
	return strings.Repeat("x", n)
}

func newProto(r *rand.Rand, i int) *fieldProto {
	p := &fieldProto{kind: genKinds[r.IntN(len(genKinds))], optional: r.IntN(2) == 0}
	p.name = fmt.Sprintf("%s%d", p.kind, i)
	ops := genOps(p.kind)
	p.op = ops[r.IntN(len(ops))]
	p.dict = []string{"", "", "template", "type", "named"}[r.IntN(5)]
	if p.op == OpDelta || p.op == OpIncrement {
		p.intBounds = 1
	}
	if p.op == OpTail {
		p.tailLen = 1 + r.IntN(5)
	}
	if p.kind == KindDecimal && r.IntN(3) == 0 {
		p.split = true
		p.op = OpNone
		eops := []OpKind{OpNone, OpDefault, OpCopy, OpIncrement, OpDelta}
		p.expOp = eops[r.IntN(len(eops))]
		p.mantOp = []OpKind{OpNone, OpDefault, OpCopy, OpIncrement, OpDelta}[r.IntN(5)]
		if p.expOp == OpDefault || r.IntN(2) == 0 {
			p.expInit = fmt.Sprint(r.IntN(9) - 4)
		}
		if p.mantOp == OpDefault || r.IntN(2) == 0 {
			p.mantInit = fmt.Sprint(r.IntN(2001) - 1000)
		}
		return p
	}
	needInit := p.op == OpConstant || (p.op == OpDefault && !p.optional)
	if needInit || (p.op != OpNone && r.IntN(2) == 0) {
		p.init = initString(r, p)
		if p.init == "" && needInit && p.kind.IsBytes() && p.kind != KindByteVector {
			p.init = "k"
		}
		if needInit && p.kind == KindByteVector && p.init == "" {
			p.init = "00"
		}
	}
	return p
}

func (p *fieldProto) xml() string {
	elem := p.kind.String()
	attrs := fmt.Sprintf(` name=%q`, p.name)
	if p.kind == KindUnicode {
		elem, attrs = "string", attrs+` charset="unicode"`
	}
	if p.optional {
		attrs += ` presence="optional"`
	}
	opXML := func(op OpKind, init string) string {
		if op == OpNone {
			return ""
		}
		a := ""
		if init != "" || op == OpConstant || (p.kind.IsBytes() && init != "") {
			a = fmt.Sprintf(` value=%q`, init)
		}
		if p.dict == "named" {
			a += ` dictionary="shared"`
		} else if p.dict != "" {
			a += fmt.Sprintf(` dictionary=%q`, p.dict)
		}
		return fmt.Sprintf("<%s%s/>", op, a)
	}
	if p.split {
		return fmt.Sprintf("<decimal%s><exponent>%s</exponent><mantissa>%s</mantissa></decimal>\n", attrs,
			opXML(p.expOp, p.expInit), opXML(p.mantOp, p.mantInit))
	}
	return fmt.Sprintf("<%s%s>%s</%s>\n", elem, attrs, opXML(p.op, p.init), elem)
}

// genTemplates writes a random template file: reference-only template "Ref"
// (used through a static templateRef), "Leaf" (id 90, the target of dynamic
// templateRefs) and templates 1..3 mixing every kind, operator, presence,
// dictionary, group and sequence.
func genTemplates(r *rand.Rand) string {
	protos := make([]*fieldProto, 24)
	for i := range protos {
		protos[i] = newProto(r, i)
	}
	pick := func() *fieldProto { return protos[r.IntN(len(protos))] }
	var b strings.Builder
	b.WriteString(`<?xml version="1.0"?>` + "\n" + `<templates xmlns="http://www.fixprotocol.org/ns/fast/td/1.1">` + "\n")
	b.WriteString("<template name=\"Ref\">" + pick().xml() + pick().xml() + "</template>\n")
	b.WriteString("<template name=\"Leaf\" id=\"90\">" + pick().xml() + "</template>\n")
	var body func(depth int, used map[string]bool) string
	body = func(depth int, used map[string]bool) string {
		var s strings.Builder
		n := 1 + r.IntN(5)
		for i := 0; i < n; i++ {
			switch c := r.IntN(12); {
			case c == 0 && depth < 2:
				opt := ""
				if r.IntN(2) == 0 {
					opt = ` presence="optional"`
				}
				fmt.Fprintf(&s, "<group name=\"G%d_%d\"%s>\n%s</group>\n", depth, i, opt, body(depth+1, map[string]bool{}))
			case c == 1 && depth < 2:
				opt := ""
				if r.IntN(2) == 0 {
					opt = ` presence="optional"`
				}
				lop := []string{"", "<copy/>", "<increment/>", "<default value=\"1\"/>", "<delta/>"}[r.IntN(5)]
				fmt.Fprintf(&s, "<sequence name=\"S%d_%d\"%s><length name=\"N%d_%d\">%s</length>\n%s</sequence>\n",
					depth, i, opt, depth, i, lop, body(depth+1, map[string]bool{}))
			case c == 2 && !used["Ref"]:
				used["Ref"] = true
				s.WriteString("<templateRef name=\"Ref\"/>\n")
			case c == 3 && depth == 0:
				s.WriteString("<templateRef/>\n")
			default:
				p := pick()
				if used[p.name] {
					continue
				}
				used[p.name] = true
				s.WriteString(p.xml())
			}
		}
		return s.String()
	}
	for id := 1; id <= 3; id++ {
		reset := ""
		if r.IntN(4) == 0 {
			reset = ` reset="Y"`
		}
		fmt.Fprintf(&b, "<template name=\"T%d\" id=\"%d\"%s><typeRef name=\"Ty%d\"/>\n%s</template>\n", id, id, reset, id%2, body(0, map[string]bool{"Ref": false}))
	}
	b.WriteString("</templates>\n")
	return b.String()
}

// The previous values by field name, repeated now and then.
var (
	lastInt   = map[string]uint64{}
	lastBytes = map[string][]byte{}
	lastDec   = map[string]struct {
		m int64
		e int32
	}{}
)

// genMessage fills m with random values following template t.
func genMessage(r *rand.Rand, ts *Templates, t *Template, m *Message, tails map[*Field]int) {
	m.SetTemplate(t)
	genFields(r, ts, t.Fields, m, tails, 0)
}

func genFields(r *rand.Rand, ts *Templates, fs []*Field, m *Message, tails map[*Field]int, depth int) {
	for _, f := range fs {
		if f.Optional && r.IntN(4) == 0 {
			m.AddAbsent()
			continue
		}
		switch f.Kind {
		case KindTemplateRef:
			if f.Ref != "" {
				ref, _ := ts.ByName(f.Ref)
				genFields(r, ts, ref.Fields, m, tails, depth)
				continue
			}
			leaf, _ := ts.ByID(90)
			m.AddTemplateRef(90)
			genFields(r, ts, leaf.Fields, m, tails, depth+1)
		case KindGroup:
			m.AddGroup()
			genFields(r, ts, f.Fields, m, tails, depth+1)
		case KindSequence:
			n := r.IntN(4)
			if f.Length.Op.Kind == OpConstant {
				n = 1
			}
			m.AddSequence(n)
			for k := 0; k < n; k++ {
				m.AddElement()
				genFields(r, ts, f.Fields, m, tails, depth+1)
			}
		case KindDecimal:
			op := f.Op
			if op.Kind == OpConstant {
				in, _ := parseInitial(KindDecimal, op.Value)
				m.AddDecimal(int64(in.u), in.exp)
				continue
			}
			mant := int64(genIntValue(r, KindInt64, false))
			if op.Kind == OpDelta || (f.Mantissa != nil && (f.Mantissa.Kind == OpDelta || f.Mantissa.Kind == OpIncrement)) {
				mant = r.Int64N(1<<40) - 1<<39
			}
			exp := int32(r.IntN(127) - 63)
			if f.Exponent != nil && (f.Exponent.Kind == OpDelta || f.Exponent.Kind == OpIncrement) {
				exp = int32(r.IntN(9) - 4)
			}
			if prev, ok := lastDec[f.Name]; ok && r.IntN(3) == 0 {
				mant, exp = prev.m, prev.e
			}
			lastDec[f.Name] = struct {
				m int64
				e int32
			}{mant, exp}
			m.AddDecimal(mant, exp)
		case KindASCII, KindUnicode, KindByteVector:
			if f.Op.Kind == OpConstant {
				in, _ := parseInitial(f.Kind, f.Op.Value)
				m.AddBytes(in.b)
				continue
			}
			n := -1
			if f.Op.Kind == OpTail {
				n = tails[f]
			}
			v := genBytes(r, f.Kind, n)
			if prev, ok := lastBytes[f.Name]; ok && r.IntN(3) == 0 {
				v = prev
			}
			lastBytes[f.Name] = v
			m.AddBytes(v)
		default:
			if f.Op.Kind == OpConstant {
				in, _ := parseInitial(f.Kind, f.Op.Value)
				addInteger(m, f.Kind, in.u)
				continue
			}
			u := genIntValue(r, f.Kind, f.Op.Kind == OpDelta || f.Op.Kind == OpIncrement)
			if prev, ok := lastInt[f.Name]; ok {
				// Repeat or step the previous value so that copy and
				// increment take their "not in the stream" paths.
				switch r.IntN(4) {
				case 0:
					u = prev
				case 1:
					u = increment(f.Kind, prev)
				}
			}
			lastInt[f.Name] = u
			addInteger(m, f.Kind, u)
		}
	}
}

// addInteger appends u, the bits of a value of the integer kind k, with
// AddInt for a signed kind and AddUint for an unsigned one.
func addInteger(m *Message, k Kind, u uint64) {
	if k == KindInt32 || k == KindInt64 {
		m.AddInt(int64(u))
	} else {
		m.AddUint(u)
	}
}

// sameValues compares an encoded message with its decoding.
func sameValues(t *testing.T, in, out *Message) bool {
	t.Helper()
	if in.TemplateID != out.TemplateID || len(in.Values) != len(out.Values) {
		t.Errorf("template %d/%d, %d/%d values", in.TemplateID, out.TemplateID, len(in.Values), len(out.Values))
		return false
	}
	for i := range in.Values {
		a, b := &in.Values[i], &out.Values[i]
		ok := a.Present == b.Present && a.Elem == b.Elem
		if ok && a.Present {
			switch {
			case b.Kind.IsBytes():
				ok = bytes.Equal(in.Bytes(i), out.Bytes(i))
			case b.Kind == KindGroup:
			default:
				ok = a.U == b.U && a.Exp == b.Exp
			}
		}
		if !ok {
			t.Errorf("value %d (%s %v): sent %+v, decoded %+v", i, out.Field(i).Name, b.Kind, *a, *b)
			return false
		}
	}
	return true
}

// tailLengths gives every tail field of ts the length of all its values:
// five bytes, at least the length of every generated initial value.
func tailLengths(ts *Templates) map[*Field]int {
	tails := map[*Field]int{}
	var walk func(fs []*Field)
	walk = func(fs []*Field) {
		for _, f := range fs {
			if f.Op.Kind == OpTail {
				tails[f] = 5
			}
			walk(f.Fields)
		}
	}
	for _, tm := range ts.List {
		walk(tm.Fields)
	}
	return tails
}

func TestRoundTripRandomTemplates(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 50
	}
	for seed := 0; seed < seeds; seed++ {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		xml := genTemplates(r)
		ts, err := ParseTemplates([]byte(xml))
		if err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, xml)
		}
		reset := r.IntN(3) == 0
		enc, err := NewEncoder(ts, &EncoderOptions{ResetEachMessage: reset, OmitRepeatedTemplateID: seed%2 == 0})
		if err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, xml)
		}
		dec, err := NewDecoder(ts, &DecoderOptions{ResetEachMessage: reset})
		if err != nil {
			t.Fatal(err)
		}
		clear(lastInt)
		clear(lastBytes)
		clear(lastDec)
		tails := tailLengths(ts)
		var in, out Message
		var stream []byte
		var sent []Message
		for k := 0; k < 20; k++ {
			tm, _ := ts.ByID(uint32(1 + r.IntN(3)))
			genMessage(r, ts, tm, &in, tails)
			before := len(stream)
			stream, err = enc.Encode(stream, &in)
			if err != nil {
				t.Fatalf("seed %d message %d: encode: %v\n%s", seed, k, err, xml)
			}
			n, err := dec.Decode(stream[before:], &out)
			if err != nil || n != len(stream)-before {
				t.Fatalf("seed %d message %d: decode: n=%d of %d, %v\n%x\n%s", seed, k, n, len(stream)-before, err, stream[before:], xml)
			}
			if !sameValues(t, &in, &out) {
				t.Fatalf("seed %d message %d\n%s", seed, k, xml)
			}
			var cp Message
			cp.TemplateID = in.TemplateID
			cp.Values = append([]Value(nil), in.Values...)
			cp.arena = append([]byte(nil), in.arena...)
			sent = append(sent, cp)
		}
		// The whole stream again, cut at every byte: a cut message is
		// "need more bytes" and decoding resumes correctly after it.
		dec2, _ := NewDecoder(ts, &DecoderOptions{ResetEachMessage: reset})
		off, k := 0, 0
		for end := 0; end <= len(stream) && k < len(sent); end++ {
			n, err := dec2.Decode(stream[off:end], &out)
			if err != nil {
				if Code(err) != "SHORT" {
					t.Fatalf("seed %d: cut at %d: %v", seed, end, err)
				}
				continue
			}
			if !sameValues(t, &sent[k], &out) {
				t.Fatalf("seed %d: message %d differs after cuts", seed, k)
			}
			off += n
			k++
			end--
		}
		if k != len(sent) {
			t.Fatalf("seed %d: %d of %d messages after cuts", seed, k, len(sent))
		}
	}
}
