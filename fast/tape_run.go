package fast

// Straight runs of scalars that keep no dictionary state (no operator,
// constant and default; integers and ascii strings) are frequent in exchange
// templates: optional fields with defaults, constant header fields. For each
// run of minPlainRun or more, op.plain sends run to runPlain, which decodes the
// common case of the run in its small loop instead of one turn of run's loop
// per field: that loop carries a lot of state and calls out on its unusual
// paths, so the compiler spills its state at the top of every turn.
// runPlain's loop stays small on purpose: every case added to it costs every
// field, as the compiler then spills more of its own state. DESIGN.md records
// the variants measured, and the fast tape and assembly loop that followed.

// minPlainRun is the shortest run worth a call to runPlain (measured on
// complex30000; see DESIGN.md).
const minPlainRun = 3

// plainScalar reports whether runPlain decodes o.
func plainScalar(o *op) bool {
	switch o.role {
	case roleInt:
		return o.code == opIntNone || o.code == opIntConst || o.code == opIntDefault
	case roleBytes:
		return o.code == opBytesConst || o.kind == KindASCII && (o.code == opBytesNone || o.code == opBytesDefault)
	}
	return false
}

// runPlain decodes the run of plain scalars ops while each takes its common
// path (integers of one to three bytes, strings of one character, constants
// and defaults), and returns at the first one it leaves to run, with the
// offset, the presence map (its high word: run calls it only for maps of up
// to 9 bytes, whose low word stays zero) and the number of instructions it
// did. It never fails: whatever could fail is left to run. The room for the
// values was made by run at the structural instruction before.
func (d *Decoder) runPlain(b []byte, off int, pm uint64, ops []op, m *Message) (int, uint64, int) {
	vals := m.Values
	n := len(vals)
	vals = vals[:cap(vals)]
	i := 0
	for ; i < len(ops); i++ {
		o := &ops[i]
		pm0 := pm // to hand the instruction back untouched
		var (
			u       uint64
			sp      span
			present = true
		)
		switch o.code {
		case opIntConst:
			u = o.init
			if o.optional {
				present = pm>>63 != 0
				pm <<= 1
			}
			goto appendInt
		case opBytesConst:
			sp = o.initSpan
			if o.optional {
				present = pm>>63 != 0
				pm <<= 1
			}
			goto appendBytes
		case opIntDefault, opBytesDefault:
			bit := pm >> 63
			pm <<= 1
			if bit != 0 {
				break
			}
			u, sp, present = o.init, o.initSpan, o.hasInit
			if o.role == roleInt {
				goto appendInt
			}
			goto appendBytes
		}
		// In the stream.
		if o.role == roleBytes {
			if off >= len(b) || b[off] <= stopBit || len(m.arena) >= cap(m.arena) || len(m.arena) >= d.limits.MaxMessageBytes {
				pm = pm0
				break
			}
			sp = span{len(m.arena), len(m.arena) + 1}
			m.arena = m.arena[:sp.end]
			m.arena[sp.start] = b[off] & dataBits
			off++
			goto appendBytes
		}
		if off < len(b) && b[off]&stopBit != 0 {
			u, present = oneByteInt(b[off], o.signed, o.nullable)
			off++
		} else {
			var x int64
			var k int
			if o.signed {
				x, k = shortInt(b, off)
			} else {
				var ux uint64
				if ux, k = shortUint(b, off); k == 0 && off+3 < len(b) && b[off+3]&stopBit != 0 && b[off+2]&stopBit == 0 && b[off+1]&stopBit == 0 {
					// Four bytes (dates, times): 28 bits overflow no kind.
					ux = uint64(b[off])<<21 | uint64(b[off+1])<<14 | uint64(b[off+2])<<7 | uint64(b[off+3]&dataBits)
					k = 4
				}
				x = int64(ux)
			}
			if k == 0 {
				pm = pm0
				break
			}
			off += k
			if o.nullable {
				if x == 0 {
					present = false
				} else if x > 0 {
					x--
				}
			}
			u = uint64(x)
		}
	appendInt:
		{
			tag := o.vtag
			if present {
				tag |= presentTag
			} else {
				u = 0
			}
			setValue(&vals[n], u, 0, int32(n+1), 0, 0, tag)
			n++
		}
		continue
	appendBytes:
		{
			tag := o.vtag
			if present {
				tag |= presentTag
			} else {
				sp = span{}
			}
			setValue(&vals[n], 0, 0, int32(n+1), uint32(sp.start), uint32(sp.end-sp.start)&^poolBit, tag)
			n++
		}
	}
	m.Values = vals[:n]
	return off, pm, i
}
