package gen

import (
	"fmt"

	"github.com/tickwire/tickwire/fast"
)

// The window path. Most records of a feed are short (an SSE 3201 record is
// about 22 bytes) and every value in them fits 8 bytes. For those the
// generated decoder does not walk the record byte after byte: it takes the
// next windowStops (48) bytes as an array (near the end of the buffer, a
// window into one zero-padded copy of its last bytes), gathers the stop bits
// of all of them into one bitmap with one multiplication per 8 bytes, and
// then finds where every field ends with a trailing-zero count and a
// clear-lowest-bit on that bitmap. The fields' values are then independent
// 8-byte loads at offsets masked into the array: no bounds checks, no byte
// loops, and no chain of load -> stop bit -> next load from one field to the
// next. The path loops over the records of a buffer itself.
//
// The window path never reports an error. It writes the record's fields
// into the decoder's record value and only reads the dictionary; it checks
// every condition it relies on (record inside the window, values of at most
// 8 bytes and in range, presence map of at most 8 bytes, no special string
// encoding, no D5/D6 case) and only then sets the dictionary's slots from
// the record. When one fails it returns the record's offset and the careful
// path decodes the record again, deciding everything exactly as before.

// windowSupported reports whether every field of t has a window path.
// A template with two fields on one dictionary slot has none: its window
// decoder sets the slots from the record's fields at the end.
func windowSupported(t *template) bool {
	if t.pmapBits() > 7*windowPMapBytes {
		return false
	}
	slots := map[*slot]bool{}
	for _, f := range t.fields {
		if f.isASCII() && f.f.Op.Kind != fast.OpConstant && f.fixedLen > 8 {
			return false
		}
		if f.slot != nil {
			if slots[f.slot] {
				return false
			}
			slots[f.slot] = true
		}
	}
	return true
}

// emitWindowDispatch emits Decoder.decodeWindow, which decodes records from
// b[off] on by the window path: for each, it reads the presence map and the
// template id and decodes the fields by the window path of the template.
func (g *generator) emitWindowDispatch() {
	g.p("// decodeWindow decodes the records from b[off] on by the window path, calls")
	g.p("// the handler for each and returns the offset reached: the end of b, the")
	g.p("// end of the first record when all is false, or the start of a record the")
	g.p("// careful path must decode (the window path changed nothing for it).")
	g.p("func (d *Decoder) decodeWindow(b []byte, off int, h Handler, all bool) int {")
	g.p("lastPMapByte := windowPMapBytes - 1 // the presence map's last byte at most")
	g.p("if d.MaxPMapBytes > 0 && d.MaxPMapBytes < windowPMapBytes {")
	g.p("lastPMapByte = d.MaxPMapBytes - 1")
	g.p("}")
	g.p("for off >= 0 && off < len(b) {")
	g.p("win := windowAt(b, off, &d.tail)")
	g.p("s := stopBits(win)")
	g.p("e := bits.TrailingZeros64(s | 1<<windowStops) // the presence map's last byte")
	g.p("if e > lastPMapByte {")
	g.p("return off")
	g.p("}")
	g.p("s &= s - 1")
	g.p("// The presence map's bits from the top bit of pm down.")
	g.p("var pm uint64")
	g.p("if e <= 1 {")
	g.p("w := binary.LittleEndian.Uint64(win[:])")
	g.p("pm = w<<57 | w>>8&0x7f<<50&-uint64(e)")
	g.p("} else {")
	g.p("pm = pack8(pack4(win, 0, e)) << (uint(57-7*e) & 63)")
	g.p("}")
	g.p("pos := e + 1")
	g.p("tid := d.dict.tid")
	g.p("if %s {", pmBit(0))
	g.p("e = bits.TrailingZeros64(s | 1<<windowStops)")
	g.p("s &= s - 1")
	g.p("x := pack4(win, pos, e-pos)")
	g.p("if e-pos > 3 {")
	g.p("if x = pack8(x); e-pos > 7 || x > 0xffffffff {")
	g.p("return off")
	g.p("}")
	g.p("}")
	g.p("tid, pos = uint32(x), e+1")
	g.p("} else if d.dict.tidState != slotAssigned {")
	g.p("return off")
	g.p("}")
	g.p("switch tid {")
	for _, t := range g.templates {
		if !windowSupported(t) {
			continue
		}
		g.p("case %sTemplateID:", t.goName)
		g.emitWindowDecode(t)
		g.p("d.dict.tid, d.dict.tidState = tid, slotAssigned")
		g.p("d.n%s++", t.goName)
		g.p("h.On%s(m)", t.goName)
	}
	g.p("default:")
	g.p("return off")
	g.p("}")
	g.p("off += pos")
	g.p("if !all {")
	g.p("break")
	g.p("}")
	g.p("}")
	g.p("return off")
	g.p("}")
	g.p("")
}

