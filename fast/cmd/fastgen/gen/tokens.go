package gen

import (
	"fmt"
	"strings"

	"github.com/tickwire/tickwire/fast"
)

// The token path. Where package stopbit has an assembly kernel
// (stopbit.Accelerated), DecodeRecords does not find the fields of each
// record itself: one stopbit.Scan call splits the buffer into stop-bit
// tokens (up to stopbit.MaxTokens at a time, every value of up to 8 bytes
// already packed into an integer) and the generated code takes the next
// token for every field its presence map says is there. A field then costs
// a load and its checks; the stop bits, the packing and the field ends are
// the kernel's work, done for the whole buffer at once.
//
// The token path covers the templates and the records the window path
// covers (windowSupported), with the same checks and the same rule: it
// writes only the record value, reads the dictionary, and sets the
// dictionary once the record is known good; otherwise it returns the
// record's offset and the careful path decodes it. A record that needs a
// token the batch does not hold (past the end of a full batch, past a token
// of more than 8 bytes, past the end of the buffer) is known by its last
// token index being past the batch: the path then scans again from the
// record (full batch) or leaves it to the careful path. The loop counts
// tokens, not bytes: a record's offset is worked out only where the path
// stops. Where a presence-map bound below 8 bytes is set (MaxPMapBytes),
// DecodeRecords takes the window path instead, so that the token loop needs
// no length check on presence maps.
//
// What is generated here avoids variable shifts on amd64 (they need CX,
// which costs register moves around every use): signed tokens are
// sign-extended from a table of sign bits; a string's bytes are moved down
// from the kernel's word for the token (Tokens.Raw) by a variable shift
// (the one besides the presence map's), masked by a table entry. Presence
// bits of copy fields are still branched on: a branch-free selection would
// make every later token index depend on the presence map, which costs
// more than the mispredictions it saves. The presence map is still moved
// up by a variable shift: a multiplication from a table did not pay.
// fast/DESIGN.md has the measurements.

