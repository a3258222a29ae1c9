package fast

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// The tree-walking decoder that the instruction tape replaced, kept as a
// reference: TestTapeMatchesReference and FuzzTapeMatchesReference decode the
// same bytes with both and require the same messages, errors and dictionary
// behaviour.

// refDecode is Decode with the reference field walker.
func (d *Decoder) refDecode(b []byte, m *Message) (n int, err error) {
	if d.err != nil {
		return 0, d.err
	}
	m.Reset()
	m.fields, m.pool = d.c.fields, d.c.pool
	d.gen++
	d.undo = d.undo[:0]
	epoch, prevTID, hasTID := d.epoch, d.prevTID, d.hasTID
	d.errField, d.errOff, d.tid = nil, 0, 0
	if d.resetEach {
		d.resetDicts()
		d.hasTID = false
	}
	n, err = d.refMessage(b, m)
	if err == nil {
		d.stats.Messages++
		d.stats.Bytes += uint64(n)
		return n, nil
	}
	m.Values = m.Values[:0]
	field := ""
	if d.errField != nil {
		field = d.errField.Name
	}
	if err == ErrShort {
		d.rollback()
		d.epoch, d.prevTID, d.hasTID = epoch, prevTID, hasTID
		d.stats.Short++
		d.short = DecodeError{Code: "SHORT", TemplateID: d.tid, Field: field, Offset: d.errOff, Err: ErrShort}
		return 0, &d.short
	}
	d.stats.Errors++
	if err == ErrLimit {
		d.stats.LimitHits++
	}
	d.err = &DecodeError{Code: Code(err), TemplateID: d.tid, Field: field, Offset: d.errOff, Err: err}
	return 0, d.err
}

func (d *Decoder) refMessage(b []byte, m *Message) (int, error) {
	p, pm, off, err := d.header(b, m)
	if p == nil || err != nil {
		return off, err
	}
	off, m.Values, err = d.refFields(b, off, &pm, p.fields, m, m.Values[:0], 0)
	if err != nil {
		return 0, err
	}
	return d.finish(off), nil
}

// refFields decodes the instructions ins. The values go to vals, passed and
// returned by value: keeping the slice header in registers rather than in
// the Message makes appending several times faster.
func (d *Decoder) refFields(b []byte, off int, pm *PMap, ins []instr, m *Message, vals []Value, depth int) (int, []Value, error) {
	for i := range ins {
		in := &ins[i]
		start := off
		var err error
		switch in.kind {
		case KindUint32, KindInt32, KindUint64, KindInt64, KindDecimal:
			if in.kind == KindDecimal && in.exp == nil {
				var mant int64
				var exp int32
				var present bool
				mant, exp, present, off, err = d.decimalOp(b, off, pm, in)
				if err == nil {
					vals = grow(vals)
					v := &vals[len(vals)-1]
					v.U, v.Exp, v.End, v.off, v.n = uint64(mant), exp, int32(len(vals)), 0, 0
					v.field, v.Kind, v.Present, v.Elem = in.fid, KindDecimal, present, false
				}
				break
			}
			// Integers, and the exponent then the mantissa of a decimal
			// with individual operators. The common cases are decoded
			// here without a call (calls are what an interpreter spends
			// most on); the rest go to intOp, which consumes its own
			// presence bit.
			sub := in
			if in.kind == KindDecimal {
				sub = in.exp
			}
			var u uint64
			var exp int32
			present := true
			for {
				switch op := sub.op; {
				case op == OpNone && off < len(b) && b[off]&stopBit != 0:
					u, present = oneByteInt(b[off], sub.signed, sub.nullable)
					off++
				case op == OpConstant:
					u = sub.init.u
					if sub.optional {
						present = pm.Next()
					}
				case op == OpDefault && !pm.Peek():
					pm.Next()
					u, present = sub.init.u, sub.hasInit
				case op == OpDefault && off < len(b) && b[off]&stopBit != 0:
					pm.Next()
					u, present = oneByteInt(b[off], sub.signed, sub.nullable)
					off++
				case (op == OpCopy || op == OpIncrement) && !pm.Peek() && d.assigned(sub.slot):
					pm.Next()
					u = d.dict[sub.slot].u
					if op == OpIncrement {
						u = increment(sub.kind, u)
						d.setInt(sub.slot, u, 0)
					}
				case op == OpDelta && off < len(b) && b[off]&stopBit != 0 && d.assigned(sub.slot):
					var delta uint64
					delta, present = oneByteInt(b[off], true, sub.nullable)
					off++
					if present {
						var ok bool
						if u, ok = addDelta(sub.kind, d.dict[sub.slot].u, int64(delta)); !ok {
							err = ErrRange
						} else {
							d.setInt(sub.slot, u, 0)
						}
					}
				default:
					u, present, off, err = d.intOp(b, off, pm, sub)
				}
				if sub != in.exp || err != nil || !present {
					break
				}
				// The exponent is in: check it, then read the mantissa.
				if int64(u) < -63 || int64(u) > 63 {
					err = ErrExponent
					break
				}
				exp, sub = int32(u), in.mant
			}
			if err == nil {
				vals = grow(vals)
				v := &vals[len(vals)-1]
				v.U, v.Exp, v.End, v.off, v.n = u, exp, int32(len(vals)), 0, 0
				v.field, v.Kind, v.Present, v.Elem = in.fid, in.kind, present, false
				if !present {
					v.U, v.Exp = 0, 0
				}
			}
		case KindASCII, KindUnicode, KindByteVector:
			var sp span
			present := true
			switch op := in.op; {
			case op == OpConstant:
				sp = initSpan(in)
				if in.optional {
					present = pm.Next()
				}
			case op == OpDefault && !pm.Peek():
				pm.Next()
				sp, present = initSpan(in), in.hasInit
			case op == OpCopy && !pm.Peek() && d.assigned(in.slot):
				pm.Next()
				sp, err = d.keep(m, d.dictBytes[in.slot].value())
			case op == OpNone || ((op == OpDefault || op == OpCopy) && pm.Peek()):
				if op != OpNone {
					pm.Next()
				}
				sp, present, off, err = d.readBytes(b, off, in, in.nullable, m)
				if op == OpCopy && err == nil {
					if present {
						d.setBytes(in.slot, m.arena[sp.start:sp.end])
					} else {
						d.setEmpty(in.slot)
					}
				}
			default:
				sp, present, off, err = d.bytesOp(b, off, pm, in, m)
			}
			if err == nil {
				vals = grow(vals)
				v := &vals[len(vals)-1]
				v.U, v.Exp, v.End, v.off, v.n = 0, 0, int32(len(vals)), uint32(sp.start), uint32(sp.end-sp.start)&^poolBit
				v.field, v.Kind, v.Present, v.Elem = in.fid, in.kind, present, false
			}
		case KindGroup:
			off, vals, err = d.refGroup(b, off, pm, in, m, vals, depth)
		case KindSequence:
			off, vals, err = d.refSequence(b, off, pm, in, m, vals, depth)
		case KindTemplateRef:
			off, vals, err = d.refDynamicRef(b, off, in, m, vals, depth)
		}
		if err != nil {
			return off, vals, d.fail(in.f, start, err)
		}
	}
	return off, vals, nil
}

