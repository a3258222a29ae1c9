package fast

import (
	"bytes"
	"errors"
	"math"
	"strconv"
)

// ErrNotEncodable means a value cannot be expressed with its field's
// operator: a delta that does not fit 64 bits, a delta or tail whose
// previous value is empty, a tail that would shorten the previous value, a
// value that contradicts a constant, or an ascii string that starts with NUL
// and is longer than one character. Values that do not follow the template
// have errors of their own (ErrWrongKind and the others at EncodeError).
var ErrNotEncodable = errors.New("fast: value not encodable with its operator")

// EncoderOptions configures an Encoder.
type EncoderOptions struct {
	// ResetEachMessage resets every dictionary and forgets the previous
	// template id before each message, matching a decoder that does the same.
	ResetEachMessage bool
	// MaxDepth bounds the nesting of groups, sequences and dynamic
	// templateRefs. Default DefaultLimits.MaxDepth.
	MaxDepth int
	// OmitRepeatedTemplateID leaves the template id out when it equals the
	// previous message's (the spec's implicit copy). By default every
	// message carries its template id, as exchanges and mFAST send them.
	OmitRepeatedTemplateID bool
}

// Encoder encodes Messages into FAST bytes with minimal presence maps,
// keeping dictionary state between messages like the Decoder it feeds. It
// is not safe for concurrent use.
type Encoder struct {
	c         *compiled
	resetEach bool
	omitTID   bool
	maxDepth  int
	dict      []encEntry
	epoch     uint32
	prevTID   uint32
	hasTID    bool
	bufs      [][]byte // scratch body per nesting depth
	pmbs      []PMapBuilder
	vi        int // cursor in Message.Values
}

// NewEncoder compiles ts for encoding. ts must not change afterwards.
func NewEncoder(ts *Templates, opts *EncoderOptions) (*Encoder, error) {
	var o EncoderOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultLimits.MaxDepth
	}
	c, err := compileTemplates(ts, DefaultLimits)
	if err != nil {
		return nil, err
	}
	return &Encoder{
		c: c, resetEach: o.ResetEachMessage, maxDepth: o.MaxDepth, omitTID: o.OmitRepeatedTemplateID,
		dict: make([]encEntry, c.nslots), epoch: 1,
		bufs: make([][]byte, o.MaxDepth+2), pmbs: make([]PMapBuilder, o.MaxDepth+2),
	}, nil
}

// Reset resets every dictionary and forgets the previous template id: call
// it where the decoder's side resets (per block or packet).
func (e *Encoder) Reset() {
	e.resetDicts()
	e.hasTID = false
}

func (e *Encoder) resetDicts() {
	e.epoch++
	if e.epoch == 0 {
		clear(e.dict)
		e.epoch = 1
	}
}

// Encode appends the encoding of m to dst. m.TemplateID selects the
// template; m.Values must hold one value per field in template order, as the
// Decoder produces them (composite values are followed by their members).
// The Add methods of Message build such a list; Encode completes it (field,
// kind and the End of composite values), so the message can be walked and
// rendered afterwards.
//
// Errors are *EncodeError values naming the template, the field, what it
// takes and what m holds there, and wrapping the cause: ErrWrongKind for a
// value an Add method of the wrong kind built (AddBytes for an integer
// field, say), ErrRange for an integer that does not fit the field's type,
// ErrMissingValue, ErrMissingElement or ErrExtraValue when m's values do not
// line up with the template's fields, ErrNotEncodable when the operator has
// no encoding for the value. On error the dictionary state may be out of
// step with a decoder's: call Reset before encoding more.
func (e *Encoder) Encode(dst []byte, m *Message) ([]byte, error) {
	p := e.c.lookup(m.TemplateID)
	if p == nil {
		if m.TemplateID == ResetTemplateID {
			e.resetDicts()
			e.hasTID = false
			return append(dst, 0xc0, 0xf8), nil // pmap with the TID bit, then 120
		}
		return dst, &EncodeError{TemplateID: m.TemplateID, Err: ErrUnknownTemplate}
	}
	if e.resetEach {
		e.Reset()
	}
	e.vi = 0
	m.Template, m.fields, m.pool = p.t, e.c.fields, e.c.pool
	pmb := &e.pmbs[0]
	pmb.Reset()
	body := e.bufs[0][:0]
	if e.omitTID && e.hasTID && e.prevTID == m.TemplateID {
		pmb.Add(false)
	} else {
		pmb.Add(true)
		body = AppendUint32(body, m.TemplateID)
	}
	e.prevTID, e.hasTID = m.TemplateID, true
	if p.t.Reset {
		e.resetDicts()
	}
	body, err := e.fields(body, pmb, p.fields, m, 0)
	e.bufs[0] = body
	if err == nil && e.vi != len(m.Values) {
		got := m.describe(&m.Values[e.vi])
		if n := len(m.Values) - e.vi - 1; n == 1 {
			got += " and 1 more value"
		} else if n > 1 {
			got += " and " + strconv.Itoa(n) + " more values"
		}
		err = &EncodeError{Err: ErrExtraValue, Got: got}
	}
	if err != nil {
		if ee, ok := err.(*EncodeError); ok {
			ee.TemplateID, ee.Template = m.TemplateID, p.t.Name
		}
		return dst, err
	}
	if m.TemplateID == ResetTemplateID {
		e.resetDicts()
		e.hasTID = false
	}
	dst = pmb.AppendTo(dst)
	return append(dst, body...), nil
}

