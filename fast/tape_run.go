package fast

// Straight runs of scalars that keep no dictionary state (no operator,
// constant and default; integers and ascii strings) are frequent in exchange
// templates: optional fields with defaults, constant header fields. For each
// run of minPlainRun or more, op.plain sends run to runPlain, which decodes the
// common case of the run in its small loop instead of one turn of run's loop
// per field: that loop carries a lot of state and calls out on its unusual
// paths, so the compiler spills its state at the top of every turn.

// What did not pay, measured on complex30000 (callgrind instructions and
// mispredicted branches per message, and CPU ns per message; the base here
// is 8,236 instructions, 134 mispredictions, about 575 ns):
//   - runPlain taking copy and increment integers as well: 8,469, 143, no
//     faster; with delta integers and exponent/mantissa pairs too, so that
//     run's loop turns 15 times per message instead of 51: 9,339, 153, 650 ns;
//     with the exponent waiting in the mantissa's Value instead of a variable
//     and the switch made a jump table: 8,850, 135, 572 ns where the base
//     took 554 (fastest of 15 runs each, interleaved).
//     Every case added to runPlain's loop costs every field: the compiler
//     spills more of its state at the top of each turn.
//   - A separate loop for whole sequence elements (integers of one to four
//     bytes read from one 32-bit load without a branch on their length, the
//     presence-map bit selecting between the value read and the
//     default/previous one instead of branching, element ends and starts in
//     the loop): 10,000 to 11,500 instructions, 120 to 133 mispredictions,
//     655 to 760 ns, also with its state moved out of registers.
//   - Decoding a decimal's mantissa in the same turn as its exponent: 8,250.
// Over these variants CPU time fits 0.05 ns per instruction plus 1.2 ns per
// mispredicted branch (callgrind's counts), so at 79 fields per message a
// field's decode, dispatch and Value store would have to cost about 35
// instructions for 200 ns per message: the interpreter spends about 100.
//
// The fast tape (tape_fast.go) came next: about 6,855 instructions and
// 460 CPU ns per message where run alone takes 8,289 and 550 (the
// variants below were measured against 6,975, before fastLoop stopped
// keeping the Values array's start in a variable). The machine
// runs this code at about 5 instructions per cycle (2.83 GHz, measured with
// a dependent multiply chain; no hardware counters in the VM), so the
// mispredictions above cost little of their own: they follow the
// instruction count. What decides is how many values the loop carries from
// one instruction to the next: the Go compiler stores each of them to the
// stack at the top of every turn as soon as some path anywhere in the body
// runs out of registers. fastLoop keeps four (instruction pointer, offset,
// presence map, value count); dropping its instruction index alone saved
// 10%, and each invariant taken out of the loop's variables a little more.
// Measured and dropped on the way (callgrind instructions per message):
//   - One small function per instruction, called through a function value
//     from a three-line loop (closure-threaded code), with the token read,
//     the Value append and the decimal handling in helpers: 10,400. Go
//     inlines none of the helpers (cost 110 to 160 for a budget of 80), and
//     each call costs a frame, a stack check and the state in memory.
//   - fastLoop reading the instruction's integer before its opcode switch,
//     so that the stop-bit decoding has one copy and no second dispatch
//     follows it: 8,785 (more values live across the switch).
//   - Structural instructions (groups, sequences, elements, the end) left
//     to runFast, so that fastLoop's body only holds scalars: 7,850. The
//     scalar turns cost the same 85 instructions each; the exits did not.
//   - The integer read only for one-byte values (longer ones stopping the
//     loop), which frees registers in the loop: the offset no longer
//     spilled, the presence map, value count and instruction pointer still
//     did.
//   - GOAMD64=v3 (BMI2 shifts, MOVBE): the same instructions and time.
//   - runPlain's idea inside fastLoop: runs of three or more plain scalars
//     (no operator, constant, default) in an inner loop: 6,950, no gain;
//     the inner loop's turns cost about 50 instructions, its exits and the
//     register moves where it meets the main loop the rest.
//   - The integer Value's presence tag from a select instead of a branch,
//     absent values cleared where they arise: 7,100.
//   - The room check copied into each structural instruction instead of a
//     shared label, so that fewer paths meet: the same 6,975.
//   - One function per opcode called directly from a switch, the carried
//     state passed in and returned in registers (instruction, offset,
//     presence map, value count, then buffer, decoder, message): 9,200. The
//     compiler moves every argument between the call's registers and its
//     own around each call (about 28 instructions per field in the loop),
//     and the functions, too large to inline their token read (cost 111),
//     call it.
// A scalar turn of fastLoop costs about 85 instructions (dispatch 10, the
// stores of the carried values and the shuffles where paths meet about 25,
// the field's own work 30 to 50): 200 ns needs about 35. The conclusion
// then was that closing the gap takes code generated per template (fast/sse's
// decoders do it at build time), which Go cannot do at run time.
//
// Round 8 tried the other way around: fastLoop itself in amd64 assembly
// (tape_asm_amd64.s), where nothing spills. It is a direct-threaded
// interpreter: each fast-tape instruction holds the address of its code,
// picked when the tape is built from the opcode and flags (signedness,
// nullability, decimal part, the kind's signedness for deltas), each piece
// of code ends with one indirect jump to the next instruction's, and the
// carried state (instruction, buffer, offset, presence map, next Value and
// its End, decoder, dictionary, epoch tag) stays in registers for the whole
// message. Same exits and writes as fastLoop, compared at every loop run by
// the differential tests. callgrind instructions per complex30000 message
// (Decode only) and BenchmarkDecodeComplex30000 (medians of 5, interleaved
// with fastLoop or the previous step, load 2 to 5):
//   - fastLoop: 6,874, 450 to 475 ns;
//   - every fastLoop path ported, integers read by one 8-byte load, BSWAP,
//     BSR and PEXT: 3,992;
//   - the next Value's End kept in its register, Values stored without
//     masking, delta handlers per kind signedness and nullability, one for
//     a decimal mantissa and one for a default exponent: 3,484, 264 ns;
//   - one-byte integers (most on this feed) read without the 8-byte
//     decode: 3,151, 222 ns;
//   - one compare per read against len(b)-8, tags precomputed per
//     instruction (present, initial value), the arena length checked once:
//     3,056;
//   - the undo save copying the entry with SSE moves, each instruction
//     holding its entry's offset: 2,940;
//   - entryBytes' two buffers indexed by a flag instead of swapped slices,
//     so that saving a string entry writes no pointer (the assembly has no
//     write barrier) and the loop no longer stops to let Go save ascii copy
//     entries: 2,802, 198 ns (cpu 194), fastLoop 469;
//   - the integer read returning the offset past it, default-exponent
//     handlers without flag tests, the header reading a one-byte template
//     id inline: 2,723, 188 to 191 ns;
//   - the next Value's End kept shifted into the word it shares with Exp
//     (one 8-byte store per value), delta handlers per integer kind:
//     2,671, 179 ns (cpu 180), fastLoop 6,866 and 441 ns (load 1).
// Dropped: saving a template's ascii copy entries before the loop instead
// (a save moves the value to the spare buffer, right only just before a
// write: a copy that read the previous value read an empty string); runFast
// calling the assembly without loop's call in between (2 instructions).
// Of the 2,671, the Go around the loop (Decode, header, message, runFast,
// the call) takes about 310; the fields about 29 each: the dispatch 2 and
// an indirect jump, a presence-map bit 2, the integer read 7 for one byte
// and about 20 for more, the Value store 7, a dictionary entry 5 to 10 and
// its undo save (first write in the message) 13 more; a sequence element
// about 70 (its two-byte presence map, frame, start and end values, room
// check).

// minPlainRun is the shortest run worth a call to runPlain: on complex30000
// callgrind counts 8,584 instructions per message with 2, 8,469 with 3,
// 8,476 with 4.
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