func (d *Decoder) refGroup(b []byte, off int, pm *PMap, in *instr, m *Message, vals []Value, depth int) (int, []Value, error) {
	present := !in.optional || pm.Next()
	gi := len(vals)
	vals = append(vals, Value{field: in.fid, Kind: KindGroup, Present: present})
	if present {
		if depth >= d.limits.MaxDepth {
			return off, vals, ErrLimit
		}
		gpm := new(PMap)
		*gpm = PMap{}
		var err error
		if in.needPMap {
			if *gpm, off, err = ReadPMap(b, off, d.limits.MaxPMapBytes); err != nil {
				return off, vals, err
			}
		}
		if off, vals, err = d.refFields(b, off, gpm, in.children, m, vals, depth+1); err != nil {
			return off, vals, err
		}
	}
	vals[gi].End = int32(len(vals))
	return off, vals, nil
}

func (d *Decoder) refSequence(b []byte, off int, pm *PMap, in *instr, m *Message, vals []Value, depth int) (int, []Value, error) {
	n, present, off, err := d.intOp(b, off, pm, in.length)
	if err != nil {
		return off, vals, err
	}
	si := len(vals)
	vals = append(vals, Value{U: n, field: in.fid, Kind: KindSequence, Present: present})
	if present {
		if n > uint64(d.limits.MaxSequenceLen) || depth >= d.limits.MaxDepth {
			return off, vals, ErrLimit
		}
		epm := new(PMap)
		for k := uint64(0); k < n; k++ {
			if len(vals) >= d.limits.MaxValues {
				return off, vals, ErrLimit
			}
			ei := len(vals)
			vals = grow(vals)
			v := &vals[ei]
			v.U, v.Exp, v.off, v.n = 0, 0, 0, 0
			v.field, v.Kind, v.Present, v.Elem = in.fid, KindGroup, true, true
			*epm = PMap{}
			if in.needPMap {
				if *epm, off, err = ReadPMap(b, off, d.limits.MaxPMapBytes); err != nil {
					return off, vals, err
				}
			}
			if off, vals, err = d.refFields(b, off, epm, in.children, m, vals, depth+1); err != nil {
				return off, vals, err
			}
			vals[ei].End = int32(len(vals))
		}
	}
	vals[si].End = int32(len(vals))
	return off, vals, nil
}