// next returns the next value of m, or nil when the list is exhausted.
func (e *Encoder) next(m *Message) *Value {
	if e.vi >= len(m.Values) {
		return nil
	}
	v := &m.Values[e.vi]
	e.vi++
	return v
}

func (e *Encoder) fields(body []byte, pmb *PMapBuilder, ins []instr, m *Message, depth int) ([]byte, error) {
	for i := range ins {
		in := &ins[i]
		var err error
		if in.kind == KindGroup || in.kind == KindSequence || in.kind == KindTemplateRef {
			if body, err = e.composite(body, pmb, in, m, depth); err != nil {
				return body, err
			}
			continue
		}
		v := e.next(m)
		if v == nil {
			return body, m.fieldError(in, v, ErrMissingValue)
		}
		if !takes(in.kind, v) {
			return body, m.fieldError(in, v, ErrWrongKind)
		}
		v.field, v.Kind = in.fid, in.kind
		switch {
		case in.kind.IsInteger():
			// intOp checks the range of the value's bits; an AddInt or
			// AddUint whose sign the field's type does not share is out of
			// range with the top bit set.
			if int64(v.U) < 0 && v.src != srcDecoded && (v.src == srcInt) != in.signed {
				return body, m.fieldError(in, v, ErrRange)
			}
			body, err = e.intOp(body, pmb, in, v.U, v.Present)
		case in.kind == KindDecimal && in.exp != nil:
			if v.Present && (v.Exp < -63 || v.Exp > 63) {
				return body, m.fieldError(in, v, ErrExponent)
			}
			body, err = e.intOp(body, pmb, in.exp, uint64(int64(v.Exp)), v.Present)
			if err == nil && v.Present {
				body, err = e.intOp(body, pmb, in.mant, v.U, true)
			}
		case in.kind == KindDecimal:
			body, err = e.decimalOp(body, pmb, in, int64(v.U), v.Exp, v.Present)
		default:
			var b []byte
			if v.Present {
				var ok bool
				if b, ok = m.valueBytes(v); !ok {
					return body, m.fieldError(in, v, ErrNotEncodable)
				}
			}
			body, err = e.bytesOp(body, pmb, in, b, v.Present)
		}
		if err != nil {
			return body, m.fieldError(in, v, err)
		}
	}
	return body, nil
}

// nested encodes members that carry their own presence map, appending the
// map and then their bytes to body.
func (e *Encoder) nested(body []byte, ins []instr, needPMap bool, m *Message, depth int) ([]byte, error) {
	if !needPMap {
		var none PMapBuilder
		return e.fields(body, &none, ins, m, depth+1)
	}
	pmb := &e.pmbs[depth+1]
	pmb.Reset()
	sub, err := e.fields(e.bufs[depth+1][:0], pmb, ins, m, depth+1)
	e.bufs[depth+1] = sub
	if err != nil {
		return body, err
	}
	body = pmb.AppendTo(body)
	return append(body, sub...), nil
}

