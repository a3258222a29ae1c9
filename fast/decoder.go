package fast

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// ResetTemplateID is the conventional template id of the FAST Reset message
// (session control protocol): every dictionary is reset when a message with
// this id arrives, whether or not the template file declares it.
const ResetTemplateID = 120

// Limits bounds every length the decoder reads from the wire, so no input can
// make it allocate without limit. A zero field takes its default. Each hit is
// counted in Stats.LimitHits and returned as an error wrapping ErrLimit. The
// byte bounds (MaxStringLen, MaxByteVectorLen, MaxMessageBytes) are capped at
// 256 MiB.
type Limits struct {
	// MaxStringLen bounds ascii and unicode strings, in bytes. Default 4096.
	MaxStringLen int
	// MaxByteVectorLen bounds byte vectors, in bytes. Default 65536.
	MaxByteVectorLen int
	// MaxSequenceLen bounds the length of one sequence. Default 4096.
	MaxSequenceLen int
	// MaxPMapBytes bounds a presence map, in bytes (7 bits each).
	// Default 16. Whatever the bound, at most MaxPMapBits bits may be set.
	MaxPMapBytes int
	// MaxDepth bounds the nesting of groups, sequences and dynamic
	// templateRefs. Default 32.
	MaxDepth int
	// MaxValues bounds the number of values in one Message. Default 65536.
	MaxValues int
	// MaxMessageBytes bounds the string and byte-vector bytes held by one
	// Message. Default 1 MiB.
	MaxMessageBytes int
}

// maxByteLimit caps MaxStringLen, MaxByteVectorLen and MaxMessageBytes
// (256 MiB each), so that a message's arena offsets, at most the sum of two
// of them, stay below poolBit on every architecture.
const maxByteLimit = 1 << 28

// DefaultLimits are the limits used for zero fields of Limits.
var DefaultLimits = Limits{
	MaxStringLen:     4096,
	MaxByteVectorLen: 65536,
	MaxSequenceLen:   4096,
	MaxPMapBytes:     16,
	MaxDepth:         32,
	MaxValues:        65536,
	MaxMessageBytes:  1 << 20,
}

func (l Limits) withDefaults() Limits {
	set := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&l.MaxStringLen, DefaultLimits.MaxStringLen)
	set(&l.MaxByteVectorLen, DefaultLimits.MaxByteVectorLen)
	set(&l.MaxSequenceLen, DefaultLimits.MaxSequenceLen)
	set(&l.MaxPMapBytes, DefaultLimits.MaxPMapBytes)
	set(&l.MaxDepth, DefaultLimits.MaxDepth)
	set(&l.MaxValues, DefaultLimits.MaxValues)
	set(&l.MaxMessageBytes, DefaultLimits.MaxMessageBytes)
	for _, v := range []*int{&l.MaxStringLen, &l.MaxByteVectorLen, &l.MaxMessageBytes} {
		*v = min(*v, maxByteLimit)
	}
	return l
}

// Errors the decoder wraps in a *DecodeError, with the spec's code.
var (
	// ErrUnknownTemplate is D9: the template id is not in the template set.
	ErrUnknownTemplate = errors.New("fast: unknown template id")
	// ErrNoPrevious is D5: a mandatory field is not in the stream and its
	// previous value is undefined with no initial value.
	ErrNoPrevious = errors.New("fast: mandatory field has no previous value")
	// ErrEmptyPrevious is D6: a mandatory field needs its previous value,
	// which is empty.
	ErrEmptyPrevious = errors.New("fast: mandatory field's previous value is empty")
	// ErrSubtraction is D7: a delta's subtraction length exceeds the base.
	ErrSubtraction = errors.New("fast: subtraction length longer than the base value")
	// ErrExponent is R1: a decimal exponent outside -63..63.
	ErrExponent = errors.New("fast: decimal exponent outside -63..63")
	// ErrRange is R4: a delta result does not fit the field's type.
	ErrRange = errors.New("fast: value out of range for its type")
)

// Code returns the spec's error code for err (a sentinel of this package or
// an error wrapping one): "D2", "D5", "D6", "D7", "D9", "R1", "R4", "LIMIT"
// for ErrLimit, "SHORT" for ErrShort, "" otherwise.
func Code(err error) string {
	switch {
	case errors.Is(err, ErrShort):
		return "SHORT"
	case errors.Is(err, ErrOverflow):
		return "D2"
	case errors.Is(err, ErrNoPrevious):
		return "D5"
	case errors.Is(err, ErrEmptyPrevious):
		return "D6"
	case errors.Is(err, ErrSubtraction):
		return "D7"
	case errors.Is(err, ErrUnknownTemplate):
		return "D9"
	case errors.Is(err, ErrExponent):
		return "R1"
	case errors.Is(err, ErrRange):
		return "R4"
	case errors.Is(err, ErrLimit):
		return "LIMIT"
	}
	return ""
}

