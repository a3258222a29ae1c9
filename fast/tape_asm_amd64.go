//go:build !purego

//lint:file-ignore U1000 the asm* pieces are reached only from assembly (asmHandlers, their jumps), which staticcheck does not read

package fast

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The assembly loop (tape_asm_amd64.s) runs the fast tape like fastLoop,
// with the same contract: it starts from st, stops where fastLoop stops
// (exitDone, exitSlow, exitElem, exitGrow) with st, m.Values and the
// dictionaries as fastLoop leaves them, and calls nothing. It differs in
// how it gets there: each instruction's code is a separate piece of
// assembly whose address the instruction holds (fop.h), chosen when the
// tape is built from the opcode and the flags, and each piece ends by
// jumping to the next instruction's (direct threading). The state carried
// from one instruction to the next (instruction, offset, presence map, next
// Value and its index, buffer, decoder, dictionary, epoch tag) stays in
// registers for the whole run, where Go's compiler stores part of it to the
// stack at every turn of fastLoop.
//
// Assembly functions are not preemption points, and none of this code
// loops longer than one message's fields: every turn that repeats (a
// sequence element) appends a value, so a call does at most as many as
// m.Values has room for, and stops at MaxValues. The longest call is then
// one decoding MaxValues values (DESIGN.md has its time at the default),
// during which a garbage collection waits for this goroutine. The purego
// build tag leaves the assembly out (tape_asm_other.go), as does a CPU
// without BMI2 or with a slow PEXT (slowPEXT).

// haveAsmLoop reports whether the CPU runs the assembly loop: it uses
// BMI2's PEXT and SHRX, and PEXT must be fast (it is microcoded on AMD
// before Zen 3, where fastLoop is faster).
var haveAsmLoop = cpu.X86.HasBMI2 && !slowPEXT(cpuVendorFamily())

// asmLoopOn selects the assembly loop when the CPU has it; tests turn it
// off to run fastLoop on amd64.
var asmLoopOn = haveAsmLoop

// loopCheck, set by tests, runs instead of fastLoop while asmLoopOn is
// off: it runs both loops and compares them. It gets copies (passed to a
// function value, b, st and m would escape, and runFast's st would be
// allocated at every message) and of b only a window from st.off on,
// enough for the fields up to the loop's next stop; full is len(b), for
// the hook to check that the window was.
var loopCheck func(d *Decoder, b []byte, full int, st *fastState, ft []fop, m *Message) int

// loopCheckWindow is the length of b that loopCheck gets after st.off.
const loopCheckWindow = 4096

// loop runs the assembly loop on p's fast tape, or fastLoop where the
// assembly loop is off.
func (d *Decoder) loop(b []byte, st *fastState, p *program, m *Message) int {
	ft := p.fast
	if asmLoopOn {
		return d.asmFastLoop(b, st, ft, m)
	}
	if loopCheck != nil {
		bc := append([]byte(nil), b[:min(len(b), st.off+loopCheckWindow)]...)
		sc, mc := *st, *m
		why := loopCheck(d, bc, len(b), &sc, ft, &mc)
		*st, *m = sc, mc
		return why
	}
	return d.fastLoop(b, st, ft, m)
}

// asmFastLoop runs asmLoop with fastLoop's contract.
func (d *Decoder) asmFastLoop(b []byte, st *fastState, ft []fop, m *Message) int {
	why := asmLoop(d, b, st, &ft[0], m)
	st.pc /= int(fopSize) // asmLoop leaves the byte offset
	return why
}

