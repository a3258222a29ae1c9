package fast

import "slices"

// The decoder runs each template as a flat instruction tape rather than
// walking the instruction tree: one loop, one switch on a small opcode
// (compiled to a jump table), and the state of groups, sequences and dynamic
// templateRefs in an explicit stack instead of recursive calls. The common
// operator paths are decoded inline in the loop; the unusual ones (multi-byte
// reads, undefined dictionary entries, tail and delta strings, single-operator
// decimals, sequence lengths) call the general per-operator functions, which
// define the semantics.

// opcode selects the code that decodes one tape instruction.
type opcode uint8

const (
	opIntNone opcode = iota // integer without operator
	opIntConst
	opIntDefault
	opIntCopy
	opIntIncrement
	opIntDelta
	opDecimal // decimal with a single operator
	opBytesNone
	opBytesConst
	opBytesDefault
	opBytesCopy
	opBytesOther // tail and delta
	opGroup      // jump: past the group's opGroupEnd
	opGroupEnd
	opSeq // jump: past the sequence's opElemEnd; followed by opElem
	opElem
	opElemEnd // jump: the sequence's opElem
	opDynRef
	opEnd // end of a template: return from a dynamic templateRef, or finish
)

// role says what a scalar instruction does with the value it decoded.
type role uint8

const (
	roleNone role = iota // structural instruction: appends its own values
	roleInt              // appends an integer value
	// roleExp is the exponent of a decimal with individual operators: kept
	// for the mantissa that follows; an absent exponent appends an absent
	// decimal and skips the mantissa.
	roleExp
	roleMant  // the mantissa, or a single-operator decimal: appends the decimal
	roleBytes // appends a string or byte vector
)

// op is one tape instruction: the operands of its opcode, copied out of the
// instruction tree so that the hot paths read one small struct.
type op struct {
	code     opcode
	role     role
	kind     Kind // kind read from the wire (int32 for an exponent, int64 for a mantissa)
	vkind    Kind // kind of the appended Value
	signed   bool
	nullable bool
	optional bool
	hasInit  bool
	needPMap bool   // group and sequence element: has its own presence map
	fid      int32  // Value.field
	vtag     uint64 // valueTag of the appended Value
	slot     int32  // dictionary slot, -1 for none
	jump     int32  // see the opcodes
	run      int32  // values the scalars from here to the next structural instruction append
	plain    int32  // plain scalars from here to the end of their run (tape_run.go), 0 for runs too short
	init     uint64
	min      int64  // range of the integer kind: signed
	max      uint64 // range of the integer kind: unsigned, and signed maximum
	initSpan span   // initial bytes in the constant pool
	in       *instr // operands of the general functions; in.f names the field in errors
}

// frame is a group, sequence or dynamic templateRef being decoded, with what
// to restore when it ends.
type frame struct {
	pm    PMap   // presence map of the enclosing fields
	vi    int32  // Values index of the composite
	ei    int32  // Values index of the current sequence element
	left  uint64 // sequence elements still to decode, the current one included
	start int    // offset of the composite: errors of the composite itself report it
	ret   []op   // dynamic templateRef: the tape to return to, at retPC
	retPC int
}

// buildTape flattens a template's instruction tree into its tape.
func buildTape(ins []instr) []op {
	t := append(appendTape(nil, ins), op{code: opEnd})
	for i := len(t) - 2; i >= 0; i-- {
		switch t[i].role {
		case roleInt, roleMant, roleBytes:
			t[i].run = t[i+1].run + 1
		case roleExp: // its value, if absent, replaces the mantissa's
			t[i].run = t[i+1].run
		}
		if plainScalar(&t[i]) {
			t[i].plain = t[i+1].plain + 1
		}
	}
	for i := range t {
		if t[i].plain < minPlainRun {
			t[i].plain = 0
		}
	}
	return t
}

