package fast

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// fopSize is the size of a fast-tape instruction.
const fopSize = unsafe.Sizeof(fop{})

// Masks of the stop-bit decoding in fastLoop.
const (
	stopBits8 = 0x8080808080808080
	dataBits8 = 0x7f7f7f7f7f7f7f7f
)

// fastLoop runs the fast tape from st until an instruction needs more than
// its inline code, or the message ends. It calls nothing: every unusual case
// stops the loop before the instruction has changed anything, and runFast
// runs it with the general functions (slowOp). m.Values has room for the
// values up to the next structural instruction and that one's own.
//
// Few variables live from one instruction to the next (the instruction,
// the offset, the presence map and the value count) and few stay the same
// throughout, because the compiler stores the former to the stack at every
// turn once a path anywhere in the loop runs out of registers (DESIGN.md
// has the measurements): the nesting depth and a decimal's exponent wait in
// st, the frames in d, the values are addressed through m. An instruction
// that stops the loop puts back the presence map bit it took (fBit says
// whether it took one; the path, which value it had) and leaves the offset
// where it was.
func (d *Decoder) fastLoop(b []byte, st *fastState, ft []fop, m *Message) int {
	n := len(m.Values)
	m.Values = m.Values[:cap(m.Values)] // m.Values[:n] are the message's until the end
	off, pm := st.off, st.pm
	// Indexes into ft and m.Values are checked where they are made (tape
	// jumps, the room check at structural instructions), not at every use.
	fbase := unsafe.Pointer(unsafe.SliceData(ft))
	var (
		u       uint64
		present bool
		sv      uint64 // bytes of a string value: Value.off, and Value.n in the high word
		why     int
	)
	// o is the instruction, the next one after each turn: there is no
	// index to keep.
	for o := (*fop)(unsafe.Add(fbase, uintptr(st.pc)*fopSize)); ; o = (*fop)(unsafe.Add(unsafe.Pointer(o), fopSize)) {
		present = true
		switch o.code {
		case fInt, fIntDelta:
			goto stream
		case fIntConst:
			u = o.init
			if o.flags&fOptional != 0 {
				present = pm>>63 != 0
				pm <<= 1
			}
			goto store
		case fIntDefault:
			bit := pm >> 63
			pm <<= 1
			if bit != 0 {
				goto stream
			}
			if o.flags&(fExp|fMant) != 0 {
				u, present = o.init, o.flags&fHasInit != 0
				goto store
			}
			// The initial value, or absent (init is 0 then).
			setValue(valueAt(m, n), o.init, 0, int32(n+1), 0, 0,
				o.tag|uint64(o.flags&fHasInit)*(presentTag/fHasInit))
			n++
			continue
		case fIntCopy, fIntIncrement:
			bit := pm >> 63
			pm <<= 1
			if bit != 0 {
				goto stream
			}
			e := &d.dict[o.slot]
			atag := d.epoch<<2 | uint32(stateAssigned)
			if e.tag == atag {
				u = e.u
				if o.code == fIntCopy {
					goto store
				}
				switch o.kind {
				case KindUint32:
					u = uint64(uint32(u) + 1)
				case KindInt32:
					u = uint64(int64(int32(u) + 1))
				default:
					u++
				}
			} else if e.tag == d.epoch<<2|uint32(stateEmpty) || o.flags&fHasInit == 0 {
				goto slow0 // absent, or an error
			} else {
				u = o.init // undefined: the initial value
			}
			if e.gen != d.gen {
				k := len(d.undo)
				d.undo = d.undo[:k+1]
				d.undo[k] = undoRec{o.slot, *e}
				e.gen = d.gen
			}
			e.u, e.exp, e.tag = u, 0, atag
			goto store
		case fASCII:
			goto ascii
		case fBytesConst:
			sv = o.init
			if o.flags&fOptional != 0 {
				present = pm>>63 != 0
				pm <<= 1
			}
			goto storeBytes
		case fASCIIDefault:
			bit := pm >> 63
			pm <<= 1
			if bit != 0 {
				goto ascii
			}
			// The initial value, or absent (init is 0 then).
			setValue(valueAt(m, n), 0, 0, int32(n+1), uint32(o.init), uint32(o.init>>32),
				o.tag|uint64(o.flags&fHasInit)*(presentTag/fHasInit))
			n++
			continue
		case fASCIICopy:
			bit := pm >> 63
			pm <<= 1
			if bit != 0 {
				goto ascii
			}
			if e := &d.dict[o.slot]; e.tag != d.epoch<<2|uint32(stateAssigned) {
				goto slow0
			}
			v := d.dictBytes[o.slot].value()
			a := m.arena
			if len(v) != 1 || len(a) >= cap(a) || len(a) >= d.limits.MaxMessageBytes {
				goto slow0
			}
			m.arena = a[:len(a)+1]
			a = a[:len(a)+1]
			a[len(a)-1] = v[0]
			sv = uint64(len(a)-1) | 1<<32
			goto storeBytes
		case fGroup:
			// Checked before anything changes; a longer presence map
			// is slowOp's.
			if o.flags&fOptional != 0 {
				present = pm>>63 != 0
			}
			var gpm uint64
			glen := 0
			if present {
				if st.depth >= d.limits.MaxDepth {
					goto slow
				}
				if o.flags&fNeedPMap != 0 {
					if off < len(b) && b[off]&stopBit != 0 {
						gpm, glen = uint64(b[off])<<57, 1
					} else if off+1 < len(b) && b[off+1]&stopBit != 0 && d.limits.MaxPMapBytes >= 2 {
						gpm, glen = uint64(b[off])<<57|uint64(b[off+1]&dataBits)<<50, 2
					} else {
						goto slow
					}
				}
			}
			if o.flags&fOptional != 0 {
				pm <<= 1
			}
			tag := o.tag
			if present {
				tag |= presentTag
			}
			setValue(valueAt(m, n), 0, 0, int32(n+1), 0, 0, tag)
			n++
			if !present {
				o = &ft[o.jump-1]
				goto ensure
			}
			st.depth++
			f := &d.frames[st.depth-1]
			f.pm, f.vi = PMap{hi: pm}, int32(n-1)
			pm = gpm
			off += glen
			goto ensure
		case fGroupEnd:
			f := &d.frames[st.depth-1]
			m.Values[f.vi].End = int32(n)
			pm = f.pm.hi
			st.depth--
			goto ensure
		case fSeq:
			// Inline: a length without operator, in one byte.
			if o.flags&fLengthNone == 0 || off >= len(b) || b[off]&stopBit == 0 {
				goto slow
			}
			u = uint64(b[off] & dataBits)
			if o.flags&fNullable != 0 {
				if u == 0 {
					present = false
				} else {
					u--
				}
			}
			// An empty sequence counts against MaxDepth too, as in run.
			if present && (u > uint64(d.limits.MaxSequenceLen) || st.depth >= d.limits.MaxDepth) {
				goto slow
			}
			off++
			tag := o.tag
			if present {
				tag |= presentTag
			}
			setValue(valueAt(m, n), u, 0, int32(n+1), 0, 0, tag)
			n++
			if !present || u == 0 {
				o = &ft[o.jump-1]
				goto ensure
			}
			st.depth++
			f := &d.frames[st.depth-1]
			f.pm, f.vi, f.left = PMap{hi: pm}, int32(n-1), u
			goto ensure
		case fElem:
			goto elem
		case fElemEnd:
			f := &d.frames[st.depth-1]
			m.Values[f.ei].End = int32(n)
			if f.left--; f.left > 0 {
				o = &ft[o.jump]
				goto elem
			}
			m.Values[f.vi].End = int32(n)
			pm = f.pm.hi
			st.depth--
			goto ensure
		case fEnd: // no dynamic templateRefs: the message's end
			why = exitDone
			goto exit
		default: // fSlowDecimal, fSlowBytes
			goto slow
		}

	stream: // an integer in the stream; off moves once nothing can stop
		{
			if off >= len(b) {
				goto slow1
			}
			k := 1
			if c := b[off]; c&stopBit != 0 {
				if o.flags&fSigned != 0 {
					u = uint64(int64(int8(c<<1) >> 1))
				} else {
					u = uint64(c & dataBits)
				}
			} else {
				// Up to 8 bytes in one load, without a branch on
				// their number: keep the bytes up to the first stop
				// bit, put the first one last and pack the 7-bit
				// groups.
				var w uint64
				if off+8 <= len(b) {
					w = binary.LittleEndian.Uint64(b[off:])
				} else {
					for i, c := range b[off:] {
						w |= uint64(c) << (8 * i)
					}
				}
				stops := w & stopBits8
				k = (bits.TrailingZeros64(stops) + 1) >> 3 // 8 when none
				if stops == 0 || k > 4 && o.flags&fWide == 0 {
					goto slow1
				}
				w &= (stops ^ (stops - 1)) & dataBits8
				w = bits.ReverseBytes64(w) >> (64 - 8*k)
				w = w&0x007f007f007f007f | w>>1&0x3f803f803f803f80
				w = w&0x00003fff00003fff | w>>2&0x0fffc0000fffc000
				w = w&0x000000000fffffff | w>>4&0x00fffffff0000000
				if o.flags&fSigned != 0 {
					sh := 64 - 7*k
					w = uint64(int64(w<<sh) >> sh)
				}
				u = w
			}
			if o.flags&fNullable != 0 {
				if u == 0 {
					present = false
				} else if int64(u) > 0 {
					u--
				}
			}
			switch o.code {
			case fIntCopy, fIntIncrement:
				e := &d.dict[o.slot]
				if o.flags&fExp != 0 && present && (int64(u) < -63 || int64(u) > 63) {
					goto slow1
				}
				if e.gen != d.gen {
					j := len(d.undo)
					d.undo = d.undo[:j+1]
					d.undo[j] = undoRec{o.slot, *e}
					e.gen = d.gen
				}
				if present {
					e.u, e.exp, e.tag = u, 0, d.epoch<<2|uint32(stateAssigned)
				} else {
					e.tag = d.epoch<<2 | uint32(stateEmpty)
				}
			case fIntDelta:
				if !present {
					break
				}
				e := &d.dict[o.slot]
				base := o.init
				if e.tag == d.epoch<<2|uint32(stateAssigned) {
					base = e.u
				} else if e.tag == d.epoch<<2|uint32(stateEmpty) {
					goto slow1
				}
				// base + delta in the field's kind, else slowOp
				// reports R4.
				var r uint64
				if o.kind == KindInt32 || o.kind == KindInt64 {
					x, dx := int64(base), int64(u)
					s := x + dx
					if dx > 0 && s < x || dx < 0 && s > x || o.kind == KindInt32 && int64(int32(s)) != s {
						goto slow1
					}
					r = uint64(s)
				} else {
					if dx := int64(u); dx >= 0 {
						r = base + uint64(dx)
						if r < base {
							goto slow1
						}
					} else {
						if uint64(-dx) > base {
							goto slow1
						}
						r = base - uint64(-dx)
					}
					// The base can be wider than the kind: integers
					// of every kind share a key's entry.
					if o.kind == KindUint32 && r > 1<<32-1 {
						goto slow1
					}
				}
				if o.flags&fExp != 0 && (int64(r) < -63 || int64(r) > 63) {
					goto slow1
				}
				if e.gen != d.gen {
					j := len(d.undo)
					d.undo = d.undo[:j+1]
					d.undo[j] = undoRec{o.slot, *e}
					e.gen = d.gen
				}
				e.u, e.exp, e.tag = r, 0, d.epoch<<2|uint32(stateAssigned)
				u = r
			default:
				if o.flags&fExp != 0 && present && (int64(u) < -63 || int64(u) > 63) {
					goto slow1
				}
			}
			off += k
		}

	store: // append an integer or decimal value
		if o.flags&(fExp|fMant) == 0 {
			tag := o.tag
			if present {
				tag |= presentTag
			} else {
				u = 0
			}
			setValue(valueAt(m, n), u, 0, int32(n+1), 0, 0, tag)
			n++
			continue
		}
		if o.flags&fExp != 0 {
			if present {
				st.exp = int32(u) // in range: checked where it came from
				continue
			}
			o = (*fop)(unsafe.Add(unsafe.Pointer(o), fopSize)) // no mantissa
		}
		{
			tag := o.tag
			exp := st.exp
			if present {
				tag |= presentTag
			} else {
				u, exp = 0, 0
			}
			setValue(valueAt(m, n), u, exp, int32(n+1), 0, 0, tag)
			n++
		}
		continue

	ascii: // a one-character ascii string in the stream
		{
			a := m.arena
			if off >= len(b) || b[off] <= stopBit || len(a) >= cap(a) || len(a) >= d.limits.MaxMessageBytes {
				goto slow1
			}
			c := b[off] & dataBits
			if o.code == fASCIICopy {
				e := &d.dict[o.slot]
				eb := &d.dictBytes[o.slot]
				if e.gen != d.gen {
					j := len(d.undo)
					d.undo = d.undo[:j+1]
					d.undo[j] = undoRec{o.slot, *e}
					e.gen = d.gen
					eb.flip()
				}
				v := &eb.buf[eb.cur&1]
				if cap(*v) == 0 {
					goto slow1 // the entry is saved: slowOp only writes it
				}
				*v = (*v)[:1]
				(*v)[0] = c
				e.tag = d.epoch<<2 | uint32(stateAssigned)
			}
			off++
			m.arena = a[:len(a)+1]
			a = a[:len(a)+1]
			a[len(a)-1] = c
			sv = uint64(len(a)-1) | 1<<32
		}

	storeBytes:
		{
			tag := o.tag
			if present {
				tag |= presentTag
			} else {
				sv = 0
			}
			setValue(valueAt(m, n), 0, 0, int32(n+1), uint32(sv), uint32(sv>>32), tag)
			n++
		}
		continue

	elem: // o is an fElem: start a sequence element
		{
			var epm uint64
			if n >= d.limits.MaxValues {
				why = exitElem
				goto exit
			}
			if o.flags&fNeedPMap != 0 {
				if off < len(b) && b[off]&stopBit != 0 {
					epm = uint64(b[off]) << 57
					off++
				} else if off+1 < len(b) && b[off+1]&stopBit != 0 && d.limits.MaxPMapBytes >= 2 {
					epm = uint64(b[off])<<57 | uint64(b[off+1]&dataBits)<<50
					off += 2
				} else {
					why = exitElem
					goto exit
				}
			}
			d.frames[st.depth-1].ei = int32(n)
			setValue(valueAt(m, n), 0, 0, 0, 0, 0, o.tag)
			n++
			pm = epm
		}

	ensure:
		// Control flow changes only at structural instructions: check
		// here that there is room for the values up to the next one and
		// for that one's own.
		if n+int((*fop)(unsafe.Add(unsafe.Pointer(o), fopSize)).run)+1 <= len(m.Values) {
			continue
		}
		why = exitGrow
		goto exit

	slow0: // the instruction took a 0 bit, if any
		if o.flags&fBit != 0 {
			pm >>= 1
		}
		goto slow
	slow1: // the instruction took a 1 bit, if any
		if o.flags&fBit != 0 {
			pm = pm>>1 | 1<<63
		}
	slow:
		why = exitSlow
	exit:
		m.Values = m.Values[:n]
		pc := int((uintptr(unsafe.Pointer(o)) - uintptr(fbase)) / fopSize)
		if why == exitGrow {
			pc++ // past the structural instruction
		}
		st.off, st.pm, st.pc = off, pm, pc
		return why
	}
}

// valueAt returns m.Values[n], which the caller made room for, without a
// bounds check.
func valueAt(m *Message, n int) *Value {
	return (*Value)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(m.Values)), uintptr(n)*unsafe.Sizeof(Value{})))
}