func (d *Decoder) refDynamicRef(b []byte, off int, in *instr, m *Message, vals []Value, depth int) (int, []Value, error) {
	if depth >= d.limits.MaxDepth {
		return off, vals, ErrLimit
	}
	pm := new(PMap)
	var err error
	if *pm, off, err = ReadPMap(b, off, d.limits.MaxPMapBytes); err != nil {
		return off, vals, err
	}
	tid := d.prevTID
	if pm.Next() {
		if tid, off, err = ReadUint32(b, off); err != nil {
			return off, vals, err
		}
	} else if !d.hasTID {
		return off, vals, ErrNoPrevious
	}
	p := d.c.lookup(tid)
	if p == nil {
		return off, vals, ErrUnknownTemplate
	}
	d.prevTID, d.hasTID = tid, true
	ri := len(vals)
	vals = append(vals, Value{U: uint64(tid), field: in.fid, Kind: KindTemplateRef, Present: true})
	if off, vals, err = d.refFields(b, off, pm, p.fields, m, vals, depth+1); err != nil {
		return off, vals, err
	}
	vals[ri].End = int32(len(vals))
	return off, vals, nil
}

// sameResult decodes b with the tape decoder dt and the reference decoder
// dr and reports the first difference in the result, the error or the
// message.
func sameResult(b []byte, dt, dr *Decoder, mt, mr *Message) (n int, diff string, err error) {
	n, err = dt.Decode(b, mt)
	rn, rerr := dr.refDecode(b, mr)
	es, res := fmt.Sprint(err), fmt.Sprint(rerr)
	switch {
	case n != rn || es != res:
		return n, fmt.Sprintf("tape: %d, %v; reference: %d, %v", n, es, rn, res), err
	case err != nil:
		return n, "", err
	case mt.TemplateID != mr.TemplateID || mt.Template != mr.Template || len(mt.Values) != len(mr.Values):
		return n, fmt.Sprintf("tape: template %d, %d values; reference: template %d, %d values",
			mt.TemplateID, len(mt.Values), mr.TemplateID, len(mr.Values)), err
	}
	for i := range mt.Values {
		a, c := mt.Values[i], mr.Values[i]
		var ab, cb []byte
		if a.Present && a.Kind.IsBytes() { // absent values have no bytes
			ab, cb = mt.Bytes(i), mr.Bytes(i)
		} else if a.Kind.IsBytes() && len(mt.Bytes(i)) != 0 {
			return n, fmt.Sprintf("value %d: absent with bytes %q", i, mt.Bytes(i)), err
		}
		a.off, a.n, c.off, c.n = 0, 0, 0, 0
		if a != c || !bytes.Equal(ab, cb) {
			return n, fmt.Sprintf("value %d: tape %+v %q; reference %+v %q", i, a, ab, c, cb), err
		}
	}
	if dt.stats != dr.stats {
		return n, fmt.Sprintf("stats: tape %+v; reference %+v", dt.stats, dr.stats), err
	}
	return n, "", err
}

// diffStream decodes stream with both decoders, message by message, each
// message first cut short at a random point; after an error other than
// ErrShort both are reset and decoding resumes one byte further. It returns
// the number of messages the tape decoder took to the end with runFast.
func diffStream(t *testing.T, r *rand.Rand, ts *Templates, opts *DecoderOptions, stream []byte) uint64 {
	t.Helper()
	dt, dr := decoderPair(t, ts, opts)
	return diffDecoders(t, r, dt, dr, stream)
}

// decoderPair returns two decoders of ts with opts: the tape decoder and
// the reference decoder of diffDecoders.
func decoderPair(t testing.TB, ts *Templates, opts *DecoderOptions) (dt, dr *Decoder) {
	t.Helper()
	dt, err := NewDecoder(ts, opts)
	if err != nil {
		t.Fatal(err)
	}
	dr, _ = NewDecoder(ts, opts)
	return dt, dr
}

// diffDecoders is diffStream with the decoders given, made by decoderPair
// and reset first, so that fuzz targets make them once: NewDecoder compiles
// the templates, which costs more than decoding a short input. It returns
// dt's count of fast-path messages since it was made.
func diffDecoders(t *testing.T, r *rand.Rand, dt, dr *Decoder, stream []byte) uint64 {
	t.Helper()
	dt.Reset()
	dr.Reset()
	var mt, mr Message
	for off := 0; off < len(stream); {
		if cut := off + r.IntN(len(stream)-off+1); cut < len(stream) {
			if _, diff, _ := sameResult(stream[off:cut], dt, dr, &mt, &mr); diff != "" {
				t.Fatalf("at %d cut at %d: %s\n%x", off, cut, diff, stream[off:])
			}
		}
		n, diff, err := sameResult(stream[off:], dt, dr, &mt, &mr)
		if diff != "" {
			t.Fatalf("at %d: %s\n%x", off, diff, stream[off:])
		}
		if err != nil {
			dt.Reset()
			dr.Reset()
			n = 1
		}
		off += n
	}
	return dt.fastDone
}