func appendTape(t []op, ins []instr) []op {
	for i := range ins {
		in := &ins[i]
		switch in.kind {
		case KindGroup:
			g := len(t)
			t = append(t, op{code: opGroup, fid: in.fid, vtag: valueTag(in.fid, KindGroup), optional: in.optional, needPMap: in.needPMap, in: in})
			t = appendTape(t, in.children)
			t = append(t, op{code: opGroupEnd, in: in})
			t[g].jump = int32(len(t))
		case KindSequence:
			s := len(t)
			t = append(t, op{code: opSeq, fid: in.fid, vtag: valueTag(in.fid, KindSequence), in: in},
				op{code: opElem, fid: in.fid, vtag: valueTag(in.fid, KindGroup) | presentTag | elemTag, needPMap: in.needPMap, in: in})
			t = appendTape(t, in.children)
			t = append(t, op{code: opElemEnd, jump: int32(s + 1), in: in})
			t[s].jump = int32(len(t))
		case KindTemplateRef:
			t = append(t, op{code: opDynRef, fid: in.fid, vtag: valueTag(in.fid, KindTemplateRef) | presentTag, in: in})
		case KindDecimal:
			if in.exp == nil {
				o := scalarOp(in, opDecimal)
				o.role = roleMant
				t = append(t, o)
				continue
			}
			e, m := scalarOp(in.exp, intOpcode(in.exp.op)), scalarOp(in.mant, intOpcode(in.mant.op))
			e.role, m.role = roleExp, roleMant
			e.vkind, m.vkind = KindDecimal, KindDecimal
			e.fid, m.fid = in.fid, in.fid
			e.vtag, m.vtag = valueTag(in.fid, KindDecimal), valueTag(in.fid, KindDecimal)
			t = append(t, e, m)
		case KindASCII, KindUnicode, KindByteVector:
			code := opBytesOther
			switch in.op {
			case OpNone:
				code = opBytesNone
			case OpConstant:
				code = opBytesConst
			case OpDefault:
				code = opBytesDefault
			case OpCopy:
				code = opBytesCopy
			}
			o := scalarOp(in, code)
			o.role = roleBytes
			t = append(t, o)
		default:
			o := scalarOp(in, intOpcode(in.op))
			o.role = roleInt
			t = append(t, o)
		}
	}
	return t
}

func intOpcode(k OpKind) opcode {
	switch k {
	case OpConstant:
		return opIntConst
	case OpDefault:
		return opIntDefault
	case OpCopy:
		return opIntCopy
	case OpIncrement:
		return opIntIncrement
	case OpDelta:
		return opIntDelta
	}
	return opIntNone
}

func scalarOp(in *instr, code opcode) op {
	lo, hi := intRange(in.kind)
	return op{min: lo, max: hi, vtag: valueTag(in.fid, in.kind), code: code, kind: in.kind, vkind: in.kind, signed: in.signed, nullable: in.nullable,
		optional: in.optional, hasInit: in.hasInit, fid: in.fid, slot: in.slot,
		init: in.init.u, initSpan: initSpan(in), in: in}
}