// emitWindowDecode emits the window path of t, a case of decodeWindow: the
// record's fields after the template id, the stop bitmap s holding the ends
// of the fields still to read, pos the offset of the next one. It returns off
// (the record's start) when the careful path must decide.
func (g *generator) emitWindowDecode(t *template) {
	// A value not ending in the window has e == windowStops (no stop bit
	// left): pos is then past windowStops.
	g.emitFastFields(t, g.windowRead, "pos > windowStops", "return off")
}

// emitFastFields emits the fields of t for a fast path (window or token):
// read emits the read of the next value and returns its expression (and
// sets ok for an optional field), overrun is the condition, checked once
// after the last field, under which some value was not really there, and
// bail the statement leaving the record to the careful path (returning off,
// the record's start, or jumping to code that does).
// Fields go straight into m (the careful path rewrites every one of them);
// the dictionary is only read until the record is known good, then its copy
// and increment slots are set from m.
func (g *generator) emitFastFields(t *template, read func(*field) string, overrun, bail string) {
	g.p("m := &d.rec%s", t.goName)
	bit := 0
	next := func() string {
		bit++
		return pmBit(bit)
	}
	for _, f := range t.fields {
		g.p("// %s", fieldDoc(f.f))
		op := f.f.Op
		set := func(expr string) {
			if expr == "m."+f.goName {
				return // read stored the value in place
			}
			if f.goType != f.valType && !f.isASCII() {
				g.p("if t := %s; %s {", conv(f, expr), goTypeMisfit(f, "t", expr))
				g.p("%s", bail)
				g.p("}")
			}
			g.p("m.%s = %s", f.goName, conv(f, expr))
		}
		present := func(expr string) {
			if f.f.Optional {
				g.p("m.Has%s = %s", f.goName, expr)
			}
		}
		absent := func() {
			zero := "0"
			if f.isASCII() && f.fixedLen > 1 {
				zero = f.valType + "{}"
			}
			g.p("m.%s, m.Has%s = %s, false", f.goName, f.goName, zero)
		}
		switch op.Kind {
		case fast.OpConstant:
			if f.f.Optional {
				g.p("m.Has%s = %s", f.goName, next())
			}
		case fast.OpNone:
			g.p("{")
			set(read(f))
			present("ok")
			g.p("}")
		case fast.OpDefault:
			g.p("if %s {", next())
			set(read(f))
			present("ok")
			g.p("} else {")
			if f.init != "" {
				set(f.init)
				present("true")
			} else {
				absent()
			}
			g.p("}")
		case fast.OpCopy, fast.OpIncrement:
			sl := "d.dict." + f.slot.name
			g.p("if %s {", next())
			// A NULL reads as the zero value (the integers are one
			// down, the string all zero bytes), so an optional field
			// takes the read value unconditionally, with no branch.
			set(read(f))
			present("ok")
			// The usual case (an assigned slot) is tested first, with one
			// compare; a switch would test its cases in value order.
			g.p("} else if %sState == slotAssigned {", sl)
			if op.Kind == fast.OpIncrement {
				set(sl + "+1")
			} else {
				set(sl)
			}
			present("true")
			g.p("} else if %sState == slotUndefined {", sl)
			switch {
			case f.init != "":
				set(f.init)
				present("true")
			case f.f.Optional:
				absent()
			default:
				g.p("%s // D5", bail)
			}
			g.p("} else {")
			if f.f.Optional {
				absent()
			} else {
				g.p("%s // D6", bail)
			}
			g.p("}")
		}
	}
	g.p("if %s {", overrun)
	g.p("%s", bail)
	g.p("}")
	for _, f := range t.fields {
		if f.slot == nil {
			continue
		}
		sl := "d.dict." + f.slot.name
		val := "m." + f.goName
		if f.goType != f.valType {
			val = f.valType + "(" + val + ")"
		}
		if f.f.Optional {
			g.p("%s, %sState = %s, slotEmpty+uint8(b2u(m.Has%s))", sl, sl, val, f.goName)
		} else {
			g.p("%s, %sState = %s, slotAssigned", sl, sl, val)
		}
	}
}

