package fast

import "slices"

// The fast tape is a second, leaner form of a template's tape, run first on
// every message of a template without dynamic templateRefs. fop i is tape
// instruction i (same jumps, same value counts), with the opcode narrowed to
// the path the operands select (ascii or not, which operators run inline)
// and the operands packed into 32 bytes. fastLoop decodes the common cases
// inline and runFast hands the rest of each field to the general
// per-operator functions, like run; but whenever anything could fail (end of buffer,
// limits, range, undefined or empty previous values a mandatory field needs)
// it gives up on the message instead of reporting: Decode then undoes its
// dictionary writes and decodes the message again with run, whose errors
// carry the offsets and fields. Errors cost a second decode; valid messages
// do not pay for the bookkeeping that exact error reports need.

// fcode selects the code that decodes one fast-tape instruction.
type fcode uint8

const (
	fInt          fcode = iota // integer without operator
	fIntConst                  // integer constant
	fIntDefault                // integer default
	fIntCopy                   // integer copy
	fIntIncrement              // integer increment
	fIntDelta                  // integer delta
	fASCII                     // ascii string without operator
	fBytesConst                // constant string or byte vector
	fASCIIDefault              // ascii default
	fASCIICopy                 // ascii copy
	fSlowDecimal               // decimal with a single operator: decimalOp
	fSlowBytes                 // other strings and byte vectors: bytesOp
	fGroup
	fGroupEnd
	fSeq
	fElem
	fElemEnd
	fEnd
)

// fop flags.
const (
	fSigned   = 1 << iota // the wire integer is signed (delta is)
	fNullable             // the wire value is nullable
	fOptional
	fHasInit
	fNeedPMap   // group or sequence element with its own presence map
	fExp        // decimal exponent: kept for the mantissa that follows
	fMant       // decimal mantissa, or single-operator decimal
	fWide       // 64-bit wire integer: up to 8 bytes read inline (4 otherwise)
	fLengthNone // sequence: the length field has no operator
	fBit        // takes a bit of the presence map
)

// fop is one fast-tape instruction.
type fop struct {
	code  fcode
	kind  Kind // kind of the field (increment wraps, delta range-checks in it)
	flags uint16
	slot  int32 // dictionary slot
	run   int32 // as op.run
	jump  int32 // as op.jump
	entry int32 // slot's byte offset in Decoder.dict, for the assembly loop
	// init is the initial value of an integer; for bytes, the Value's
	// off (poolBit set) in the low word and n in the high word. It is 0
	// without an initial value.
	init uint64
	tag  uint64 // valueTag of the appended Value
	// h is the address of the assembly loop's code for this instruction
	// (tape_asm_amd64.s), 0 where there is none; ptag is tag|presentTag,
	// and dtag the tag of the initial value (present if there is one):
	// set with h, they save the assembly a few instructions per value.
	h          uintptr
	ptag, dtag uint64
}