// run decodes the fields of a template with its tape, the message header
// already read: pm is the message's presence map after the template id bit.
func (d *Decoder) run(b []byte, off int, pm PMap, tape []op, m *Message) (int, error) {
	m.Values = m.Values[:0]
	frames := d.frames[:0]
	var (
		o        *op
		start    int // offset where the current instruction's value starts
		decStart int // offset where the current decimal starts
		u        uint64
		exp      int32
		sp       span
		present  bool
		err      error
	)
	pc := 0
	m.Values = slices.Grow(m.Values, int(tape[0].run))
	for {
		o = &tape[pc]
		if o.plain != 0 && pm.lo == 0 {
			// Runs are maximal: what follows is for the code below.
			var k int
			off, pm.hi, k = d.runPlain(b, off, pm.hi, tape[pc:pc+int(o.plain)], m)
			pc += k
			o = &tape[pc]
		}
		pc++
		start = off
		present = true
		switch o.code {
		case opIntNone:
			if off < len(b) && b[off]&stopBit != 0 {
				u, present = oneByteInt(b[off], o.signed, o.nullable)
				off++
			} else if x, n := shortUint(b, off); n != 0 && !o.signed {
				u, present, off = nullAdjust(x, o.nullable), !o.nullable || x != 0, off+n
			} else if u, present, off, err = readIntFast(b, off, o.kind, o.nullable); err != nil {
				goto fail
			}
		case opIntConst:
			u = o.init
			if o.optional {
				present = pm.Next()
			}
		case opIntDefault:
			if !pm.Next() {
				u, present = o.init, o.hasInit
			} else if off < len(b) && b[off]&stopBit != 0 {
				u, present = oneByteInt(b[off], o.signed, o.nullable)
				off++
			} else if x, n := shortUint(b, off); n != 0 && !o.signed {
				u, present, off = nullAdjust(x, o.nullable), !o.nullable || x != 0, off+n
			} else if u, present, off, err = readIntFast(b, off, o.kind, o.nullable); err != nil {
				goto fail
			}
		case opIntCopy, opIntIncrement:
			// The dictionary is written inline: an entry is saved for
			// undo the first time it is written in a message.
			e := &d.dict[o.slot]
			atag := d.epoch<<2 | uint32(stateAssigned)
			if pm.Next() {
				if off < len(b) && b[off]&stopBit != 0 {
					u, present = oneByteInt(b[off], o.signed, o.nullable)
					off++
				} else if x, n := shortUint(b, off); n != 0 && !o.signed {
					u, present, off = nullAdjust(x, o.nullable), !o.nullable || x != 0, off+n
				} else if u, present, off, err = readIntFast(b, off, o.kind, o.nullable); err != nil {
					goto fail
				}
				if e.gen != d.gen {
					d.saveInt(o.slot, e)
				}
				if present {
					e.u, e.exp, e.tag = u, 0, atag
				} else {
					e.tag = d.epoch<<2 | uint32(stateEmpty)
				}
			} else if e.tag == atag {
				u = e.u
				if o.code == opIntIncrement {
					u = increment(o.kind, u)
					if e.gen != d.gen {
						d.saveInt(o.slot, e)
					}
					e.u = u
				}
			} else if u, present, err = d.intNotInStream(o.in); err != nil {
				goto fail
			}
		case opIntDelta:
			var delta uint64
			if off < len(b) && b[off]&stopBit != 0 {
				delta, present = oneByteInt(b[off], true, o.nullable)
				off++
			} else if x, n := shortInt(b, off); n != 0 {
				off += n
				if o.nullable {
					if x > 0 {
						x--
					} else if x == 0 {
						present = false
					}
				}
				delta = uint64(x)
			} else if delta, present, off, err = readIntFast(b, off, KindInt64, o.nullable); err != nil {
				goto fail
			}
			if !present {
				break
			}
			e := &d.dict[o.slot]
			atag := d.epoch<<2 | uint32(stateAssigned)
			base := o.init
			if e.tag == atag {
				base = e.u
			} else if e.tag == d.epoch<<2|uint32(stateEmpty) {
				err = ErrEmptyPrevious
				goto fail
			}
			// base + delta, in the kind's range (R4 otherwise).
			if o.signed {
				x, dx := int64(base), int64(delta)
				r := x + dx
				if (dx > 0 && r < x) || (dx < 0 && r > x) || r < o.min || r > int64(o.max) {
					err = ErrRange
					goto fail
				}
				u = uint64(r)
			} else if dx := int64(delta); dx >= 0 {
				u = base + uint64(dx)
				if u < base || u > o.max {
					err = ErrRange
					goto fail
				}
			} else {
				// The base can be wider than the kind (integers of
				// every kind share a key's entry): the difference too.
				if uint64(-dx) > base || base-uint64(-dx) > o.max { // two's complement makes MinInt64 come out right
					err = ErrRange
					goto fail
				}
				u = base - uint64(-dx)
			}
			if e.gen != d.gen {
				d.saveInt(o.slot, e)
			}
			e.u, e.exp, e.tag = u, 0, atag
		case opDecimal:
			decStart = start
			var mant int64
			tmp := pm
			mant, exp, present, off, err = d.decimalOp(b, off, &tmp, o.in)
			pm = tmp
			if err != nil {
				goto fail
			}
			u = uint64(mant)
		case opBytesNone:
			if o.kind == KindASCII && off < len(b) && b[off] > stopBit {
				sp = m.appendByte(b[off] & dataBits)
				off++
				if len(m.arena) > d.limits.MaxMessageBytes {
					err = ErrLimit
					goto fail
				}
			} else if sp, present, off, err = d.readBytes(b, off, o.in, o.nullable, m); err != nil {
				goto fail
			}
		case opBytesConst:
			sp = o.initSpan
			if o.optional {
				present = pm.Next()
			}
		case opBytesDefault:
			if !pm.Next() {
				sp, present = o.initSpan, o.hasInit
			} else if o.kind == KindASCII && off < len(b) && b[off] > stopBit {
				sp = m.appendByte(b[off] & dataBits)
				off++
				if len(m.arena) > d.limits.MaxMessageBytes {
					err = ErrLimit
					goto fail
				}
			} else if sp, present, off, err = d.readBytes(b, off, o.in, o.nullable, m); err != nil {
				goto fail
			}
		case opBytesCopy:
			e := &d.dict[o.slot]
			atag := d.epoch<<2 | uint32(stateAssigned)
			if pm.Next() {
				if o.kind == KindASCII && off < len(b) && b[off] > stopBit {
					sp = m.appendByte(b[off] & dataBits)
					off++
				} else if sp, present, off, err = d.readBytes(b, off, o.in, o.nullable, m); err != nil {
					goto fail
				}
				if e.gen != d.gen {
					d.save(o.slot)
				}
				if present {
					e.tag = atag
					d.dictBytes[o.slot].set(m.arena[sp.start:sp.end])
				} else {
					e.tag = d.epoch<<2 | uint32(stateEmpty)
				}
			} else if e.tag == atag {
				if v := d.dictBytes[o.slot].value(); len(v) == 1 {
					sp = m.appendByte(v[0])
				} else {
					sp = m.appendBytes(v)
				}
			} else if sp, present, err = d.bytesNotInStream(o.in); err != nil {
				goto fail
			}
			if len(m.arena) > d.limits.MaxMessageBytes {
				err = ErrLimit
				goto fail
			}
		case opBytesOther:
			tmp := pm
			sp, present, off, err = d.bytesOp(b, off, &tmp, o.in, m)
			pm = tmp
			if err != nil {
				goto fail
			}
		case opGroup:
			present = !o.optional || pm.Next()
			vi := len(m.Values)
			m.Values = grow(m.Values)
			tag := o.vtag
			if present {
				tag |= presentTag
			}
			setValue(&m.Values[vi], 0, 0, int32(vi+1), 0, 0, tag)
			if !present {
				pc = int(o.jump)
				goto ensure
			}
			if len(frames) >= d.limits.MaxDepth {
				err = ErrLimit
				goto fail
			}
			frames = frames[:len(frames)+1]
			f := &frames[len(frames)-1]
			f.pm, f.vi = pm, int32(vi)
			pm = PMap{}
			if o.needPMap {
				if off < len(b) && b[off]&stopBit != 0 {
					pm.hi = uint64(b[off]) << 57
					off++
				} else if pm, off, err = ReadPMap(b, off, d.limits.MaxPMapBytes); err != nil {
					goto fail
				}
			}
			goto ensure
		case opGroupEnd:
			f := &frames[len(frames)-1]
			m.Values[f.vi].End = int32(len(m.Values))
			pm = f.pm
			frames = frames[:len(frames)-1]
			goto ensure
		case opSeq:
			tmp := pm
			u, present, off, err = d.intOp(b, off, &tmp, o.in.length)
			pm = tmp
			if err != nil {
				goto fail
			}
			vi := len(m.Values)
			m.Values = grow(m.Values)
			tag := o.vtag
			if present {
				tag |= presentTag
			}
			setValue(&m.Values[vi], u, 0, int32(vi+1), 0, 0, tag)
			if !present {
				pc = int(o.jump)
				goto ensure
			}
			if u > uint64(d.limits.MaxSequenceLen) || len(frames) >= d.limits.MaxDepth {
				err = ErrLimit
				goto fail
			}
			if u == 0 {
				pc = int(o.jump)
				goto ensure
			}
			frames = frames[:len(frames)+1]
			f := &frames[len(frames)-1]
			f.pm, f.vi, f.left, f.start = pm, int32(vi), u, start
			goto ensure
		case opElem:
			goto elem
		case opElemEnd:
			f := &frames[len(frames)-1]
			m.Values[f.ei].End = int32(len(m.Values))
			if f.left--; f.left > 0 {
				// The next element starts here, not in a turn of
				// its own.
				o, pc, start = &tape[o.jump], int(o.jump)+1, off
				goto elem
			}
			m.Values[f.vi].End = int32(len(m.Values))
			pm = f.pm
			frames = frames[:len(frames)-1]
			goto ensure
		case opDynRef:
			var p *program
			var rpm PMap
			if p, rpm, off, err = d.dynamicTemplate(b, off, len(frames)); err != nil {
				goto fail
			}
			vi := len(m.Values)
			m.Values = grow(m.Values)
			setValue(&m.Values[vi], uint64(p.t.ID), 0, int32(vi+1), 0, 0, o.vtag)
			frames = frames[:len(frames)+1]
			f := &frames[len(frames)-1]
			f.pm, f.vi, f.ret, f.retPC = pm, int32(vi), tape, pc
			tape, pc, pm = p.tape, 0, rpm
			goto ensure
		case opEnd:
			if len(frames) == 0 {
				return off, nil
			}
			f := &frames[len(frames)-1]
			m.Values[f.vi].End = int32(len(m.Values))
			pm, tape, pc = f.pm, f.ret, f.retPC
			f.ret = nil
			frames = frames[:len(frames)-1]
			goto ensure
		}

		// Append the scalar's value.
		switch o.role {
		case roleInt:
			tag := o.vtag
			if present {
				tag |= presentTag
			} else {
				u = 0
			}
			m.Values = m.Values[:len(m.Values)+1] // room made at ensure
			setValue(&m.Values[len(m.Values)-1], u, 0, int32(len(m.Values)), 0, 0, tag)
		case roleExp:
			decStart = start
			if present {
				if int64(u) < -63 || int64(u) > 63 {
					err = ErrExponent
					goto fail
				}
				exp = int32(u)
				continue
			}
			pc++ // no mantissa
			u, exp = 0, 0
			fallthrough
		case roleMant:
			tag := o.vtag
			if present {
				tag |= presentTag
			} else {
				u, exp = 0, 0
			}
			m.Values = m.Values[:len(m.Values)+1] // room made at ensure
			setValue(&m.Values[len(m.Values)-1], u, exp, int32(len(m.Values)), 0, 0, tag)
		case roleBytes:
			tag := o.vtag
			if present {
				tag |= presentTag
			} else {
				sp = span{}
			}
			m.Values = m.Values[:len(m.Values)+1] // room made at ensure
			setValue(&m.Values[len(m.Values)-1], 0, 0, int32(len(m.Values)), uint32(sp.start), uint32(sp.end-sp.start)&^poolBit, tag)
		}
		continue

	elem: // o is an opElem: start a sequence element
		{
			f := &frames[len(frames)-1]
			if len(m.Values) >= d.limits.MaxValues {
				err, start = ErrLimit, f.start
				goto fail
			}
			f.ei = int32(len(m.Values))
			m.Values = grow(m.Values)
			setValue(&m.Values[len(m.Values)-1], 0, 0, 0, 0, 0, o.vtag)
			pm = PMap{}
			if o.needPMap {
				if off < len(b) && b[off]&stopBit != 0 {
					pm.hi = uint64(b[off]) << 57
					off++
				} else if off+1 < len(b) && b[off+1]&stopBit != 0 && d.limits.MaxPMapBytes >= 2 {
					pm.hi = uint64(b[off])<<57 | uint64(b[off+1]&dataBits)<<50
					off += 2
				} else if pm, off, err = ReadPMap(b, off, d.limits.MaxPMapBytes); err != nil {
					start = f.start
					goto fail
				}
			}
		}

	ensure:
		// Control flow changes only at structural instructions: make
		// room here for every value up to the next one, so that the
		// scalars append without checking.
		if n := int(tape[pc].run); cap(m.Values)-len(m.Values) < n {
			m.Values = slices.Grow(m.Values, n)
		}
	}

fail:
	if o.role == roleMant {
		start = decStart
	}
	return off, d.fail(o.in.f, start, err)
}