// windowRead emits the read of the field ending at the next stop bit and
// returns the expression of its wire value; ok is set for an optional field.
// The window decoder returns the record's offset on what the window path
// does not handle: a value of more than 8 bytes (or one not ending in the
// window: e is then windowStops), out of range, or a string starting with
// NUL.
func (g *generator) windowRead(f *field) string {
	g.p("e := bits.TrailingZeros64(s | 1<<windowStops)")
	g.p("s &= s - 1")
	opt := f.f.Optional
	if f.isASCII() {
		// The stop bit alone (0x80) is the empty string, or NULL when the
		// field is optional (10.6.3); the other special encodings start
		// with a NUL byte and go to the careful path.
		if f.fixedLen == 1 {
			g.p("if e != pos {")
			g.p("return off")
			g.p("}")
			g.p("c := win[pos&(windowLoads-1)] & 0x7f")
			g.p("pos++")
			if opt {
				g.p("ok := c != 0")
			}
			return "c"
		}
		g.p("w := text(win, pos, e)")
		g.p("if e-pos >= %d || w&0xff == 0 && e != pos {", f.fixedLen)
		g.p("return off")
		g.p("}")
		g.p("pos = e + 1")
		g.p("var a [8]byte")
		g.p("binary.LittleEndian.PutUint64(a[:], w)")
		if opt {
			g.p("ok := w != 0")
		}
		return fmt.Sprintf("%s(a[:%d])", f.valType, f.fixedLen)
	}
	// Up to 4 bytes (28 bits) no integer type can overflow: the longer
	// values' checks are in the branch that finishes their packing.
	g.p("k := e - pos")
	g.p("x := pack4(win, pos, k)")
	check := ""
	switch f.f.Kind {
	case fast.KindUint32:
		check = " || x > 0xffffffff"
		if opt {
			check = " || x > 0x100000000" // nullable: one up
		}
	case fast.KindInt32:
		check = " || uint64(signed7(x, k)+0x80000000) > 0xffffffff"
		if opt {
			check = " || uint64(signed7(x, k)+0x80000000) > 0x100000000"
		}
	}
	g.p("if k > 3 {")
	g.p("if x = pack8(x); k > 7%s {", check)
	g.p("return off")
	g.p("}")
	g.p("}")
	g.p("pos = e + 1")
	switch f.f.Kind {
	case fast.KindUint64, fast.KindUint32:
		if opt {
			// Nullable: 0 is absent, other values are one up (10.6.1).
			g.p("ok := x != 0")
			g.p("x -= b2u(ok)")
		}
		if f.f.Kind == fast.KindUint64 {
			return "x"
		}
		return "uint32(x)"
	}
	g.p("y := signed7(x, k)")
	if opt {
		g.p("ok := y != 0")
		g.p("y -= int64(uint64(-y) >> 63) // one down when positive")
	}
	if f.f.Kind == fast.KindInt32 {
		return "int32(y)"
	}
	return "y"
}

// windowPMapBytes bounds the presence maps the window path reads (in one
// word, as an integer of that many bytes), as the generated constant of the
// same name does.
const windowPMapBytes = 8

// pmapBits returns the number of presence-map bits t uses, the template
// id's included.
func (t *template) pmapBits() int {
	n := 1
	for _, f := range t.fields {
		if f.usesPMapBit() {
			n++
		}
	}
	return n
}