func (e *Encoder) composite(body []byte, pmb *PMapBuilder, in *instr, m *Message, depth int) ([]byte, error) {
	if depth >= e.maxDepth {
		return body, depthError(in, e.maxDepth)
	}
	vi := e.vi
	v := e.next(m)
	if v == nil {
		return body, m.fieldError(in, v, ErrMissingValue)
	}
	if !takes(in.kind, v) {
		return body, m.fieldError(in, v, ErrWrongKind)
	}
	// Link the subtree, so that a message built with the Add methods can
	// also be walked and rendered once encoded.
	defer func() { m.Values[vi].End = int32(e.vi) }()
	v.field, v.Kind = in.fid, in.kind
	var err error
	switch in.kind {
	case KindGroup:
		if in.optional {
			pmb.Add(v.Present)
		} else if !v.Present {
			return body, m.fieldError(in, v, ErrMissingValue)
		}
		if v.Present {
			body, err = e.nested(body, in.children, in.needPMap, m, depth)
			return body, prefixField(err, in.f.Name)
		}
		return body, nil
	case KindSequence:
		if !v.Present && !in.optional {
			return body, m.fieldError(in, v, ErrMissingValue)
		}
		if body, err = e.intOp(body, pmb, in.length, v.U, v.Present); err != nil {
			return body, m.fieldError(in, v, err)
		}
		if !v.Present {
			return body, nil
		}
		for k := uint64(0); k < v.U; k++ {
			ei := e.vi
			el := e.next(m)
			if el == nil || !isElement(el) {
				return body, m.missingElement(in, v, el, k)
			}
			el.field, el.Kind = in.fid, KindGroup
			if body, err = e.nested(body, in.children, in.needPMap, m, depth); err != nil {
				return body, prefixElement(err, in, k)
			}
			m.Values[ei].End = int32(e.vi)
		}
		return body, nil
	}
	// Dynamic templateRef: a nested message with its own presence map.
	tid := uint32(v.U)
	p := e.c.lookup(tid)
	if p == nil {
		return body, m.fieldError(in, v, ErrUnknownTemplate)
	}
	sub := &e.pmbs[depth+1]
	sub.Reset()
	buf := e.bufs[depth+1][:0]
	if e.omitTID && e.hasTID && e.prevTID == tid {
		sub.Add(false)
	} else {
		sub.Add(true)
		buf = AppendUint32(buf, tid)
	}
	e.prevTID, e.hasTID = tid, true
	buf, err = e.fields(buf, sub, p.fields, m, depth+1)
	e.bufs[depth+1] = buf
	if err != nil {
		return body, prefixRef(err, p.t)
	}
	body = sub.AppendTo(body)
	return append(body, buf...), nil
}

// encEntry is an encoder dictionary entry: the previous value that the
// operators compare the next one with.
type encEntry struct {
	state uint8
	epoch uint32
	exp   int32
	u     uint64
	b     []byte
}

func (e *Encoder) state(en *encEntry) uint8 {
	if en.epoch != e.epoch {
		return stateUndefined
	}
	return en.state
}

func (e *Encoder) set(slot int32, u uint64, exp int32, b []byte, isBytes bool) {
	en := &e.dict[slot]
	en.epoch, en.state, en.u, en.exp = e.epoch, stateAssigned, u, exp
	if isBytes {
		en.b = append(en.b[:0], b...)
	}
}

func (e *Encoder) setEmpty(slot int32) {
	en := &e.dict[slot]
	en.epoch, en.state = e.epoch, stateEmpty
}

func appendIntKind(dst []byte, kind Kind, u uint64, present, nullable bool) []byte {
	if nullable {
		switch kind {
		case KindUint32:
			return AppendNullableUint32(dst, uint32(u), present)
		case KindInt32:
			return AppendNullableInt32(dst, int32(u), present)
		case KindInt64:
			return AppendNullableInt64(dst, int64(u), present)
		}
		return AppendNullableUint64(dst, u, present)
	}
	switch kind {
	case KindUint32:
		return AppendUint32(dst, uint32(u))
	case KindInt32:
		return AppendInt32(dst, int32(u))
	case KindInt64:
		return AppendInt64(dst, int64(u))
	}
	return AppendUint64(dst, u)
}

// fits reports whether u is a valid value of an integer kind.
func fits(k Kind, u uint64) bool {
	switch k {
	case KindUint32:
		return u <= math.MaxUint32
	case KindInt32:
		return int64(u) >= math.MinInt32 && int64(u) <= math.MaxInt32
	}
	return true
}