// shortUint decodes an unsigned integer of two or three bytes at b[off],
// whose first byte the caller has seen is not the last; n is 0 for anything
// else, which the caller reads with readIntFast. 21 bits overflow no kind.
func shortUint(b []byte, off int) (x uint64, n int) {
	if off+2 < len(b) {
		c0, c1, c2 := uint64(b[off]), uint64(b[off+1]), uint64(b[off+2])
		if c1&stopBit != 0 {
			return c0<<7 | c1&dataBits, 2
		}
		if c2&stopBit != 0 {
			return c0<<14 | c1<<7 | c2&dataBits, 3
		}
	}
	return 0, 0
}

// shortInt is shortUint for a signed integer.
func shortInt(b []byte, off int) (x int64, n int) {
	if off+2 < len(b) {
		c0 := int64(int8(b[off]<<1) >> 1) // sign-extend the first 7 bits
		c1, c2 := int64(b[off+1]), int64(b[off+2])
		if c1&stopBit != 0 {
			return c0<<7 | c1&dataBits, 2
		}
		if c2&stopBit != 0 {
			return c0<<14 | c1<<7 | c2&dataBits, 3
		}
	}
	return 0, 0
}

// nullAdjust turns the wire value of a nullable unsigned integer into its
// value (0, the null, stays 0).
func nullAdjust(x uint64, nullable bool) uint64 {
	if nullable && x != 0 {
		return x - 1
	}
	return x
}

// dynamicTemplate reads the header of a dynamic templateRef at nesting depth
// depth: its presence map and template id.
func (d *Decoder) dynamicTemplate(b []byte, off int, depth int) (*program, PMap, int, error) {
	if depth >= d.limits.MaxDepth {
		return nil, PMap{}, off, ErrLimit
	}
	pm, off, err := ReadPMap(b, off, d.limits.MaxPMapBytes)
	if err != nil {
		return nil, PMap{}, off, err
	}
	tid := d.prevTID
	if pm.Next() {
		if tid, off, err = ReadUint32(b, off); err != nil {
			return nil, PMap{}, off, err
		}
	} else if !d.hasTID {
		return nil, PMap{}, off, ErrNoPrevious
	}
	p := d.c.lookup(tid)
	if p == nil {
		return nil, PMap{}, off, ErrUnknownTemplate
	}
	d.prevTID, d.hasTID = tid, true
	return p, pm, off, nil
}