// asmLoop runs the fast tape whose first instruction is ft from st.pc on,
// like fastLoop, but leaves in st.pc the byte offset of the instruction
// from ft. Every instruction's h must be set.
//
//go:noescape
func asmLoop(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int

// asmHandlers fills t with the addresses of the instructions' code, in the
// order of the h constants.
//
//go:noescape
func asmHandlers(t *[nHandlers]uintptr)

// Indexes of the instructions' code in asmHandlers' table. The suffixes U
// (unsigned, mandatory), UN (unsigned, nullable), S and SN (signed) are
// integers that are not part of a decimal; G is the general code for any
// flags.
const (
	hSlow = iota
	hEnd
	hGroup
	hGroupEnd
	hSeq
	hElem
	hElemEnd
	hIntU
	hIntUN
	hIntG
	hConst
	hConstG
	hDefaultU
	hDefaultUN
	hDefaultG
	hCopyU
	hCopyUN
	hCopyG
	hIncrementU
	hIncrementG
	hDeltaInt32
	hDeltaInt32N
	hDeltaInt64
	hDeltaInt64N
	hDeltaUint32
	hDeltaUint32N
	hDeltaUint64
	hDeltaUint64N
	hDeltaMant
	hDeltaG
	hDefaultExp
	hDefaultExpN
	hASCII
	hASCIIDefault
	hASCIICopy
	hBytesConst
	nHandlers
)

// handlerTable holds the addresses asmHandlers returns.
var handlerTable = func() (t [nHandlers]uintptr) {
	asmHandlers(&t)
	return t
}()

// setHandlers sets the h of every instruction of ft when the CPU runs the
// assembly loop.
func setHandlers(ft []fop) {
	if !haveAsmLoop {
		return
	}
	for i := range ft {
		o := &ft[i]
		o.h = handlerTable[handlerIndex(o)]
		o.entry = o.slot * int32(unsafe.Sizeof(entry{}))
		o.ptag, o.dtag = o.tag|presentTag, o.tag
		if o.flags&fHasInit != 0 {
			o.dtag |= presentTag
		}
	}
}

// handlerIndex picks the code for o: the narrowest that decodes it.
func handlerIndex(o *fop) int {
	plain := o.flags&(fExp|fMant) == 0
	unsigned := plain && o.flags&fSigned == 0
	nullable := o.flags&fNullable != 0
	pick := func(general, u, un int) int {
		switch {
		case !unsigned:
			return general
		case nullable:
			return un
		}
		return u
	}
	switch o.code {
	case fInt:
		return pick(hIntG, hIntU, hIntUN)
	case fIntConst:
		if plain {
			return hConst
		}
		return hConstG
	case fIntDefault:
		if o.flags&(fExp|fMant|fSigned) == fExp|fSigned {
			if nullable {
				return hDefaultExpN
			}
			return hDefaultExp
		}
		return pick(hDefaultG, hDefaultU, hDefaultUN)
	case fIntCopy:
		return pick(hCopyG, hCopyU, hCopyUN)
	case fIntIncrement:
		if unsigned && !nullable {
			return hIncrementU
		}
		return hIncrementG
	case fIntDelta: // the wire value is signed
		if o.flags&(fExp|fMant) == fMant && !nullable && o.kind == KindInt64 {
			return hDeltaMant
		}
		if !plain {
			return hDeltaG
		}
		n := 0
		if nullable {
			n = 1
		}
		switch o.kind {
		case KindInt32:
			return hDeltaInt32 + n
		case KindInt64:
			return hDeltaInt64 + n
		case KindUint32:
			return hDeltaUint32 + n
		case KindUint64:
			return hDeltaUint64 + n
		}
		return hDeltaG
	case fASCII:
		return hASCII
	case fBytesConst:
		return hBytesConst
	case fASCIIDefault:
		return hASCIIDefault
	case fASCIICopy:
		return hASCIICopy
	case fGroup:
		return hGroup
	case fGroupEnd:
		return hGroupEnd
	case fSeq:
		return hSeq
	case fElem:
		return hElem
	case fElemEnd:
		return hElemEnd
	case fEnd:
		return hEnd
	}
	return hSlow // fSlowDecimal, fSlowBytes
}

// The pieces of the assembly loop, declared for go vet's asmdecl check.
// None is called from Go: asmLoop jumps to them through fop.h, and they
// to each other, all in asmLoop's frame.
func asmExit(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmSlow0(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmSlow1(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmSlow(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmEnd(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmEnsure(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmStoreG(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmIntU(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmIntUN(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmIntG(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmConst(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmConstG(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmDefaultU(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmDefaultUN(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmDefaultG(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmCopyU(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmCopyUN(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmCopyG(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmIncrementU(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmIncrementG(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmDeltaInt32(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmDeltaInt32N(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmDeltaInt64(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmDeltaInt64N(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmDeltaUint32(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmDeltaUint32N(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmDeltaUint64(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmDeltaUint64N(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmDeltaMant(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmDefaultExp(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmDefaultExpN(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmDeltaG(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmASCII(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmASCIIDefault(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmASCIICopy(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmBytesConst(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmGroup(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmGroupEnd(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmSeq(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmElem(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
func asmElemEnd(d *Decoder, b []byte, st *fastState, ft *fop, m *Message) int