// buildFast derives the fast tape from a template's tape, or returns nil
// when runFast cannot run it (dynamic templateRefs).
func buildFast(t []op) []fop {
	ft := make([]fop, len(t))
	for i := range t {
		o := &t[i]
		f := fop{kind: o.kind, slot: o.slot, run: o.run, jump: o.jump, init: o.init, tag: o.vtag}
		if o.signed {
			f.flags |= fSigned
		}
		if o.nullable {
			f.flags |= fNullable
		}
		if o.optional {
			f.flags |= fOptional
		}
		if o.hasInit {
			f.flags |= fHasInit
		}
		if o.needPMap {
			f.flags |= fNeedPMap
		}
		if o.role != roleNone && o.in.pmapBit {
			f.flags |= fBit
		}
		switch o.role {
		case roleExp:
			f.flags |= fExp
		case roleMant:
			f.flags |= fMant
		}
		if o.kind == KindInt64 || o.kind == KindUint64 {
			f.flags |= fWide
		}
		ascii := o.kind == KindASCII
		switch o.code {
		case opIntNone:
			f.code = fInt
		case opIntConst:
			f.code = fIntConst
		case opIntDefault:
			f.code = fIntDefault
		case opIntCopy:
			f.code = fIntCopy
		case opIntIncrement:
			f.code = fIntIncrement
		case opIntDelta:
			f.code = fIntDelta
			f.flags |= fSigned | fWide // the delta is an int64
		case opDecimal:
			f.code = fSlowDecimal
		case opBytesNone, opBytesDefault, opBytesCopy, opBytesOther:
			f.code = fSlowBytes
			if ascii {
				switch o.code {
				case opBytesNone:
					f.code = fASCII
				case opBytesDefault:
					f.code = fASCIIDefault
				case opBytesCopy:
					f.code = fASCIICopy
				}
			}
		case opBytesConst:
			f.code = fBytesConst
		case opGroup:
			f.code = fGroup
		case opGroupEnd:
			f.code = fGroupEnd
		case opSeq:
			f.code = fSeq
			if l := o.in.length; l.op == OpNone {
				f.flags |= fLengthNone
				if l.nullable {
					f.flags |= fNullable
				}
			}
		case opElem:
			f.code = fElem
		case opElemEnd:
			f.code = fElemEnd
		case opEnd:
			f.code = fEnd
		default: // opDynRef
			return nil
		}
		if o.role == roleBytes && (o.hasInit || o.code == opBytesConst) {
			sp := o.initSpan
			f.init = uint64(uint32(sp.start)) | uint64(uint32(sp.end-sp.start))<<32
		}
		ft[i] = f
	}
	setHandlers(ft)
	return ft
}

// fastState is where fastLoop stopped and resumes.
type fastState struct {
	off   int
	pm    uint64 // presence map of the current composite, next bit on top
	pc    int
	depth int   // frames in use in Decoder.frames
	exp   int32 // exponent of the decimal whose mantissa is next
}

// Why fastLoop stopped.
const (
	exitDone = iota // the message is decoded
	exitSlow        // the instruction at pc needs slowOp
	exitElem        // the sequence element at pc (an fElem) needs slowElem
	exitGrow        // Values needs room for the values from pc on
)

// runFast decodes the fields of program p like run, the message header
// already read (pm is the message's presence map after the template id bit,
// at most 63 bits). ok is false when it gave up: m and the dictionaries are
// then half written and the caller undoes them and calls run.
//
// The work is split in two so that the loop doing nearly all of it,
// fastLoop, makes no calls: Go keeps no register across a call, and a loop
// with calls on its unusual paths keeps its state on the stack on the usual
// ones too. fastLoop stops at whatever needs a call and runFast does it.
func (d *Decoder) runFast(b []byte, off int, pm uint64, p *program, m *Message) (next int, ok bool) {
	st := fastState{off: off, pm: pm}
	d.ensureValues(m, int(p.fast[0].run)+1)
	for {
		switch d.loop(b, &st, p, m) {
		case exitDone:
			return st.off, true
		case exitSlow:
			if !d.slowOp(b, &st, p, m) {
				return 0, false
			}
		case exitElem:
			if !d.slowElem(b, &st, p, m) {
				return 0, false
			}
		}
		d.ensureValues(m, int(p.fast[st.pc].run)+1)
	}
}

// ensureValues makes room in m.Values for n more values.
func (d *Decoder) ensureValues(m *Message, n int) {
	if cap(m.Values)-len(m.Values) < n {
		m.Values = slices.Grow(m.Values, n)
	}
}