// windowHelpers are the generated window path's types and inlinable helpers.
const windowHelpers = `// windowStops is the span of a record the window path decodes: the stop
// bits of that many bytes (a multiple of 8) are gathered into one bitmap.
const windowStops = 48

// windowPMapBytes bounds the presence maps the window path reads: up to 8
// bytes (56 bits) make one 8-byte integer.
const windowPMapBytes = 8

// windowLoads bounds the offsets of the window path's loads: a power of two
// above windowStops, with which offsets are masked so that the compiler
// needs no bounds check.
const windowLoads = 64

// window holds the bytes a window decoder reads: windowStops bytes in which
// the record must end, and more so that an 8-byte load at any masked offset
// stays in the array.
type window [windowLoads + 8]byte

// tail holds a zero-padded copy of the last bytes of a buffer, too few for
// a window of their own, and of zeros after them (a zero byte has no stop
// bit, so a record cut by the end of the buffer never ends in a window).
// It is filled once for the last records of a buffer.
type tail struct {
	start int // offset in the buffer of buf[0]; -1 when buf is not filled
	buf   [2 * len(window{})]byte
}

// windowAt returns the window at b[off]: b's own bytes when enough remain,
// else a window into t, which it fills if needed. off must be in b.
func windowAt(b []byte, off int, t *tail) *window {
	if len(b)-off >= len(window{}) {
		return (*window)(b[off:])
	}
	if t.start < 0 || off < t.start || off-t.start > len(window{}) {
		t.start = off
		t.buf = [len(t.buf)]byte{}
		copy(t.buf[:], b[off:])
	}
	return (*window)(t.buf[off-t.start:])
}

// stopBits returns the stop bits of the first windowStops bytes of win as a
// bitmap, bit i for win[i]: the multiplication moves the top bit of every
// byte of a word into the word's top byte, without carries. The decoders
// count trailing zeros of the bitmap with bit windowStops set, which gives
// windowStops when no stop bit is left.
func stopBits(win *window) uint64 {
	const top, gather = 0x8080808080808080, 0x0002040810204081
	return binary.LittleEndian.Uint64(win[0:])&top*gather>>56 |
		binary.LittleEndian.Uint64(win[8:])&top*gather>>56<<8 |
		binary.LittleEndian.Uint64(win[16:])&top*gather>>56<<16 |
		binary.LittleEndian.Uint64(win[24:])&top*gather>>56<<24 |
		binary.LittleEndian.Uint64(win[32:])&top*gather>>56<<32 |
		binary.LittleEndian.Uint64(win[40:])&top*gather>>56<<40
}

// pack4 decodes the stop-bit integer of k+1 bytes at win[pos], k < 8:
// the bytes are shifted to the top of the word and reversed so that the
// stop byte is lowest, and their 7-bit groups are joined by pairs and by
// quads, each step subtracting the gap between groups. An integer of up to
// 4 bytes is then whole; a longer one needs pack8.
func pack4(win *window, pos, k int) uint64 {
	w := binary.LittleEndian.Uint64(win[pos&(windowLoads-1):])
	x := bits.ReverseBytes64(w<<(uint(7-k)*8&63)) &^ 0x80
	x -= x >> 1 & 0x3f803f803f803f80
	return x - x>>2&0x0fffc0000fffc000*3
}

// pack8 finishes pack4's work on an integer of 5 to 8 bytes: its two
// 28-bit halves are joined.
func pack8(x uint64) uint64 {
	return x - x>>4&0x00fffffff0000000*15
}

// signed7 sign-extends the packed value of a k+1-byte integer from its
// 7(k+1) bits.
func signed7(x uint64, k int) int64 {
	sh := uint(57-7*k) & 63
	return int64(x<<sh) >> sh
}

// text returns the ASCII string in win[pos:e+1], of at most 8 bytes, in the
// low bytes of w, stop bit cleared, the bytes after it zero.
func text(win *window, pos, e int) uint64 {
	sh := uint(pos-e+7) * 8 & 63
	w := binary.LittleEndian.Uint64(win[pos&(windowLoads-1):])
	return w << sh >> sh & 0x7f7f7f7f7f7f7f7f
}

// b2u is 1 for true, 0 for false.
func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

`