// DecodeError is a decoding failure with its context.
type DecodeError struct {
	// Code is the spec's error code (see Code).
	Code string
	// TemplateID is the template being decoded, 0 if not known yet.
	TemplateID uint32
	// Field is the name of the field being decoded, "" for the message
	// header.
	Field string
	// Offset is the byte offset, from the start of the buffer passed to
	// Decode, where the failing value starts.
	Offset int
	Err    error
}

func (e *DecodeError) Error() string {
	s := "fast: " + e.Code + " at byte " + strconv.Itoa(e.Offset)
	if e.TemplateID != 0 {
		s += " (template " + strconv.FormatUint(uint64(e.TemplateID), 10)
		if e.Field != "" {
			s += ", field " + e.Field
		}
		s += ")"
	}
	return s + ": " + causeText(e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Dictionary entry states. An entry whose epoch differs from the decoder's is
// undefined whatever its state says: that makes a reset O(1).
const (
	stateUndefined uint8 = iota
	stateAssigned
	stateEmpty
)

// entry is a dictionary entry. The bytes of string and byte-vector values
// are kept apart, in entryBytes, so that the entries integers use are small.
type entry struct {
	u   uint64
	exp int32
	// tag is epoch<<2 | state: one comparison with the decoder's
	// epoch<<2 | stateAssigned tells an assigned entry of the current epoch.
	tag uint32
	gen uint32 // message generation of the last undo save
}

// maxEpoch bounds the epoch so that epoch<<2 fits a uint32 tag.
const maxEpoch = 1<<30 - 1

// entryBytes is the value of a string or byte-vector entry, buf[cur&1]; the
// other buffer keeps the value from before the message intact for undo.
// Saving and undoing flip cur, which writes no pointer: the assembly loop
// saves entries too, and it has no write barrier.
type entryBytes struct {
	buf [2][]byte
	cur uintptr
}

// value returns the entry's bytes.
func (eb *entryBytes) value() []byte { return eb.buf[eb.cur&1] }

// set replaces the entry's bytes with v.
func (eb *entryBytes) set(v []byte) {
	i := eb.cur & 1
	eb.buf[i] = append(eb.buf[i][:0], v...)
}

// flip makes the spare buffer, emptied, the value's.
func (eb *entryBytes) flip() {
	eb.cur ^= 1
	i := eb.cur & 1
	eb.buf[i] = eb.buf[i][:0]
}

type undoRec struct {
	slot int32
	e    entry
}

// DecoderOptions configures a Decoder.
type DecoderOptions struct {
	// Limits bounds lengths read from the wire; zero fields take defaults.
	Limits Limits
	// ResetEachMessage resets every dictionary, and forgets the previous
	// template id, before each message: the per-message reset policy. For
	// a per-packet or per-block policy call Reset between blocks; for
	// "never", do neither.
	ResetEachMessage bool
}

// Stats counts what a Decoder has seen.
type Stats struct {
	Messages  uint64 // messages decoded
	Bytes     uint64 // bytes consumed by decoded messages
	Short     uint64 // Decode calls that needed more bytes
	Errors    uint64 // decoding errors other than ErrShort
	LimitHits uint64 // errors caused by a Limits bound
	Resets    uint64 // dictionary resets (Reset, reset templates, id 120)
}

// Decoder decodes FAST messages with a template set, keeping the dictionary
// state between messages. It is not safe for concurrent use; use one Decoder
// per stream.
type Decoder struct {
	c         *compiled
	limits    Limits
	resetEach bool
	dict      []entry
	dictBytes []entryBytes // parallel to dict
	epoch     uint32
	gen       uint32
	undo      []undoRec
	prevTID   uint32
	hasTID    bool
	err       error // sticky
	stats     Stats
	short     DecodeError // reused for ErrShort so streaming never allocates
	frames    []frame     // composites being decoded, MaxDepth+1
	// Messages runFast decoded, and those it gave up on (tests check
	// that valid feeds stay on the fast path).
	fastDone, fastGaveUp uint64
	// Context of a failure, filled where it happens.
	errField *Field
	errOff   int
	tid      uint32
}

// NewDecoder compiles ts for decoding. ts must not change afterwards.
func NewDecoder(ts *Templates, opts *DecoderOptions) (*Decoder, error) {
	var o DecoderOptions
	if opts != nil {
		o = *opts
	}
	o.Limits = o.Limits.withDefaults()
	c, err := compileTemplates(ts, o.Limits)
	if err != nil {
		return nil, err
	}
	d := &Decoder{c: c, limits: o.Limits, resetEach: o.ResetEachMessage, dict: make([]entry, c.nslots),
		dictBytes: make([]entryBytes, c.nslots), epoch: 1, undo: make([]undoRec, 0, c.nslots),
		frames: make([]frame, o.Limits.MaxDepth+1)}
	return d, nil
}

// Reset resets every dictionary to undefined, forgets the previous template
// id and clears a sticky error: the per-block reset policy (call it at each
// packet or block boundary) and the recovery after a decoding error.
func (d *Decoder) Reset() {
	d.resetDicts()
	d.hasTID = false
	d.err = nil
}

func (d *Decoder) resetDicts() {
	d.stats.Resets++
	d.epoch++
	if d.epoch > maxEpoch {
		// Old epochs could match again: clear for real. A message that
		// resets is decoded again from a reset if it turns out short,
		// so losing the entries its undo log does not restore is fine.
		for i := range d.dict {
			d.dict[i].tag = 0
		}
		d.epoch = 1
	}
}

// Stats returns the decoder's counters.
func (d *Decoder) Stats() Stats { return d.stats }

// Decode decodes one message from the start of b into m and returns the
// number of bytes it used. m is reset first; its contents are valid until
// the next call to Decode with m.
//
// When b ends inside the message, Decode returns an error wrapping ErrShort
// (errors.Is(err, ErrShort)) and leaves the dictionaries as they were, so the
// caller decodes the same message again once more bytes have arrived. That
// error value is reused: it is valid until the next call to Decode. Any other
// error may have corrupted the dictionary state and is sticky: Decode returns
// it until Reset is called.
func (d *Decoder) Decode(b []byte, m *Message) (n int, err error) {
	if d.err != nil {
		return 0, d.err
	}
	m.Reset()
	m.fields, m.pool = d.c.fields, d.c.pool
	if d.gen++; d.gen == 0 {
		// Generations wrapped: forget the old ones so that no entry
		// skips its undo save.
		for i := range d.dict {
			d.dict[i].gen = 0
		}
		d.gen = 1
	}
	d.undo = d.undo[:0]
	epoch, prevTID, hasTID := d.epoch, d.prevTID, d.hasTID
	d.errField, d.errOff, d.tid = nil, 0, 0
	if d.resetEach {
		d.resetDicts()
		d.hasTID = false
	}
	n, err = d.message(b, m)
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

func (d *Decoder) fail(f *Field, off int, err error) error {
	if d.errField == nil {
		d.errField, d.errOff = f, off
	}
	return err
}

func (d *Decoder) message(b []byte, m *Message) (int, error) {
	p, pm, off, err := d.header(b, m)
	if p == nil || err != nil {
		return off, err
	}
	if p.fast != nil && pm.lo == 0 {
		if next, ok := d.runFast(b, off, pm.hi, p, m); ok {
			d.fastDone++
			return d.finish(next), nil
		}
		d.fastGaveUp++
		// Undo what runFast wrote and decode again with run, which
		// reports errors exactly.
		d.rollback()
		d.undo = d.undo[:0]
		m.Values = m.Values[:0]
		m.arena = m.arena[:0]
	}
	if off, err = d.run(b, off, pm, p.tape, m); err != nil {
		return 0, err
	}
	return d.finish(off), nil
}

// header reads a message's presence map and template id, resetting the
// dictionaries as the template or the reset template asks. It returns a
// nil program, with the offset past the header, for the reset template,
// which has no fields.
func (d *Decoder) header(b []byte, m *Message) (*program, PMap, int, error) {
	pm, off, err := ReadPMap(b, 0, d.limits.MaxPMapBytes)
	if err != nil {
		return nil, pm, 0, d.fail(nil, 0, err)
	}
	tid := d.prevTID
	tidOff := off
	if pm.Next() {
		if off < len(b) && b[off]&stopBit != 0 { // one-byte ids are the common case
			tid = uint32(b[off] & dataBits)
			off++
		} else {
			var next int
			tid, next, err = ReadUint32(b, off)
			if err != nil {
				return nil, pm, 0, d.fail(nil, off, err)
			}
			off = next
		}
	} else if !d.hasTID {
		return nil, pm, 0, d.fail(nil, off, ErrNoPrevious)
	}
	d.tid = tid
	p := d.c.lookup(tid)
	if p == nil {
		if tid == ResetTemplateID {
			d.resetDicts()
			d.hasTID = false
			m.TemplateID = tid
			return nil, pm, off, nil
		}
		return nil, pm, 0, d.fail(nil, tidOff, ErrUnknownTemplate)
	}
	d.prevTID, d.hasTID = tid, true
	m.TemplateID, m.Template = tid, p.t
	if p.t.Reset {
		d.resetDicts()
	}
	return p, pm, off, nil
}

// finish ends a decoded message: a template that shares the reset
// template's id also resets the dictionaries.
func (d *Decoder) finish(off int) int {
	if d.tid == ResetTemplateID {
		d.resetDicts()
		d.hasTID = false
	}
	return off
}

// grow extends vals by one element, left for the caller to fill field by
// field: building a Value literal and copying it makes the CPU reload
// narrow stores with wide loads, which stalls store forwarding and cost more
// than all the decoding around it.
func grow(vals []Value) []Value {
	if len(vals) < cap(vals) {
		return vals[:len(vals)+1]
	}
	return append(vals, Value{})
}

// assigned reports whether a dictionary entry holds a value.
func (d *Decoder) assigned(slot int32) bool {
	return d.dict[slot].tag == d.epoch<<2|uint32(stateAssigned)
}

// oneByteInt decodes a one-byte integer encoding (c has the stop bit).
func oneByteInt(c byte, signed, nullable bool) (uint64, bool) {
	x := int64(c & dataBits)
	if signed {
		x = int64(int8(c<<1) >> 1)
	}
	if nullable {
		if x == 0 {
			return 0, false
		}
		if x > 0 {
			x--
		}
	}
	return uint64(x), true
}

// state returns the state of a dictionary entry, undefined after a reset.
func (d *Decoder) state(e *entry) uint8 {
	if e.tag>>2 != d.epoch {
		return stateUndefined
	}
	return uint8(e.tag & 3)
}

// write returns the entry of slot for writing, saving its old value in the
// undo log the first time it is written during the current message.
func (d *Decoder) write(slot int32) *entry {
	e := &d.dict[slot]
	if e.gen != d.gen {
		d.save(slot)
	}
	return e
}

// save records e in the undo log, the first time it is written during the
// current message. The undo record keeps the old buffer and the entry
// continues in the spare one, so writes during this message never touch what
// undo restores. Every byte write replaces the whole value (tail and delta
// read their base before writing), so the spare need not start as a copy.
//
//go:noinline
func (d *Decoder) save(slot int32) {
	e := &d.dict[slot]
	d.undo = append(d.undo, undoRec{slot, *e})
	e.gen = d.gen
	d.dictBytes[slot].flip()
}

// saveInt is save for an integer entry e of slot, which has no byte
// buffers to swap: small enough to be inlined. The undo log never grows
// here: it holds at most one record per slot and NewDecoder allocates that.
func (d *Decoder) saveInt(slot int32, e *entry) {
	n := len(d.undo)
	d.undo = d.undo[:n+1]
	d.undo[n] = undoRec{slot, *e}
	e.gen = d.gen
}

// rollback restores the dictionary entries written since the message began.
func (d *Decoder) rollback() {
	for i := len(d.undo) - 1; i >= 0; i-- {
		r := &d.undo[i]
		d.dict[r.slot] = r.e
		d.dictBytes[r.slot].cur ^= 1
	}
}

func (d *Decoder) setInt(slot int32, u uint64, exp int32) {
	e := d.write(slot)
	e.u, e.exp, e.tag = u, exp, d.epoch<<2|uint32(stateAssigned)
}

func (d *Decoder) setEmpty(slot int32) {
	d.write(slot).tag = d.epoch<<2 | uint32(stateEmpty)
}

// readIntFast reads an integer of the given kind, handling the one-byte
// encodings (most values on a feed) without further calls.
func readIntFast(b []byte, off int, kind Kind, nullable bool) (uint64, bool, int, error) {
	// One function with the loop inline: on the machines this runs on a
	// call costs as much as decoding a byte, and this is the hottest read.
	// Anything unusual (end of buffer, overflow, the nullable encodings of
	// the largest 64-bit values) goes to readIntKind for the exact result.
	if off >= len(b) {
		return readIntKind(b, off, kind, nullable)
	}
	c := b[off]
	i := off + 1
	var x int64
	if kind == KindInt32 || kind == KindInt64 {
		x = int64(int8(c<<1) >> 1) // sign-extend the first 7 data bits
		for c&stopBit == 0 {
			if i >= len(b) || i-off >= MaxIntBytes || (x>>56 != 0 && x>>56 != -1) {
				return readIntKind(b, off, kind, nullable)
			}
			c = b[i]
			x = x<<7 | int64(c&dataBits)
			i++
		}
		if nullable {
			if x == 0 {
				return 0, false, i, nil
			}
			if x > 0 {
				x--
			}
		}
		if kind == KindInt32 && (x < math.MinInt32 || x > math.MaxInt32) {
			return readIntKind(b, off, kind, nullable)
		}
		return uint64(x), true, i, nil
	}
	u := uint64(c & dataBits)
	for c&stopBit == 0 {
		if i >= len(b) || i-off >= MaxIntBytes || u>>57 != 0 {
			return readIntKind(b, off, kind, nullable)
		}
		c = b[i]
		u = u<<7 | uint64(c&dataBits)
		i++
	}
	if nullable {
		if u == 0 {
			return 0, false, i, nil
		}
		u--
	}
	if kind == KindUint32 && u > math.MaxUint32 {
		return readIntKind(b, off, kind, nullable)
	}
	return u, true, i, nil
}

// readIntKind reads an integer of the instruction's kind from the wire.
func readIntKind(b []byte, off int, kind Kind, nullable bool) (uint64, bool, int, error) {
	if nullable {
		switch kind {
		case KindUint32:
			v, ok, next, err := ReadNullableUint32(b, off)
			return uint64(v), ok, next, err
		case KindInt32:
			v, ok, next, err := ReadNullableInt32(b, off)
			return uint64(int64(v)), ok, next, err
		case KindInt64:
			v, ok, next, err := ReadNullableInt64(b, off)
			return uint64(v), ok, next, err
		}
		return ReadNullableUint64(b, off)
	}
	switch kind {
	case KindUint32:
		v, next, err := ReadUint32(b, off)
		return uint64(v), err == nil, next, err
	case KindInt32:
		v, next, err := ReadInt32(b, off)
		return uint64(int64(v)), err == nil, next, err
	case KindInt64:
		v, next, err := ReadInt64(b, off)
		return uint64(v), err == nil, next, err
	}
	v, next, err := ReadUint64(b, off)
	return v, err == nil, next, err
}

// intOp applies the instruction's operator to an integer field.
func (d *Decoder) intOp(b []byte, off int, pm *PMap, in *instr) (uint64, bool, int, error) {
	switch in.op {
	case OpNone:
		return readIntFast(b, off, in.kind, in.nullable)
	case OpConstant:
		if in.optional && !pm.Next() {
			return 0, false, off, nil
		}
		return in.init.u, true, off, nil
	case OpDefault:
		if pm.Next() {
			return readIntFast(b, off, in.kind, in.nullable)
		}
		return in.init.u, in.hasInit, off, nil
	case OpCopy, OpIncrement:
		if pm.Next() {
			u, present, next, err := readIntFast(b, off, in.kind, in.nullable)
			if err != nil {
				return 0, false, next, err
			}
			if present {
				d.setInt(in.slot, u, 0)
			} else {
				d.setEmpty(in.slot)
			}
			return u, present, next, nil
		}
		e := &d.dict[in.slot]
		switch d.state(e) {
		case stateAssigned:
			u := e.u
			if in.op == OpIncrement {
				u = increment(in.kind, u)
				d.setInt(in.slot, u, 0)
			}
			return u, true, off, nil
		case stateEmpty:
			if in.optional {
				return 0, false, off, nil
			}
			return 0, false, off, ErrEmptyPrevious
		}
		return d.undefined(in, off)
	case OpDelta:
		ud, present, next, err := readIntFast(b, off, KindInt64, in.nullable)
		if err != nil || !present {
			return 0, false, next, err
		}
		delta := int64(ud)
		var base uint64
		e := &d.dict[in.slot]
		switch d.state(e) {
		case stateAssigned:
			base = e.u
		case stateEmpty:
			return 0, false, off, ErrEmptyPrevious
		default:
			base = in.init.u
		}
		u, ok := addDelta(in.kind, base, delta)
		if !ok {
			return 0, false, off, ErrRange
		}
		d.setInt(in.slot, u, 0)
		return u, true, next, nil
	}
	return 0, false, off, fmt.Errorf("fast: operator %v on %v", in.op, in.kind)
}

// intNotInStream is copy and increment when the field is not in the stream
// and its dictionary entry holds no value.
func (d *Decoder) intNotInStream(in *instr) (uint64, bool, error) {
	if d.state(&d.dict[in.slot]) == stateEmpty {
		if in.optional {
			return 0, false, nil
		}
		return 0, false, ErrEmptyPrevious
	}
	u, present, _, err := d.undefined(in, 0)
	return u, present, err
}

// undefined handles copy and increment (and tail's integer-free twin) when
// the field is not in the stream and its previous value is undefined: the
// initial value, else absent (optional) or D5.
func (d *Decoder) undefined(in *instr, off int) (uint64, bool, int, error) {
	if in.hasInit {
		d.setInt(in.slot, in.init.u, in.init.exp)
		return in.init.u, true, off, nil
	}
	if in.optional {
		d.setEmpty(in.slot)
		return 0, false, off, nil
	}
	return 0, false, off, ErrNoPrevious
}

// increment adds one, wrapping from the type's maximum to its minimum (6.3.6).
func increment(k Kind, u uint64) uint64 {
	switch k {
	case KindUint32:
		return uint64(uint32(u) + 1)
	case KindInt32:
		return uint64(int64(int32(u) + 1))
	}
	return u + 1
}

// addDelta adds a signed delta to base, reporting whether the result fits
// the kind.
func addDelta(k Kind, base uint64, delta int64) (uint64, bool) {
	switch k {
	case KindInt32, KindInt64:
		b := int64(base)
		r := b + delta
		if (delta > 0 && r < b) || (delta < 0 && r > b) {
			return 0, false
		}
		if k == KindInt32 && (r < math.MinInt32 || r > math.MaxInt32) {
			return 0, false
		}
		return uint64(r), true
	}
	var r uint64
	if delta >= 0 {
		r = base + uint64(delta)
		if r < base {
			return 0, false
		}
	} else {
		m := uint64(-delta) // two's complement makes MinInt64 come out right
		if m > base {
			return 0, false
		}
		r = base - m
	}
	if k == KindUint32 && r > math.MaxUint32 {
		return 0, false
	}
	return r, true
}

// readDecimal reads a decimal from the wire: exponent (nullable if optional,
// null meaning absent) then mantissa.
func readDecimal(b []byte, off int, nullable bool) (mant int64, exp int32, present bool, next int, err error) {
	if nullable {
		exp, present, next, err = ReadNullableInt32(b, off)
		if err != nil || !present {
			return 0, 0, false, next, err
		}
	} else {
		if exp, next, err = ReadInt32(b, off); err != nil {
			return 0, 0, false, next, err
		}
	}
	if exp < -63 || exp > 63 {
		return 0, 0, false, off, ErrExponent
	}
	mant, next, err = ReadInt64(b, next)
	return mant, exp, err == nil, next, err
}

func (d *Decoder) decimalOp(b []byte, off int, pm *PMap, in *instr) (int64, int32, bool, int, error) {
	switch in.op {
	case OpNone:
		return readDecimal(b, off, in.nullable)
	case OpConstant:
		if in.optional && !pm.Next() {
			return 0, 0, false, off, nil
		}
		return int64(in.init.u), in.init.exp, true, off, nil
	case OpDefault:
		if pm.Next() {
			return readDecimal(b, off, in.nullable)
		}
		return int64(in.init.u), in.init.exp, in.hasInit, off, nil
	case OpCopy:
		if pm.Next() {
			mant, exp, present, next, err := readDecimal(b, off, in.nullable)
			if err != nil {
				return 0, 0, false, next, err
			}
			if present {
				d.setInt(in.slot, uint64(mant), exp)
			} else {
				d.setEmpty(in.slot)
			}
			return mant, exp, present, next, nil
		}
		e := &d.dict[in.slot]
		switch d.state(e) {
		case stateAssigned:
			return int64(e.u), e.exp, true, off, nil
		case stateEmpty:
			if in.optional {
				return 0, 0, false, off, nil
			}
			return 0, 0, false, off, ErrEmptyPrevious
		}
		u, present, next, err := d.undefined(in, off)
		return int64(u), in.init.exp, present, next, err
	case OpDelta:
		var dexp int32
		var present bool
		var next int
		var err error
		if in.nullable {
			dexp, present, next, err = ReadNullableInt32(b, off)
		} else {
			dexp, next, err = ReadInt32(b, off)
			present = err == nil
		}
		if err != nil || !present {
			return 0, 0, false, next, err
		}
		dmant, next, err := ReadInt64(b, next)
		if err != nil {
			return 0, 0, false, next, err
		}
		var bm uint64
		var bexp int32
		e := &d.dict[in.slot]
		switch d.state(e) {
		case stateAssigned:
			bm, bexp = e.u, e.exp
		case stateEmpty:
			return 0, 0, false, off, ErrEmptyPrevious
		default:
			bm, bexp = in.init.u, in.init.exp
		}
		exp := int64(bexp) + int64(dexp)
		if exp < -63 || exp > 63 {
			return 0, 0, false, off, ErrExponent
		}
		mant, ok := addDelta(KindInt64, bm, dmant)
		if !ok {
			return 0, 0, false, off, ErrRange
		}
		d.setInt(in.slot, mant, int32(exp))
		return int64(mant), int32(exp), true, next, nil
	}
	return 0, 0, false, off, fmt.Errorf("fast: operator %v on decimal", in.op)
}

// span locates bytes in the message's arena, or in the templates' constant
// pool when start has poolBit set.
type span struct{ start, end int }

// poolBit marks a Value whose bytes are in the constant pool (initial and
// constant values), which saves copying them into every message. It fits a
// 32-bit int; maxByteLimit keeps arena offsets below it.
const poolBit = 1 << 30

// initSpan returns the span of the instruction's initial value in the pool.
func initSpan(in *instr) span {
	return span{poolBit | in.poolOff, poolBit | (in.poolOff + len(in.init.b))}
}

// readBytes reads a string or byte vector from the wire into the message's
// arena.
func (d *Decoder) readBytes(b []byte, off int, in *instr, nullable bool, m *Message) (span, bool, int, error) {
	var s []byte
	present := true
	var next int
	var err error
	if in.kind == KindASCII {
		if sp, present, next, ok := readASCIIFast(b, off, nullable, in.maxLen, m); ok {
			return sp, present, next, d.checkArena(m)
		}
		if nullable {
			s, present, next, err = ReadNullableASCII(b, off, in.maxLen)
		} else {
			s, next, err = ReadASCII(b, off, in.maxLen)
		}
		if err != nil || !present {
			return span{}, false, next, err
		}
		start := len(m.arena)
		m.arena = AppendASCIIValue(m.arena, s)
		return span{start, len(m.arena)}, true, next, d.checkArena(m)
	}
	if nullable {
		s, present, next, err = ReadNullableByteVector(b, off, in.maxLen)
	} else {
		s, next, err = ReadByteVector(b, off, in.maxLen)
	}
	if err != nil || !present {
		return span{}, false, next, err
	}
	sp, err := d.keep(m, s)
	return sp, true, next, err
}

// readASCIIFast is ReadASCII or ReadNullableASCII followed by the copy into
// the arena, in one function; ok is false when the string is cut, too long
// or unterminated, and the caller then takes the slow path for the exact
// error.
func readASCIIFast(b []byte, off int, nullable bool, maxLen int, m *Message) (sp span, present bool, next int, ok bool) {
	limit := min(len(b), off+maxLen+2)
	end := off
	for end < limit && b[end]&stopBit == 0 {
		end++
	}
	if end == limit {
		return span{}, false, off, false
	}
	next = end + 1
	s := b[off:next]
	switch {
	case len(s) == 1 && s[0] == stopBit: // "" or NULL
		return span{len(m.arena), len(m.arena)}, !nullable, next, true
	case len(s) == 2 && s[0] == 0: // "\x00", or "" when nullable
		s = s[1:]
		if nullable {
			return span{len(m.arena), len(m.arena)}, true, next, true
		}
	case nullable && len(s) == 3 && s[0] == 0 && s[1] == 0: // "\x00"
		s = s[2:]
	case len(s) > maxLen:
		return span{}, false, off, false
	}
	start := len(m.arena)
	m.arena = append(m.arena, s...)
	m.arena[len(m.arena)-1] &= dataBits
	return span{start, len(m.arena)}, true, next, true
}

func (d *Decoder) checkArena(m *Message) error {
	if len(m.arena) > d.limits.MaxMessageBytes {
		return ErrLimit
	}
	return nil
}

// keep copies v into the message's arena.
func (d *Decoder) keep(m *Message, v []byte) (span, error) {
	start := len(m.arena)
	m.arena = append(m.arena, v...)
	return span{start, len(m.arena)}, d.checkArena(m)
}

// keep2 copies the concatenation of a and c into the message's arena. Either
// may alias the arena.
func (d *Decoder) keep2(m *Message, a, c []byte) (span, error) {
	start := len(m.arena)
	m.arena = append(m.arena, a...)
	m.arena = append(m.arena, c...)
	return span{start, len(m.arena)}, d.checkArena(m)
}

func (d *Decoder) setBytes(slot int32, v []byte) {
	d.write(slot).tag = d.epoch<<2 | uint32(stateAssigned)
	d.dictBytes[slot].set(v)
}

// bytesNotInStream is copy when the field is not in the stream and its
// dictionary entry holds no value.
func (d *Decoder) bytesNotInStream(in *instr) (span, bool, error) {
	switch {
	case d.state(&d.dict[in.slot]) == stateEmpty:
		if in.optional {
			return span{}, false, nil
		}
		return span{}, false, ErrEmptyPrevious
	case in.hasInit:
		d.setBytes(in.slot, in.init.b)
		return initSpan(in), true, nil
	case in.optional:
		d.setEmpty(in.slot)
		return span{}, false, nil
	}
	return span{}, false, ErrNoPrevious
}

// bytesOp applies the instruction's operator to a string or byte vector.
func (d *Decoder) bytesOp(b []byte, off int, pm *PMap, in *instr, m *Message) (span, bool, int, error) {
	switch in.op {
	case OpNone:
		return d.readBytes(b, off, in, in.nullable, m)
	case OpConstant:
		if in.optional && !pm.Next() {
			return span{}, false, off, nil
		}
		return initSpan(in), true, off, nil
	case OpDefault:
		if pm.Next() {
			return d.readBytes(b, off, in, in.nullable, m)
		}
		if !in.hasInit {
			return span{}, false, off, nil
		}
		return initSpan(in), true, off, nil
	case OpCopy, OpTail:
		if pm.Next() {
			sp, present, next, err := d.readBytes(b, off, in, in.nullable, m)
			if err != nil {
				return span{}, false, next, err
			}
			if !present {
				d.setEmpty(in.slot)
				return span{}, false, next, nil
			}
			if in.op == OpTail {
				base := in.init.b
				if e := &d.dict[in.slot]; d.state(e) == stateAssigned {
					base = d.dictBytes[in.slot].value()
				}
				if n := sp.end - sp.start; n < len(base) {
					// The tail replaces the end of the base.
					if sp, err = d.keep2(m, base[:len(base)-n], m.arena[sp.start:sp.end]); err != nil {
						return span{}, false, next, err
					}
				}
			}
			d.setBytes(in.slot, m.arena[sp.start:sp.end])
			return sp, true, next, nil
		}
		e := &d.dict[in.slot]
		switch d.state(e) {
		case stateAssigned:
			sp, err := d.keep(m, d.dictBytes[in.slot].value())
			return sp, true, off, err
		case stateEmpty:
			if in.optional {
				return span{}, false, off, nil
			}
			return span{}, false, off, ErrEmptyPrevious
		}
		if in.hasInit {
			d.setBytes(in.slot, in.init.b)
			return initSpan(in), true, off, nil
		}
		if in.optional {
			d.setEmpty(in.slot)
			return span{}, false, off, nil
		}
		return span{}, false, off, ErrNoPrevious
	case OpDelta:
		var sub int32
		var present bool
		var next int
		var err error
		if in.nullable {
			sub, present, next, err = ReadNullableInt32(b, off)
		} else {
			sub, next, err = ReadInt32(b, off)
			present = err == nil
		}
		if err != nil || !present {
			return span{}, false, next, err
		}
		psp, _, next, err := d.readBytes(b, next, in, false, m)
		if err != nil {
			return span{}, false, next, err
		}
		part := m.arena[psp.start:psp.end]
		base := in.init.b
		e := &d.dict[in.slot]
		switch d.state(e) {
		case stateAssigned:
			base = d.dictBytes[in.slot].value()
		case stateEmpty:
			return span{}, false, off, ErrEmptyPrevious
		}
		var sp span
		if sub >= 0 {
			if int(sub) > len(base) {
				return span{}, false, off, ErrSubtraction
			}
			sp, err = d.keep2(m, base[:len(base)-int(sub)], part)
		} else {
			k := -(int(sub) + 1) // excess-one: -1 removes nothing from the front
			if k > len(base) {
				return span{}, false, off, ErrSubtraction
			}
			sp, err = d.keep2(m, part, base[k:])
		}
		if err != nil {
			return span{}, false, next, err
		}
		if sp.end-sp.start > in.maxLen {
			return span{}, false, off, ErrLimit
		}
		d.setBytes(in.slot, m.arena[sp.start:sp.end])
		return sp, true, next, nil
	}
	return span{}, false, off, fmt.Errorf("fast: operator %v on %v", in.op, in.kind)
}