// subDelta returns v - base as the int64 a delta operator transmits.
func subDelta(k Kind, v, base uint64) (int64, bool) {
	switch k {
	case KindInt32, KindInt64:
		a, b := int64(v), int64(base)
		d := a - b
		if (b < 0 && d < a) || (b > 0 && d > a) {
			return 0, false
		}
		return d, true
	}
	if v >= base {
		d := v - base
		return int64(d), d <= math.MaxInt64
	}
	d := base - v
	return -int64(d), d <= 1<<63
}

// constOrDefault applies the constant or default operator of in, which
// only compare the value with the initial one (isInit: present and equal to
// it; a constant always has one, S4): it sets the field's presence-map bit
// and reports whether the value itself must still be written, which only a
// default field holding another value needs. A constant field holding
// another value is ErrNotEncodable.
func constOrDefault(pmb *PMapBuilder, in *instr, present, isInit bool) (write bool, err error) {
	if in.op == OpConstant {
		if present && !isInit {
			return false, ErrNotEncodable
		}
		if in.optional {
			pmb.Add(present)
		}
		return false, nil
	}
	if isInit || (!present && !in.hasInit) {
		pmb.Add(false)
		return false, nil
	}
	pmb.Add(true)
	return true, nil
}

// intOp writes an integer with its operator; it also serves sequence lengths
// and the individual operators of decimals.
func (e *Encoder) intOp(body []byte, pmb *PMapBuilder, in *instr, u uint64, present bool) ([]byte, error) {
	if present && !fits(in.kind, u) {
		return body, ErrRange
	}
	if !present && !in.optional {
		return body, ErrMissingValue
	}
	switch in.op {
	case OpNone:
		return appendIntKind(body, in.kind, u, present, in.nullable), nil
	case OpConstant, OpDefault:
		if write, err := constOrDefault(pmb, in, present, present && in.hasInit && u == in.init.u); !write {
			return body, err
		}
		return appendIntKind(body, in.kind, u, present, in.nullable), nil
	case OpCopy, OpIncrement:
		en := &e.dict[in.slot]
		switch e.state(en) {
		case stateAssigned:
			want := en.u
			if in.op == OpIncrement {
				want = increment(in.kind, want)
			}
			if present && u == want {
				pmb.Add(false)
				e.set(in.slot, u, 0, nil, false)
				return body, nil
			}
		case stateEmpty:
			if !present {
				pmb.Add(false)
				return body, nil
			}
		default:
			if (in.hasInit && present && u == in.init.u) || (!in.hasInit && !present) {
				pmb.Add(false)
				if present {
					e.set(in.slot, u, 0, nil, false)
				} else {
					e.setEmpty(in.slot)
				}
				return body, nil
			}
		}
		pmb.Add(true)
		if present {
			e.set(in.slot, u, 0, nil, false)
		} else {
			e.setEmpty(in.slot)
		}
		return appendIntKind(body, in.kind, u, present, in.nullable), nil
	case OpDelta:
		if !present {
			return AppendNullableInt64(body, 0, false), nil
		}
		var base uint64
		en := &e.dict[in.slot]
		switch e.state(en) {
		case stateAssigned:
			base = en.u
		case stateEmpty:
			return body, ErrNotEncodable
		default:
			base = in.init.u
		}
		d, ok := subDelta(in.kind, u, base)
		if !ok {
			return body, ErrNotEncodable
		}
		e.set(in.slot, u, 0, nil, false)
		if in.nullable {
			return AppendNullableInt64(body, d, true), nil
		}
		return AppendInt64(body, d), nil
	}
	return body, ErrNotEncodable
}

func appendDecimal(dst []byte, mant int64, exp int32, present, nullable bool) []byte {
	if nullable {
		dst = AppendNullableInt32(dst, exp, present)
		if !present {
			return dst
		}
	} else {
		dst = AppendInt32(dst, exp)
	}
	return AppendInt64(dst, mant)
}