// tokenRecordMax returns the most tokens a record of a token-path template
// takes: the presence map, the template id and one per field on the wire.
func (g *generator) tokenRecordMax() int {
	most := 0
	for _, t := range g.templates {
		if !windowSupported(t) {
			continue
		}
		n := 2
		for _, f := range t.fields {
			if f.f.Op.Kind != fast.OpConstant {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// emitTokenDispatch emits Decoder.decodeTokens, the token path's record
// loop, and tokenAt, which finds a record's first token in the batch.
func (g *generator) emitTokenDispatch() {
	g.p("// tokenRecordMax is the most tokens a record of the token path takes.")
	g.p("const tokenRecordMax = %d", g.tokenRecordMax())
	g.p("")
	g.p("// decodeTokens decodes the records from b[off] on by the token path, calls")
	g.p("// the handler for each and returns the offset reached: the end of the")
	g.p("// last token of b, or the start of a record the careful path must decode")
	g.p("// (the token path changed nothing for it). The loop runs on token indexes:")
	g.p("// a record's offset is only worked out when the path leaves it (bail).")
	g.p("// It is only called when d.MaxPMapBytes allows a presence map as long as")
	g.p("// any token (windowPMapBytes): a presence map needs no length check here.")
	g.p("//")
	g.p("// The batch's bounds are read from d (tokLim, tokN), not kept in locals:")
	g.p("// locals live across the handler call would be stored and loaded back")
	g.p("// for every record.")
	g.p("func (d *Decoder) decodeTokens(b []byte, off int, h Handler) int {")
	g.p("ti := 0")
	g.p("if d.tokStart < 0 { // no batch yet (a buffer's first call): scan, no search")
	g.p("d.tokN, d.tokFull = stopbit.Scan(b, off, &d.tok)")
	g.p("d.tokStart, d.tokI = off, 0")
	g.p("} else {")
	g.p("ti = d.tokenAt(b, off)")
	g.p("}")
	g.p("d.tokLim = tokenLimit(d.tokN, d.tokFull)")
	g.p("rec := ti // the record's first token")
	g.p("for {")
	g.p("if ti > d.tokLim {")
	g.p("if !d.tokFull {")
	g.p("break // every token of b decoded (bytes after the last one are no token)")
	g.p("}")
	g.p("off = d.tokenOffset(ti)")
	g.p("d.tokN, d.tokFull = stopbit.Scan(b, off, &d.tok)")
	g.p("d.tokStart, ti = off, 0")
	g.p("if d.tokLim = tokenLimit(d.tokN, d.tokFull); ti > d.tokLim {")
	g.p("break")
	g.p("}")
	g.p("}")
	g.p("rec = ti")
	g.p("k := int(d.tok.Len[ti&tokMask]) // the presence map's length")
	g.p("// The presence map's bits from the top bit of pm down.")
	g.p("pm := d.tok.Value[ti&tokMask] << (uint(64-7*k) & 63)")
	g.p("ti++")
	g.p("tid := d.dict.tid")
	g.p("if %s {", pmBit(0))
	g.p("x := d.tok.Value[ti&tokMask]")
	g.p("ti++")
	g.p("if x > 0xffffffff {")
	g.p("goto bail")
	g.p("}")
	g.p("tid = uint32(x)")
	g.p("} else if d.dict.tidState != slotAssigned {")
	g.p("goto bail")
	g.p("}")
	g.p("switch tid {")
	for _, t := range g.templates {
		if !windowSupported(t) {
			continue
		}
		g.p("case %sTemplateID:", t.goName)
		// A token index past tn read a stale entry: some value was not
		// in the batch.
		g.emitFastFields(t, g.tokenRead, "ti > d.tokN", "goto bail")
		g.p("d.dict.tid, d.dict.tidState = tid, slotAssigned")
		g.p("d.n%s++", t.goName)
		g.p("h.On%s(m)", t.goName)
	}
	g.p("default:")
	g.p("goto bail")
	g.p("}")
	g.p("}")
	g.p("d.tokI = ti")
	g.p("return d.tokenOffset(ti)")
	g.p("bail:")
	g.p("d.tokI = rec")
	g.p("return d.tokenOffset(rec)")
	g.p("}")
	g.p("")
}

// tokenRead emits the read of the field in the next token and returns the
// expression of its wire value; ok is set for an optional field. The code
// bails out (goto bail) on what the token path does not handle: a value out of range
// or a string too long or starting with NUL (the kernel leaves values of
// more than 8 bytes out of the batch).
func (g *generator) tokenRead(f *field) string {
	opt := f.f.Optional
	if f.isASCII() {
		if f.fixedLen == 1 {
			g.p("if d.tok.Len[ti&tokMask] != 1 {")
			g.p("goto bail")
			g.p("}")
			g.p("c := byte(d.tok.Value[ti&tokMask])")
			g.p("ti++")
			if opt {
				g.p("ok := c != 0")
			}
			return "c"
		}
		// The stop bit alone is the empty string, or NULL when the field
		// is optional (10.6.3); the other special encodings start with a
		// NUL byte and go to the careful path.
		// The token's bytes come from the word the kernel loaded for it
		// (Tokens.Raw: the 8 bytes ending at its stop byte, its bytes on
		// top), moved down and masked to its k bytes without the stop
		// bit: in order, first character lowest. Loading them from b
		// again (and unpacking the value for a token in b's last 7
		// bytes, where no 8-byte load fits) cost about 10 instructions
		// a string more.
		g.p("k := int(d.tok.Len[ti&tokMask])")
		g.p("w := d.tok.Raw[ti&tokMask] >> (uint(64-8*k) & 63) & tokenTextMask[k]")
		g.p("ti++")
		g.p("if k > %d || w&0xff == 0 && k != 1 {", f.fixedLen)
		g.p("goto bail")
		g.p("}")
		// Stored in place, in stores as wide as the array allows (an
		// [8]byte copy would be stored whole and loaded back in parts).
		g.p("%s", putTextWord("m."+f.goName, "w", f.fixedLen))
		if opt {
			g.p("ok := w != 0")
		}
		return "m." + f.goName
	}
	switch f.f.Kind {
	case fast.KindUint64, fast.KindUint32:
		g.p("x := d.tok.Value[ti&tokMask]")
		g.p("ti++")
		if f.f.Kind == fast.KindUint32 {
			limit := "0xffffffff"
			if opt {
				limit = "0x100000000" // nullable: one up
			}
			g.p("if x > %s {", limit)
			g.p("goto bail")
			g.p("}")
		}
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
	// Signed: the token's 7k bits sign-extended.
	g.p("s := tokenSign[d.tok.Len[ti&tokMask]]")
	g.p("y := int64(d.tok.Value[ti&tokMask]^s - s)")
	g.p("ti++")
	if f.f.Kind == fast.KindInt32 {
		limit := "0xffffffff"
		if opt {
			limit = "0x100000000"
		}
		g.p("if uint64(y+0x80000000) > %s {", limit)
		g.p("goto bail")
		g.p("}")
	}
	if opt {
		g.p("ok := y != 0")
		g.p("y -= int64(uint64(-y) >> 63) // one down when positive")
	}
	if f.f.Kind == fast.KindInt32 {
		return "int32(y)"
	}
	return "y"
}

// textPieces splits an array of n bytes (at most 8) into the widths of the
// stores that write it from a word, widest first.
func textPieces(n int) (widths []int) {
	for _, w := range []int{8, 4, 2, 1} {
		for n >= w {
			widths = append(widths, w)
			n -= w
		}
	}
	return widths
}

// putTextWord returns the statements storing the low n bytes of the word w
// into the [n]byte array a (n at most 8), little-endian.
func putTextWord(a, w string, n int) string {
	put := map[int]string{8: "PutUint64", 4: "PutUint32", 2: "PutUint16"}
	conv := map[int]string{8: "uint64", 4: "uint32", 2: "uint16"}
	var stmts []string
	at := 0
	for _, width := range textPieces(n) {
		val := w
		if at > 0 {
			val = fmt.Sprintf("%s>>%d", w, 8*at)
		}
		if width == 1 {
			stmts = append(stmts, fmt.Sprintf("%s[%d] = byte(%s)", a, at, val))
		} else {
			stmts = append(stmts, fmt.Sprintf("binary.LittleEndian.%s(%s[%d:%d], %s(%s))", put[width], a, at, at+width, conv[width], val))
		}
		at += width
	}
	return strings.Join(stmts, "\n")
}

// tokenHelpers are the generated token path's helpers.
const tokenHelpers = `// tokMask masks token indexes into the batch, so that reads of the batch
// need no bounds check; a read past the tokens Scan found is caught by the
// record's final check instead.
const tokMask = stopbit.MaxTokens - 1

// tokenAt returns the index of the token starting at b[off] in the token
// batch, scanning b again from off when the batch does not hold it. The
// search starts at the record the token path last stopped at, which is at
// or before off.
func (d *Decoder) tokenAt(b []byte, off int) int {
	if d.tokStart >= 0 {
		for i := d.tokI; i < d.tokN; i++ {
			start := d.tokStart
			if i > 0 {
				start = int(d.tok.End[i-1]) + 1
			}
			if start == off {
				return i
			}
			if start > off {
				break
			}
		}
	}
	d.tokN, d.tokFull = stopbit.Scan(b, off, &d.tok)
	d.tokStart, d.tokI = off, 0
	return 0
}

// tokenSign holds, for a token of k bytes (1 to 8), the sign bit of its 7k
// bits: (v^s)-s sign-extends the value v with two operations and no
// variable shift (which ties up CX on amd64). The table covers every uint8
// so that its index needs no bounds check; stale tokens (k 0) keep v.
var tokenSign = [256]uint64{1: 1 << 6, 2: 1 << 13, 3: 1 << 20, 4: 1 << 27, 5: 1 << 34, 6: 1 << 41, 7: 1 << 48, 8: 1 << 55}

// tokenTextMask holds, for a token of k bytes (1 to 8), the mask keeping
// the k bytes of a little-endian word holding the token from its low byte
// on, the stop bit of the last one cleared. The table covers every uint8 so
// that its index needs no bounds check.
var tokenTextMask = [256]uint64{1: 0x7f, 2: 0x7fff, 3: 0x7fffff, 4: 0x7fffffff, 5: 0x7fffffffff, 6: 0x7fffffffffff, 7: 0x7fffffffffffff, 8: 0x7fffffffffffffff}

// tokenOffset returns the offset in the scanned buffer of token i's first
// byte (i at most tokN).
func (d *Decoder) tokenOffset(i int) int {
	if i == 0 {
		return d.tokStart
	}
	return int(d.tok.End[(i-1)&tokMask]) + 1
}

// tokenLimit returns the last token index at which the token path starts
// a record from a batch of n tokens: when Scan stopped for room (full), the
// batch may not hold all of a record's tokens from n-tokenRecordMax on (the
// path scans again there); otherwise it holds every token there is (the
// path ends after token n-1). One compare per record either way.
func tokenLimit(n int, full bool) int {
	if full {
		return n - tokenRecordMax
	}
	return n - 1
}

`