// mutate returns a copy of b with a few random bytes changed, inserted or
// removed.
func mutate(r *rand.Rand, b []byte) []byte {
	out := append([]byte(nil), b...)
	for k := r.IntN(4); k >= 0 && len(out) > 0; k-- {
		i := r.IntN(len(out))
		switch r.IntN(4) {
		case 0:
			out[i] ^= 1 << r.IntN(8)
		case 1:
			out[i] = []byte{0x00, 0x80, 0x7f, 0xff, 0x01, 0x81}[r.IntN(6)]
		case 2:
			out = append(out[:i], out[i+1:]...)
		default:
			out = append(out[:i], append([]byte{byte(r.Uint32())}, out[i:]...)...)
		}
	}
	return out
}

// TestTapeMatchesReference checks the tape decoder against the tree-walking
// reference on random templates and messages (every kind, operator,
// presence, group, sequence and templateRef), whole, cut short and mutated.
func TestTapeMatchesReference(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 40
	}
	fastDone := uint64(0) // messages that took runFast
	for seed := 0; seed < seeds; seed++ {
		r := rand.New(rand.NewPCG(uint64(seed), 11))
		xml := genTemplates(r)
		ts, err := ParseTemplates([]byte(xml))
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		reset := r.IntN(3) == 0
		enc, err := NewEncoder(ts, &EncoderOptions{ResetEachMessage: reset, OmitRepeatedTemplateID: seed%2 == 0})
		if err != nil {
			t.Fatal(err)
		}
		clear(lastInt)
		clear(lastBytes)
		clear(lastDec)
		tails := tailLengths(ts)
		var in Message
		var stream []byte
		for k := 0; k < 20; k++ {
			tm, _ := ts.ByID(uint32(1 + r.IntN(3)))
			genMessage(r, ts, tm, &in, tails)
			if stream, err = enc.Encode(stream, &in); err != nil {
				t.Fatalf("seed %d: encode: %v", seed, err)
			}
		}
		opts := &DecoderOptions{ResetEachMessage: reset}
		if seed%4 == 3 {
			opts.Limits = Limits{MaxDepth: 2, MaxSequenceLen: 3, MaxStringLen: 4, MaxByteVectorLen: 4, MaxValues: 20, MaxPMapBytes: 1}
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			fastDone += diffStream(t, r, ts, opts, stream)
			for k := 0; k < 5; k++ {
				diffStream(t, r, ts, opts, mutate(r, stream))
			}
		})
	}
	if fastDone == 0 {
		t.Error("no message took runFast")
	}
	t.Logf("%d messages took runFast to the end", fastDone)
}

// TestTapeMatchesReferenceComplex30000 runs the comparison on mFAST's
// benchmark file, as it is and mutated.
func TestTapeMatchesReferenceComplex30000(t *testing.T) {
	ts, recs, _ := loadComplex30000(t)
	var stream []byte
	for _, rec := range recs[:2000] {
		stream = append(stream, rec...)
	}
	r := rand.New(rand.NewPCG(1, 2))
	diffStream(t, r, ts, nil, stream)
	for k := 0; k < 20; k++ {
		i := r.IntN(len(stream) - 1000)
		diffStream(t, r, ts, nil, mutate(r, stream[i:i+1000]))
	}
}

// maxFuzzStream bounds the streams of FuzzTapeMatchesReference and
// FuzzAsmLoop: garbage is decoded from every byte offset, so an input costs
// time in the square of its length (28 ms for 4 KiB of random bytes), and
// streams of a few dozen messages find what longer ones do.
const maxFuzzStream = 2048

// FuzzTapeMatchesReference compares the tape and reference decoders on
// arbitrary bytes with the fuzz templates.
func FuzzTapeMatchesReference(f *testing.F) {
	f.Add(unhex(f, "e0a33a6f19bd23512e71364611bc83aab047455ab60560f5b286cb84ff7a26ba998380055994c9fd80"))
	f.Add(unhex(f, "c081"))
	ts, _ := fuzzDecoder(f)
	f.Add(fuzzMDSeed(f, ts))
	dt, dr := decoderPair(f, ts, &DecoderOptions{Limits: Limits{MaxSequenceLen: 64, MaxStringLen: 256, MaxByteVectorLen: 256}})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > maxFuzzStream {
			return
		}
		r := rand.New(rand.NewPCG(uint64(len(b)), 3))
		diffDecoders(t, r, dt, dr, b)
	})
}