func (e *Encoder) decimalOp(body []byte, pmb *PMapBuilder, in *instr, mant int64, exp int32, present bool) ([]byte, error) {
	if present && (exp < -63 || exp > 63) {
		return body, ErrExponent
	}
	if !present && !in.optional {
		return body, ErrMissingValue
	}
	isInit := present && in.hasInit && uint64(mant) == in.init.u && exp == in.init.exp
	switch in.op {
	case OpNone:
		return appendDecimal(body, mant, exp, present, in.nullable), nil
	case OpConstant, OpDefault:
		if write, err := constOrDefault(pmb, in, present, isInit); !write {
			return body, err
		}
		return appendDecimal(body, mant, exp, present, in.nullable), nil
	case OpCopy:
		en := &e.dict[in.slot]
		switch e.state(en) {
		case stateAssigned:
			if present && uint64(mant) == en.u && exp == en.exp {
				pmb.Add(false)
				return body, nil
			}
		case stateEmpty:
			if !present {
				pmb.Add(false)
				return body, nil
			}
		default:
			if isInit || (!in.hasInit && !present) {
				pmb.Add(false)
				if present {
					e.set(in.slot, uint64(mant), exp, nil, false)
				} else {
					e.setEmpty(in.slot)
				}
				return body, nil
			}
		}
		pmb.Add(true)
		if present {
			e.set(in.slot, uint64(mant), exp, nil, false)
		} else {
			e.setEmpty(in.slot)
		}
		return appendDecimal(body, mant, exp, present, in.nullable), nil
	case OpDelta:
		if !present {
			return AppendNullableInt32(body, 0, false), nil
		}
		var bm uint64
		var bexp int32
		en := &e.dict[in.slot]
		switch e.state(en) {
		case stateAssigned:
			bm, bexp = en.u, en.exp
		case stateEmpty:
			return body, ErrNotEncodable
		default:
			bm, bexp = in.init.u, in.init.exp
		}
		dm, ok := subDelta(KindInt64, uint64(mant), bm)
		if !ok {
			return body, ErrNotEncodable
		}
		e.set(in.slot, uint64(mant), exp, nil, false)
		if in.nullable {
			body = AppendNullableInt32(body, exp-bexp, true)
		} else {
			body = AppendInt32(body, exp-bexp)
		}
		return AppendInt64(body, dm), nil
	}
	return body, ErrNotEncodable
}

func appendBytesKind(dst []byte, kind Kind, b []byte, present, nullable bool) []byte {
	if kind == KindASCII {
		if nullable {
			return AppendNullableASCII(dst, b, present)
		}
		return AppendASCII(dst, b)
	}
	if nullable {
		return AppendNullableByteVector(dst, b, present)
	}
	return AppendByteVector(dst, b)
}

func (e *Encoder) bytesOp(body []byte, pmb *PMapBuilder, in *instr, b []byte, present bool) ([]byte, error) {
	if !present && !in.optional {
		return body, ErrMissingValue
	}
	if in.kind == KindASCII {
		for _, c := range b {
			if c >= 0x80 {
				return body, ErrRange
			}
		}
		if badLeadingNUL(b) {
			return body, ErrNotEncodable
		}
	}
	isInit := present && in.hasInit && bytes.Equal(b, in.init.b)
	switch in.op {
	case OpNone:
		return appendBytesKind(body, in.kind, b, present, in.nullable), nil
	case OpConstant, OpDefault:
		if write, err := constOrDefault(pmb, in, present, isInit); !write {
			return body, err
		}
		return appendBytesKind(body, in.kind, b, present, in.nullable), nil
	case OpCopy, OpTail:
		en := &e.dict[in.slot]
		st := e.state(en)
		switch st {
		case stateAssigned:
			if present && bytes.Equal(b, en.b) {
				pmb.Add(false)
				return body, nil
			}
		case stateEmpty:
			if !present {
				pmb.Add(false)
				return body, nil
			}
		default:
			if isInit || (!in.hasInit && !present) {
				pmb.Add(false)
				if present {
					e.set(in.slot, 0, 0, b, true)
				} else {
					e.setEmpty(in.slot)
				}
				return body, nil
			}
		}
		pmb.Add(true)
		if !present {
			e.setEmpty(in.slot)
			return appendBytesKind(body, in.kind, nil, false, in.nullable), nil
		}
		wire := b
		if in.op == OpTail {
			base := in.init.b
			if st == stateAssigned {
				base = en.b
			}
			switch {
			case len(b) < len(base):
				return body, ErrNotEncodable
			case len(b) == len(base):
				// Send only what differs; an empty tail means "the base".
				k := 0
				for k < len(b) && b[k] == base[k] {
					k++
				}
				wire = b[k:]
				if in.kind == KindASCII && badLeadingNUL(wire) {
					wire = b
				}
			}
		}
		e.set(in.slot, 0, 0, b, true)
		return appendBytesKind(body, in.kind, wire, true, in.nullable), nil
	case OpDelta:
		if !present {
			return AppendNullableInt32(body, 0, false), nil
		}
		base := in.init.b
		en := &e.dict[in.slot]
		switch e.state(en) {
		case stateAssigned:
			base = en.b
		case stateEmpty:
			return body, ErrNotEncodable
		}
		// Keep the longer of the common prefix and common suffix.
		p := 0
		for p < len(b) && p < len(base) && b[p] == base[p] {
			p++
		}
		s := 0
		for s < len(b) && s < len(base) && b[len(b)-1-s] == base[len(base)-1-s] {
			s++
		}
		var sub int64
		var part []byte
		if p >= s {
			sub, part = int64(len(base)-p), b[p:]
		} else {
			sub, part = -int64(len(base)-s)-1, b[:len(b)-s]
		}
		if in.kind == KindASCII && badLeadingNUL(part) {
			sub, part = int64(len(base)), b
		}
		if sub > math.MaxInt32 || sub < math.MinInt32 {
			return body, ErrNotEncodable
		}
		if in.nullable {
			body = AppendNullableInt32(body, int32(sub), true)
		} else {
			body = AppendInt32(body, int32(sub))
		}
		body = appendBytesKind(body, in.kind, part, true, false)
		e.set(in.slot, 0, 0, b, true)
		return body, nil
	}
	return body, ErrNotEncodable
}