// slowOp runs the instruction at st.pc with the general functions, as run
// does on its unusual paths. It returns false on any error: runFast gives
// up and run reports it.
func (d *Decoder) slowOp(b []byte, st *fastState, p *program, m *Message) bool {
	o := &p.tape[st.pc]
	st.pc++
	pm := PMap{hi: st.pm}
	var (
		u       uint64
		present bool
		sp      span
		err     error
	)
	switch o.code {
	case opGroup:
		present = !o.optional || pm.Next()
		st.pm = pm.hi
		vi := d.appendStructural(m, 0, o.vtag, present)
		if !present {
			st.pc = int(o.jump)
			return true
		}
		if st.depth >= d.limits.MaxDepth {
			return false
		}
		st.depth++
		f := &d.frames[st.depth-1]
		f.pm, f.vi = pm, int32(vi)
		st.pm = 0
		if o.needPMap {
			if pm, st.off, err = ReadPMap(b, st.off, d.limits.MaxPMapBytes); err != nil || pm.lo != 0 {
				return false
			}
			st.pm = pm.hi
		}
		return true
	case opSeq:
		u, present, st.off, err = d.intOp(b, st.off, &pm, o.in.length)
		st.pm = pm.hi
		if err != nil {
			return false
		}
		vi := d.appendStructural(m, u, o.vtag, present)
		// An empty sequence counts against MaxDepth too, as in run.
		if present && (u > uint64(d.limits.MaxSequenceLen) || st.depth >= d.limits.MaxDepth) {
			return false
		}
		if !present || u == 0 {
			st.pc = int(o.jump)
			return true
		}
		st.depth++
		f := &d.frames[st.depth-1]
		f.pm, f.vi, f.left = pm, int32(vi), u
		return true
	case opDecimal:
		var mant int64
		mant, st.exp, present, st.off, err = d.decimalOp(b, st.off, &pm, o.in)
		u = uint64(mant)
	case opBytesNone, opBytesConst, opBytesDefault, opBytesCopy, opBytesOther:
		sp, present, st.off, err = d.bytesOp(b, st.off, &pm, o.in, m)
	default: // integers, exponents and mantissas
		u, present, st.off, err = d.intOp(b, st.off, &pm, o.in)
	}
	st.pm = pm.hi
	if err != nil {
		return false
	}
	n := len(m.Values)
	m.Values = m.Values[:n+1] // room made by runFast
	tag := o.vtag
	if present {
		tag |= presentTag
	}
	switch o.role {
	case roleBytes:
		if !present {
			sp = span{}
		}
		setValue(&m.Values[n], 0, 0, int32(n+1), uint32(sp.start), uint32(sp.end-sp.start)&^poolBit, tag)
		return true
	case roleExp:
		if present {
			if int64(u) < -63 || int64(u) > 63 {
				return false
			}
			st.exp = int32(u)
			m.Values = m.Values[:n]
			return true
		}
		st.pc++ // no mantissa
	case roleInt:
		st.exp = 0
	}
	if !present {
		u, st.exp = 0, 0
	}
	setValue(&m.Values[n], u, st.exp, int32(n+1), 0, 0, tag)
	return true
}

// appendStructural appends the value of a group or sequence and returns its
// index.
func (d *Decoder) appendStructural(m *Message, u uint64, tag uint64, present bool) int {
	n := len(m.Values)
	m.Values = m.Values[:n+1] // room made by runFast
	if present {
		tag |= presentTag
	}
	setValue(&m.Values[n], u, 0, int32(n+1), 0, 0, tag)
	return n
}

// slowElem starts the sequence element at st.pc (an opElem) when fastLoop
// could not: its presence map is longer than 2 bytes, or a limit is hit.
func (d *Decoder) slowElem(b []byte, st *fastState, p *program, m *Message) bool {
	o := &p.tape[st.pc]
	st.pc++
	n := len(m.Values)
	if n >= d.limits.MaxValues {
		return false
	}
	d.frames[st.depth-1].ei = int32(n)
	m.Values = m.Values[:n+1]
	setValue(&m.Values[n], 0, 0, 0, 0, 0, o.vtag)
	st.pm = 0
	if o.needPMap {
		pm, next, err := ReadPMap(b, st.off, d.limits.MaxPMapBytes)
		if err != nil || pm.lo != 0 {
			return false
		}
		st.pm, st.off = pm.hi, next
	}
	return true
}