// Message building for the Encoder: each Add appends one value in template
// order.

// SetTemplate empties m and makes it a message of template t.
func (m *Message) SetTemplate(t *Template) {
	m.Reset()
	m.Template, m.TemplateID = t, t.ID
}

func (m *Message) add(v Value) {
	v.End = int32(len(m.Values) + 1)
	m.Values = append(m.Values, v)
}

// AddUint appends a present unsigned integer. Any integer field takes it if
// the value fits the field's type (Encode returns ErrRange otherwise).
func (m *Message) AddUint(u uint64) { m.add(Value{U: u, Present: true, src: srcUint}) }

// AddInt appends a present signed integer. Any integer field takes it if the
// value fits the field's type: a negative one does not fit an unsigned field.
func (m *Message) AddInt(i int64) { m.add(Value{U: uint64(i), Present: true, src: srcInt}) }

// AddDecimal appends a present decimal mantissa * 10^exponent, for a
// decimal field.
func (m *Message) AddDecimal(mantissa int64, exponent int32) {
	m.add(Value{U: uint64(mantissa), Exp: exponent, Present: true, src: srcDecimal})
}

// AddBytes appends a present string or byte vector; b is copied.
func (m *Message) AddBytes(b []byte) {
	off := len(m.arena)
	m.arena = append(m.arena, b...)
	m.add(Value{off: uint32(off), n: uint32(len(b)), Present: true, src: srcBytes})
}

// AddAbsent appends an absent optional field, group or sequence.
func (m *Message) AddAbsent() { m.add(Value{src: srcAbsent}) }

// AddSequence appends a present sequence of n elements; follow it with n
// times AddElement and the element's fields.
func (m *Message) AddSequence(n int) {
	m.add(Value{U: uint64(n), Kind: KindSequence, Present: true, src: srcSequence})
}

// AddElement starts a sequence element.
func (m *Message) AddElement() {
	m.add(Value{Kind: KindGroup, Present: true, Elem: true, src: srcElement})
}

// AddGroup appends a present group; follow it with the group's fields.
func (m *Message) AddGroup() { m.add(Value{Kind: KindGroup, Present: true, src: srcGroup}) }

// AddTemplateRef starts a dynamic templateRef to template id; follow it with
// that template's fields.
func (m *Message) AddTemplateRef(id uint32) {
	m.add(Value{U: uint64(id), Kind: KindTemplateRef, Present: true, src: srcTemplateRef})
}

// badLeadingNUL reports whether an ASCII string cannot be sent because it
// starts with NUL and is longer than "\x00": spec 10.6.3 gives 00 80 the
// meaning "\x00", so "\x00\x00" has no encoding, and other strings with a
// leading NUL are overlong encodings that decoders may reject.
func badLeadingNUL(b []byte) bool { return len(b) > 1 && b[0] == 0 }
