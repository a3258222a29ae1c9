//go:build !purego

#include "go_asm.h"
#include "textflag.h"

// The assembly loop: see tape_asm_amd64.go. Every piece below is a
// separate TEXT symbol with asmLoop's frame ($0, the same arguments): the
// pieces jump to each other and never move SP, so the last one's RET
// returns from asmLoop, and the arguments are at the same FP offsets in
// all of them.
//
// Registers carried from one instruction to the next:
//	SI	the instruction (*fop)
//	DI	&b[0]
//	R8	len(b)-8, the last offset an 8-byte load may start at
//	R9	the offset in b
//	R10	the presence map, next bit on top
//	R11	&m.Values[n], where the next value goes
//	R12	(n+1)<<32: the next value's End, in the word it shares with Exp
//	R13	the *Decoder
//	R14	1<<32, what R12 grows by
//	R15	epoch<<2 | stateAssigned, the tag of an entry assigned this epoch
// AX, BX, CX and DX are scratch, and X0 to X2.
// In the integer code AX is the value, BX whether it is present (0 or 1),
// CX the offset past it.

// NONE is an empty macro argument.
#define NONE

// NEXT runs the next instruction.
#define NEXT \
	ADDQ $fop__size, SI; \
	JMP  fop_h(SI)

// ENTRY sets r to the instruction's dictionary entry.
#define ENTRY(r) \
	MOVLQSX fop_entry(SI), r; \
	ADDQ    Decoder_dict(R13), r

// JUMPTO sets SI to the instruction at the tape index in fop_jump(SI) plus k.
#define JUMPTO(k) \
	MOVLQSX fop_jump(SI), SI; \
	ADDQ    $k, SI; \
	IMULQ   $fop__size, SI; \
	ADDQ    ft+40(FP), SI

// READX decodes the stop-bit integer at R9 into AX (its 7k bits, the one-
// byte case taken out by ONE) and CX (the offset past it). A one-byte
// integer takes the short path; a longer one (readMulti) takes one 8-byte
// load, the bytes put in wire order (first byte on top), the stop bit found
// with BSR, the bytes past it shifted out and the 7-bit groups packed with
// PEXT. It stops the loop (asmSlow1) where fastLoop does: at the end of b,
// without a stop bit in 8 bytes, or past 4 bytes for a 32-bit integer.
// READX_TAIL has its out-of-line parts.
#define READX(ONE) \
	CMPQ  R9, R8; \
	JGT   readTail; \
	MOVQ  (DI)(R9*1), AX; \
readWord: \
	TESTB $0x80, AL; \
	JZ    readMulti; \
	ONE; \
	LEAQ  1(R9), CX; \
readDone: \

// ONEU and ONES take the value out of a one-byte integer, unsigned or
// signed.
#define ONEU ANDL $0x7f, AX
#define ONES SHLQ $57, AX; SARQ $57, AX

// READ is READX for unsigned integers, READS for signed ones (the value
// sign-extended).
#define READ READX(ONEU)
#define READS READX(ONES)

// READX_TAIL: more than 4 bytes need fWide; fewer than 8 bytes left in b
// are loaded from b's end (or byte by byte when b is shorter than 8). FIX
// sign-extends a longer signed integer (SIGNEXT) or is NONE.
#define READX_TAIL(FIX) \
readMulti: \
	BSWAPQ AX; \
	MOVQ  $0x8080808080808080, DX; \
	ANDQ  AX, DX; \
	JZ    toSlow1; \
	BSRQ  DX, CX; \
	CMPQ  CX, $31; \
	JLS   readLong; \
readShift: \
	SUBQ  $7, CX; \
	SHRXQ CX, AX, AX; \
	MOVQ  $0x7f7f7f7f7f7f7f7f, DX; \
	PEXTQ DX, AX, AX; \
	NEGQ  CX; \
	ADDQ  $64, CX; \
	SHRQ  $3, CX; \
	FIX; \
	ADDQ  R9, CX; \
	JMP   readDone; \
readLong: \
	TESTW $const_fWide, fop_flags(SI); \
	JZ    toSlow1; \
	JMP   readShift; \
readTail: \
	LEAQ  -7(R9), CX; \
	CMPQ  CX, R8; \
	JGT   toSlow1; \
	CMPQ  R8, $0; \
	JLT   readTiny; \
	MOVQ  (DI)(R8*1), AX; \
	MOVQ  R9, CX; \
	SUBQ  R8, CX; \
	SHLQ  $3, CX; \
	SHRXQ CX, AX, AX; \
	JMP   readWord; \
readTiny: \
	XORL  AX, AX; \
	LEAQ  8(R8), DX; \
readTinyLoop: \
	DECQ  DX; \
	SHLQ  $8, AX; \
	MOVBQZX (DI)(DX*1), CX; \
	ORQ   CX, AX; \
	CMPQ  DX, R9; \
	JGT   readTinyLoop; \
	JMP   readWord

#define READ_TAIL READX_TAIL(NONE)
#define READS_TAIL READX_TAIL(SIGNEXT)

// SIGNEXT sign-extends AX's 7k bits (CX is k).
#define SIGNEXT \
	LEAQ  (CX*8), DX; \
	SUBQ  CX, DX; \
	NEGQ  DX; \
	ADDQ  $64, DX; \
	SHLXQ DX, AX, AX; \
	SARXQ DX, AX, AX

// NULLABLE sets BX to whether the nullable AX is present and takes the
// null's place out of AX (non-negative values are one more on the wire).
#define NULLABLE \
	XORL  BX, BX; \
	XORL  DX, DX; \
	TESTQ AX, AX; \
	SETNE BL; \
	SETGT DL; \
	SUBQ  DX, AX

// READG is READ for any flags, into AX, BX and CX (the offset past it).
#define READG \
	READ; \
	TESTW $const_fSigned, fop_flags(SI); \
	JZ    readUnsigned; \
	MOVQ  CX, BX; \
	SUBQ  R9, BX; \
	LEAQ  (BX*8), DX; \
	SUBQ  BX, DX; \
	NEGQ  DX; \
	ADDQ  $64, DX; \
	SHLXQ DX, AX, AX; \
	SARXQ DX, AX, AX; \
readUnsigned: \
	MOVL  $1, BX; \
	TESTW $const_fNullable, fop_flags(SI); \
	JZ    readgDone; \
	NULLABLE; \
readgDone: \

// EXPCHECK stops the loop at a present decimal exponent outside -63..63.
#define EXPCHECK \
	TESTW $const_fExp, fop_flags(SI); \
	JZ    expOK; \
	TESTQ BX, BX; \
	JZ    expOK; \
	LEAQ  63(AX), DX; \
	CMPQ  DX, $126; \
	JHI   toSlow1; \
expOK: \

// SAVE records the entry at DX in the undo log unless it was this message
// (CX is lost); SAVE_TAIL is its out-of-line part.
#define SAVE \
	MOVL Decoder_gen(R13), CX; \
	CMPL CX, entry_gen(DX); \
	JNE  saveEntry; \
saved: \

#define SAVE_TAIL \
saveEntry: \
	MOVOU (DX), X0; \
	MOVQ  16(DX), X1; \
	MOVL  CX, entry_gen(DX); \
	MOVQ  (Decoder_undo+8)(R13), CX; \
	INCQ  (Decoder_undo+8)(R13); \
	SHLQ  $5, CX; \
	ADDQ  Decoder_undo(R13), CX; \
	MOVOU X0, undoRec_e(CX); \
	MOVQ  X1, (undoRec_e+16)(CX); \
	MOVSS fop_slot(SI), X2; \
	MOVSS X2, undoRec_slot(CX); \
	JMP   saved

// ASSIGN writes AX to the entry at DX as assigned this epoch.
#define ASSIGN \
	MOVQ AX, entry_u(DX); \
	MOVL $0, entry_exp(DX); \
	MOVL R15, entry_tag(DX)

// ASSIGNANY writes AX, or empty when BX is 0, to the entry at DX.
#define ASSIGNANY \
	TESTQ BX, BX; \
	JZ    assignEmpty; \
	ASSIGN; \
	JMP   assigned; \
assignEmpty: \
	LEAL  1(R15), CX; \
	MOVL  CX, entry_tag(DX); \
assigned: \

// STOREINT appends the integer value AX, present when BX is 1 (AX is 0
// when not: absent values read 0).
#define STOREINT \
	MOVQ  AX, 0(R11); \
	MOVQ  R12, 8(R11); \
	MOVQ  $0, 16(R11); \
	SHLQ  $40, BX; \
	ORQ   fop_tag(SI), BX; \
	MOVQ  BX, 24(R11); \
	ADDQ  $32, R11; \
	ADDQ  R14, R12

// STOREPRESENT appends the present integer value AX.
#define STOREPRESENT \
	MOVQ  AX, 0(R11); \
	MOVQ  R12, 8(R11); \
	MOVQ  $0, 16(R11); \
	MOVQ  fop_ptag(SI), BX; \
	MOVQ  BX, 24(R11); \
	ADDQ  $32, R11; \
	ADDQ  R14, R12

// STOREBYTES appends the string value whose off and n (high word) are in
// CX, present when BX is 1.
#define STOREBYTES \
	MOVQ  $0, 0(R11); \
	MOVQ  R12, 8(R11); \
	MOVQ  CX, 16(R11); \
	SHLQ  $40, BX; \
	ORQ   fop_tag(SI), BX; \
	MOVQ  BX, 24(R11); \
	ADDQ  $32, R11; \
	ADDQ  R14, R12

// STOREINITIAL appends the instruction's initial value, or absent.
#define STOREINITIAL \
	MOVQ  fop_init(SI), AX; \
	MOVQ  AX, 0(R11); \
	MOVQ  R12, 8(R11); \
	MOVQ  $0, 16(R11); \
	MOVQ  fop_dtag(SI), BX; \
	MOVQ  BX, 24(R11); \
	ADDQ  $32, R11; \
	ADDQ  R14, R12

// STOREBYTESINITIAL appends the instruction's initial string, or absent.
#define STOREBYTESINITIAL \
	MOVQ  $0, 0(R11); \
	MOVQ  R12, 8(R11); \
	MOVQ  fop_init(SI), AX; \
	MOVQ  AX, 16(R11); \
	MOVQ  fop_dtag(SI), BX; \
	MOVQ  BX, 24(R11); \
	ADDQ  $32, R11; \
	ADDQ  R14, R12

// STOREBYTESPRESENT appends the present string value whose off and n
// (high word) are in CX.
#define STOREBYTESPRESENT \
	MOVQ  $0, 0(R11); \
	MOVQ  R12, 8(R11); \
	MOVQ  CX, 16(R11); \
	MOVQ  fop_ptag(SI), BX; \
	MOVQ  BX, 24(R11); \
	ADDQ  $32, R11; \
	ADDQ  R14, R12

// HASINIT sets BX to 1 when the instruction has an initial value.
#define HASINIT \
	MOVWLZX fop_flags(SI), BX; \
	SHRL    $3, BX; \
	ANDL    $1, BX

// FRAME sets r to &d.frames[st.depth-1] (DX is lost).
#define FRAME(r) \
	MOVQ  st+32(FP), DX; \
	MOVQ  fastState_depth(DX), r; \
	DECQ  r; \
	IMULQ $frame__size, r; \
	ADDQ  Decoder_frames(R13), r

// VALUE sets r to &m.Values[i] for the int32 i at src.
#define VALUE(src, r) \
	MOVLQSX src, r; \
	SHLQ    $5, r; \
	MOVQ    m+48(FP), DX; \
	ADDQ    Message_Values(DX), r

// STUBS are the exits conditional jumps reach (they cannot name another
// TEXT symbol).
#define STUBS \
toSlow0: \
	JMP ·asmSlow0(SB); \
toSlow1: \
	JMP ·asmSlow1(SB); \
toSlow: \
	JMP ·asmSlow(SB)

TEXT ·asmLoop(SB), NOSPLIT, $0-64
	MOVQ  d+0(FP), R13
	MOVQ  b_base+8(FP), DI
	MOVQ  b_len+16(FP), R8
	SUBQ  $8, R8
	MOVQ  st+32(FP), AX
	MOVQ  fastState_off(AX), R9
	MOVQ  fastState_pm(AX), R10
	MOVQ  fastState_pc(AX), SI
	IMULQ $fop__size, SI
	ADDQ  ft+40(FP), SI
	MOVQ  m+48(FP), AX
	MOVQ  (Message_Values+8)(AX), R12
	MOVQ  R12, R11
	SHLQ  $5, R11
	ADDQ  Message_Values(AX), R11
	INCQ  R12
	SHLQ  $32, R12
	MOVQ  $0x100000000, R14
	MOVL  Decoder_epoch(R13), R15
	SHLL  $2, R15
	ORL   $const_stateAssigned, R15
	JMP   fop_h(SI)

// asmExit returns AX from asmLoop, leaving the state in st and m.Values.
TEXT ·asmExit(SB), NOSPLIT, $0-64
	MOVQ m+48(FP), BX
	SHRQ $32, R12
	DECQ R12
	MOVQ R12, (Message_Values+8)(BX)
	MOVQ st+32(FP), BX
	MOVQ R9, fastState_off(BX)
	MOVQ R10, fastState_pm(BX)
	SUBQ ft+40(FP), SI
	MOVQ SI, fastState_pc(BX)
	MOVQ AX, ret+56(FP)
	RET

// asmSlow0 stops at an instruction that took a 0 bit, if it takes one.
TEXT ·asmSlow0(SB), NOSPLIT, $0-64
	TESTW $const_fBit, fop_flags(SI)
	JZ    slow
	SHRQ  $1, R10
slow:
	MOVQ  $const_exitSlow, AX
	JMP   ·asmExit(SB)

// asmSlow1 stops at an instruction that took a 1 bit, if it takes one.
TEXT ·asmSlow1(SB), NOSPLIT, $0-64
	TESTW $const_fBit, fop_flags(SI)
	JZ    slow
	SHRQ  $1, R10
	BTSQ  $63, R10
slow:
	MOVQ  $const_exitSlow, AX
	JMP   ·asmExit(SB)

// asmSlow stops at an instruction slowOp runs.
TEXT ·asmSlow(SB), NOSPLIT, $0-64
	MOVQ $const_exitSlow, AX
	JMP  ·asmExit(SB)

// asmEnd stops at the end of the message.
TEXT ·asmEnd(SB), NOSPLIT, $0-64
	MOVQ $const_exitDone, AX
	JMP  ·asmExit(SB)

// asmEnsure ends a structural instruction: it goes on when m.Values has
// room for the values up to the next structural instruction and its own.
TEXT ·asmEnsure(SB), NOSPLIT, $0-64
	MOVQ    R12, AX
	SHRQ    $32, AX
	MOVLQSX (fop__size+fop_run)(SI), BX
	ADDQ    BX, AX
	MOVQ    m+48(FP), BX
	CMPQ    AX, (Message_Values+16)(BX)
	JGT     grow
	NEXT
grow:
	ADDQ $fop__size, SI
	MOVQ $const_exitGrow, AX
	JMP  ·asmExit(SB)

// asmStoreG appends an integer, exponent or mantissa as fastLoop's store
// does: AX the value, BX present, the offset already moved past it.
TEXT ·asmStoreG(SB), NOSPLIT, $0-64
	TESTW $(const_fExp|const_fMant), fop_flags(SI)
	JNZ   decimal
	STOREINT
	NEXT
decimal:
	TESTW $const_fExp, fop_flags(SI)
	JZ    mantissa
	TESTQ BX, BX
	JZ    noMantissa
	MOVQ  st+32(FP), DX
	MOVL  AX, fastState_exp(DX)
	NEXT
noMantissa:
	ADDQ  $fop__size, SI
	XORL  AX, AX
	XORL  BX, BX
	STOREINT
	NEXT
mantissa:
	MOVQ  st+32(FP), DX
	MOVL  fastState_exp(DX), DX
	MOVQ  BX, CX
	NEGQ  CX
	ANDQ  CX, AX
	ANDQ  CX, DX
	MOVQ  AX, 0(R11)
	ORQ   R12, DX
	MOVQ  DX, 8(R11)
	MOVQ  $0, 16(R11)
	SHLQ  $40, BX
	ORQ   fop_tag(SI), BX
	MOVQ  BX, 24(R11)
	ADDQ  $32, R11
	ADDQ  R14, R12
	NEXT

// Integers without operator.

TEXT ·asmIntU(SB), NOSPLIT, $0-64
	READ
	MOVQ CX, R9
	STOREPRESENT
	NEXT
	READ_TAIL
	STUBS

TEXT ·asmIntUN(SB), NOSPLIT, $0-64
	READ
	MOVQ CX, R9
	NULLABLE
	STOREINT
	NEXT
	READ_TAIL
	STUBS

TEXT ·asmIntG(SB), NOSPLIT, $0-64
	READG
	EXPCHECK
	MOVQ CX, R9
	JMP  ·asmStoreG(SB)
	READ_TAIL
	STUBS

// Constants.

TEXT ·asmConst(SB), NOSPLIT, $0-64
	MOVQ  fop_init(SI), AX
	MOVL  $1, BX
	TESTW $const_fOptional, fop_flags(SI)
	JZ    store
	XORL  BX, BX
	SHLQ  $1, R10
	SETCS BL
	MOVQ  BX, CX
	NEGQ  CX
	ANDQ  CX, AX
store:
	STOREINT
	NEXT

TEXT ·asmConstG(SB), NOSPLIT, $0-64
	MOVQ  fop_init(SI), AX
	MOVL  $1, BX
	TESTW $const_fOptional, fop_flags(SI)
	JZ    store
	XORL  BX, BX
	SHLQ  $1, R10
	SETCS BL
	MOVQ  BX, CX
	NEGQ  CX
	ANDQ  CX, AX
store:
	JMP   ·asmStoreG(SB)

// Defaults: the initial value (present when there is one) on a 0 bit.

TEXT ·asmDefaultU(SB), NOSPLIT, $0-64
	SHLQ $1, R10
	JCC  initial
	READ
	MOVQ CX, R9
	STOREPRESENT
	NEXT
initial:
	STOREINITIAL
	NEXT
	READ_TAIL
	STUBS

TEXT ·asmDefaultUN(SB), NOSPLIT, $0-64
	SHLQ $1, R10
	JCC  initial
	READ
	MOVQ CX, R9
	NULLABLE
	STOREINT
	NEXT
initial:
	STOREINITIAL
	NEXT
	READ_TAIL
	STUBS

TEXT ·asmDefaultG(SB), NOSPLIT, $0-64
	SHLQ $1, R10
	JCC  initial
	READG
	EXPCHECK
	MOVQ CX, R9
	JMP  ·asmStoreG(SB)
initial:
	MOVQ fop_init(SI), AX
	HASINIT
	JMP  ·asmStoreG(SB)
	READ_TAIL
	STUBS

// Copies: on a 0 bit the previous value (assigned), else the initial
// value (undefined, then assigned), else fastLoop's slow path.

// PREVIOUS is the 0-bit path of copy and increment up to an assigned
// entry's value in AX (DX the entry); it continues at write with the
// initial value of an undefined entry.
#define PREVIOUS \
	ENTRY(DX); \
	CMPL  entry_tag(DX), R15; \
	JNE   undefined; \
	MOVQ  entry_u(DX), AX

#define UNDEFINED \
undefined: \
	LEAL  1(R15), CX; \
	CMPL  entry_tag(DX), CX; \
	JEQ   toSlow0; \
	TESTW $const_fHasInit, fop_flags(SI); \
	JZ    toSlow0; \
	MOVQ  fop_init(SI), AX; \
	MOVL  $1, BX; \
	JMP   write

TEXT ·asmCopyU(SB), NOSPLIT, $0-64
	SHLQ $1, R10
	JCC  previous
	READ
	MOVQ CX, R9
	ENTRY(DX)
write:
	SAVE
	ASSIGN
store:
	STOREPRESENT
	NEXT
previous:
	PREVIOUS
	JMP store
	UNDEFINED
	READ_TAIL
	SAVE_TAIL
	STUBS

TEXT ·asmCopyUN(SB), NOSPLIT, $0-64
	SHLQ $1, R10
	JCC  previous
	READ
	MOVQ CX, R9
	NULLABLE
	ENTRY(DX)
write:
	SAVE
	ASSIGNANY
store:
	STOREINT
	NEXT
previous:
	PREVIOUS
	MOVL $1, BX
	JMP  store
	UNDEFINED
	READ_TAIL
	SAVE_TAIL
	STUBS

TEXT ·asmCopyG(SB), NOSPLIT, $0-64
	SHLQ $1, R10
	JCC  previous
	READG
	EXPCHECK
	MOVQ CX, R9
	ENTRY(DX)
write:
	SAVE
	ASSIGNANY
store:
	JMP  ·asmStoreG(SB)
previous:
	PREVIOUS
	MOVL $1, BX
	JMP  store
	UNDEFINED
	READ_TAIL
	SAVE_TAIL
	STUBS

// INCREMENT adds one to AX in the instruction's kind.
#define INCREMENT \
	CMPB  fop_kind(SI), $const_KindUint32; \
	JEQ   inc32; \
	CMPB  fop_kind(SI), $const_KindInt32; \
	JEQ   incInt32; \
	INCQ  AX; \
	JMP   incremented; \
incInt32: \
	INCL  AX; \
	MOVLQSX AX, AX; \
	JMP   incremented; \
inc32: \
	INCL  AX; \
incremented: \

TEXT ·asmIncrementU(SB), NOSPLIT, $0-64
	SHLQ $1, R10
	JCC  previous
	READ
	MOVQ CX, R9
	ENTRY(DX)
write:
	SAVE
	ASSIGN
	STOREPRESENT
	NEXT
previous:
	PREVIOUS
	INCREMENT
	JMP  write
	UNDEFINED
	READ_TAIL
	SAVE_TAIL
	STUBS

TEXT ·asmIncrementG(SB), NOSPLIT, $0-64
	SHLQ $1, R10
	JCC  previous
	READG
	EXPCHECK
	MOVQ CX, R9
	ENTRY(DX)
write:
	SAVE
	ASSIGNANY
	JMP  ·asmStoreG(SB)
previous:
	PREVIOUS
	INCREMENT
	MOVL $1, BX
	JMP  write
	UNDEFINED
	READ_TAIL
	SAVE_TAIL
	STUBS

// Deltas: the value is the previous one (or the initial value, or 0)
// plus the signed delta on the wire, in the field's kind.

// DELTA computes the present delta AX's result into BX (DX the entry),
// stopping the loop where fastLoop does; CX, the offset past the delta,
// is kept.
#define DELTA \
	ENTRY(DX); \
	MOVQ  fop_init(SI), BX; \
	CMPL  entry_tag(DX), R15; \
	JNE   deltaUnassigned; \
	MOVQ  entry_u(DX), BX; \
deltaBase: \
	CMPB  fop_kind(SI), $const_KindInt32; \
	JEQ   deltaSigned; \
	CMPB  fop_kind(SI), $const_KindInt64; \
	JEQ   deltaSigned; \
	TESTQ AX, AX; \
	JS    deltaNegative; \
	ADDQ  AX, BX; \
	JCS   toSlow1; \
deltaUnsigned: \
	CMPB  fop_kind(SI), $const_KindUint32; \
	JNE   deltaDone; \
	MOVQ  BX, AX; \
	SHRQ  $32, AX; \
	JNZ   toSlow1; \
	JMP   deltaDone; \
deltaNegative: \
	NEGQ  AX; \
	CMPQ  AX, BX; \
	JHI   toSlow1; \
	SUBQ  AX, BX; \
	JMP   deltaUnsigned; \
deltaUnassigned: \
	LEAL  1(R15), R15; \
	CMPL  entry_tag(DX), R15; \
	LEAL  -1(R15), R15; \
	JEQ   toSlow1; \
	JMP   deltaBase; \
deltaSigned: \
	ADDQ  AX, BX; \
	JOS   toSlow1; \
	CMPB  fop_kind(SI), $const_KindInt32; \
	JNE   deltaDone; \
	MOVLQSX BX, AX; \
	CMPQ  AX, BX; \
	JNE   toSlow1; \
deltaDone: \

// DELTABASE sets BX to the delta's base (DX the entry): the previous
// value, or the initial value (0 without one) when undefined; it stops the
// loop at an empty previous value. DELTAINT64, DELTAINT32, DELTAUINT64
// and DELTAUINT32 add the delta AX to it in their kind and stop the loop
// where the result is out of range.
#define DELTABASE \
	ENTRY(DX); \
	MOVQ  fop_init(SI), BX; \
	CMPL  entry_tag(DX), R15; \
	JNE   deltaUnassigned; \
	MOVQ  entry_u(DX), BX; \
deltaBase: \

#define DELTABASE_TAIL \
deltaUnassigned: \
	LEAL  1(R15), R15; \
	CMPL  entry_tag(DX), R15; \
	LEAL  -1(R15), R15; \
	JEQ   toSlow1; \
	JMP   deltaBase

#define DELTAINT64 \
	ADDQ  AX, BX; \
	JOS   toSlow1

#define DELTAINT32 \
	ADDQ  AX, BX; \
	JOS   toSlow1; \
	MOVLQSX BX, AX; \
	CMPQ  AX, BX; \
	JNE   toSlow1

#define DELTAUINT64 \
	TESTQ AX, AX; \
	JS    deltaNegative; \
	ADDQ  AX, BX; \
	JCS   toSlow1; \
	JMP   deltaDone; \
deltaNegative: \
	NEGQ  AX; \
	CMPQ  AX, BX; \
	JHI   toSlow1; \
	SUBQ  AX, BX; \
deltaDone: \

// The base of a uint32 delta can be any 64-bit value (integers of every
// kind share a key's entry): the sum can carry, and a difference can be
// out of range too.
#define DELTAUINT32 \
	TESTQ AX, AX; \
	JS    deltaNegative; \
	ADDQ  AX, BX; \
	JCS   toSlow1; \
	JMP   deltaDone; \
deltaNegative: \
	NEGQ  AX; \
	CMPQ  AX, BX; \
	JHI   toSlow1; \
	SUBQ  AX, BX; \
deltaDone: \
	MOVQ  BX, AX; \
	SHRQ  $32, AX; \
	JNZ   toSlow1

// DELTAHANDLER is the code of a delta integer that is not part of a
// decimal: NULL is NULLABLE or nothing, KIND one of the DELTAINT macros.
#define DELTAHANDLER(NULL, KIND) \
	READS; \
	MOVL  $1, BX; \
	NULL; \
	TESTQ BX, BX; \
	JZ    absent; \
	DELTABASE; \
	KIND; \
	MOVQ  CX, R9; \
	MOVQ  BX, AX; \
	SAVE; \
	ASSIGN; \
	STOREPRESENT; \
	NEXT; \
absent: \
	MOVQ  CX, R9; \
	STOREINT; \
	NEXT; \
	DELTABASE_TAIL; \
	READS_TAIL; \
	SAVE_TAIL; \
	STUBS

TEXT ·asmDeltaInt32(SB), NOSPLIT, $0-64
	DELTAHANDLER(NONE, DELTAINT32)

TEXT ·asmDeltaInt32N(SB), NOSPLIT, $0-64
	DELTAHANDLER(NULLABLE, DELTAINT32)

TEXT ·asmDeltaInt64(SB), NOSPLIT, $0-64
	DELTAHANDLER(NONE, DELTAINT64)

TEXT ·asmDeltaInt64N(SB), NOSPLIT, $0-64
	DELTAHANDLER(NULLABLE, DELTAINT64)

TEXT ·asmDeltaUint32(SB), NOSPLIT, $0-64
	DELTAHANDLER(NONE, DELTAUINT32)

TEXT ·asmDeltaUint32N(SB), NOSPLIT, $0-64
	DELTAHANDLER(NULLABLE, DELTAUINT32)

TEXT ·asmDeltaUint64(SB), NOSPLIT, $0-64
	DELTAHANDLER(NONE, DELTAUINT64)

TEXT ·asmDeltaUint64N(SB), NOSPLIT, $0-64
	DELTAHANDLER(NULLABLE, DELTAUINT64)

// asmDeltaMant is a mandatory int64 delta mantissa: its value takes the
// exponent before it.
TEXT ·asmDeltaMant(SB), NOSPLIT, $0-64
	READS
	DELTABASE
	DELTAINT64
	MOVQ  CX, R9
	MOVQ  BX, AX
	SAVE
	ASSIGN
	MOVQ  AX, 0(R11)
	MOVQ  st+32(FP), DX
	MOVL  fastState_exp(DX), DX
	ORQ   R12, DX
	MOVQ  DX, 8(R11)
	MOVQ  $0, 16(R11)
	MOVQ  fop_ptag(SI), BX
	MOVQ  BX, 24(R11)
	ADDQ  $32, R11
	ADDQ  R14, R12
	NEXT
	DELTABASE_TAIL
	READS_TAIL
	SAVE_TAIL
	STUBS

// DEFAULTEXP is the code of a signed decimal exponent with a default
// operator (PRESENT is NULLABLE or MOVL $1, BX): present, it waits in
// st.exp for the mantissa; absent, the decimal is.
#define DEFAULTEXP(PRESENT) \
	SHLQ  $1, R10; \
	JCC   initial; \
	READS; \
	PRESENT; \
	TESTQ BX, BX; \
	JZ    inRange; \
	LEAQ  63(AX), DX; \
	CMPQ  DX, $126; \
	JHI   toSlow1; \
inRange: \
	MOVQ  CX, R9; \
decide: \
	TESTQ BX, BX; \
	JZ    noMantissa; \
	MOVQ  st+32(FP), DX; \
	MOVL  AX, fastState_exp(DX); \
	NEXT; \
noMantissa: \
	ADDQ  $fop__size, SI; \
	XORL  AX, AX; \
	XORL  BX, BX; \
	STOREINT; \
	NEXT; \
initial: \
	MOVQ  fop_init(SI), AX; \
	HASINIT; \
	JMP   decide; \
	READS_TAIL; \
	STUBS

#define MANDATORY MOVL $1, BX

TEXT ·asmDefaultExp(SB), NOSPLIT, $0-64
	DEFAULTEXP(MANDATORY)

TEXT ·asmDefaultExpN(SB), NOSPLIT, $0-64
	DEFAULTEXP(NULLABLE)


TEXT ·asmDeltaG(SB), NOSPLIT, $0-64
	READG
	TESTQ BX, BX
	JZ    absent
	DELTA
	TESTW $const_fExp, fop_flags(SI)
	JZ    expOK
	LEAQ  63(BX), AX
	CMPQ  AX, $126
	JHI   toSlow1
expOK:
	MOVQ  CX, R9
	MOVQ  BX, AX
	SAVE
	ASSIGN
	MOVL  $1, BX
	JMP   ·asmStoreG(SB)
absent:
	MOVQ  CX, R9
	JMP   ·asmStoreG(SB)
	READ_TAIL
	SAVE_TAIL
	STUBS

// Ascii strings: one character in the stream, appended to m's arena.

// CHAR checks the one-character string at R9 and the arena's room for it,
// leaving the character in AX; CX and DX are lost.
#define CHAR \
	LEAQ    -7(R9), CX; \
	CMPQ    CX, R8; \
	JGT     toSlow1; \
	MOVBLZX (DI)(R9*1), AX; \
	CMPL    AX, $0x80; \
	JLS     toSlow1; \
	MOVQ    m+48(FP), DX; \
	MOVQ    (Message_arena+8)(DX), CX; \
	CMPQ    CX, (Message_arena+16)(DX); \
	JGE     toSlow1; \
	CMPQ    CX, (Decoder_limits+Limits_MaxMessageBytes)(R13); \
	JGE     toSlow1; \
	ANDL    $0x7f, AX

// APPENDCHAR appends AX to the arena and sets CX to its off and n;
// APPENDCHARDX is APPENDCHAR with DX already m and CX len(m.arena).
#define APPENDCHAR \
	MOVQ  m+48(FP), DX; \
	MOVQ  (Message_arena+8)(DX), CX; \
	APPENDCHARDX

#define APPENDCHARDX \
	MOVQ  Message_arena(DX), BX; \
	MOVB  AX, (BX)(CX*1); \
	LEAQ  1(CX), BX; \
	MOVQ  BX, (Message_arena+8)(DX); \
	BTSQ  $32, CX

TEXT ·asmASCII(SB), NOSPLIT, $0-64
	CHAR
	INCQ  R9
	APPENDCHARDX
	STOREBYTESPRESENT
	NEXT
	STUBS

TEXT ·asmASCIIDefault(SB), NOSPLIT, $0-64
	SHLQ  $1, R10
	JCC   initial
	CHAR
	INCQ  R9
	APPENDCHARDX
	STOREBYTESPRESENT
	NEXT
initial:
	STOREBYTESINITIAL
	NEXT
	STUBS

// EBYTES sets CX to &d.dictBytes[slot].buf[cur], the value's slice (BX is
// lost).
#define EBYTES \
	MOVLQSX fop_slot(SI), CX; \
	IMULQ $entryBytes__size, CX; \
	ADDQ  Decoder_dictBytes(R13), CX; \
	MOVQ  entryBytes_cur(CX), BX; \
	ANDL  $1, BX; \
	LEAQ  (BX)(BX*2), BX; \
	LEAQ  entryBytes_buf(CX)(BX*8), CX

TEXT ·asmASCIICopy(SB), NOSPLIT, $0-64
	SHLQ  $1, R10
	JCC   previous
	CHAR
	ENTRY(DX)
	MOVL  Decoder_gen(R13), BX
	CMPL  BX, entry_gen(DX)
	JNE   save
saved:
	EBYTES
	CMPQ  16(CX), $0
	JEQ   toSlow1
	MOVQ  $1, 8(CX)
	MOVQ  (CX), CX
	MOVB  AX, (CX)
	MOVL  R15, entry_tag(DX)
	INCQ  R9
	APPENDCHAR
	STOREBYTESPRESENT
	NEXT
save: // as SAVE_TAIL (BX the generation), then the entry's bytes flip
	MOVOU (DX), X0
	MOVQ  16(DX), X1
	MOVL  BX, entry_gen(DX)
	MOVQ  (Decoder_undo+8)(R13), BX
	INCQ  (Decoder_undo+8)(R13)
	SHLQ  $5, BX
	ADDQ  Decoder_undo(R13), BX
	MOVOU X0, undoRec_e(BX)
	MOVQ  X1, (undoRec_e+16)(BX)
	MOVSS fop_slot(SI), X2
	MOVSS X2, undoRec_slot(BX)
	MOVLQSX fop_slot(SI), CX
	IMULQ $entryBytes__size, CX
	ADDQ  Decoder_dictBytes(R13), CX
	XORQ  $1, entryBytes_cur(CX)
	MOVQ  entryBytes_cur(CX), BX
	ANDL  $1, BX
	LEAQ  (BX)(BX*2), BX
	MOVQ  $0, (entryBytes_buf+8)(CX)(BX*8)
	JMP   saved
previous:
	ENTRY(DX)
	CMPL  entry_tag(DX), R15
	JNE   toSlow0
	EBYTES
	CMPQ  8(CX), $1
	JNE   toSlow0
	MOVQ  (CX), CX
	MOVBLZX (CX), AX
	MOVQ  m+48(FP), DX
	MOVQ  (Message_arena+8)(DX), CX
	CMPQ  CX, (Message_arena+16)(DX)
	JGE   toSlow0
	CMPQ  CX, (Decoder_limits+Limits_MaxMessageBytes)(R13)
	JGE   toSlow0
	APPENDCHARDX
	STOREBYTESPRESENT
	NEXT
	STUBS

TEXT ·asmBytesConst(SB), NOSPLIT, $0-64
	MOVQ  fop_init(SI), CX
	MOVL  $1, BX
	TESTW $const_fOptional, fop_flags(SI)
	JZ    store
	XORL  BX, BX
	SHLQ  $1, R10
	SETCS BL
	MOVQ  BX, AX
	NEGQ  AX
	ANDQ  AX, CX
store:
	STOREBYTES
	NEXT

// Groups, sequences and their ends.

TEXT ·asmGroup(SB), NOSPLIT, $0-64
	MOVL  $1, BX
	TESTW $const_fOptional, fop_flags(SI)
	JZ    peeked
	MOVQ  R10, BX
	SHRQ  $63, BX
peeked:
	XORL  AX, AX // the group's presence map
	XORL  CX, CX // its length
	TESTQ BX, BX
	JZ    checked
	MOVQ  st+32(FP), DX
	MOVQ  fastState_depth(DX), DX
	CMPQ  DX, (Decoder_limits+Limits_MaxDepth)(R13)
	JGE   toSlow
	TESTW $const_fNeedPMap, fop_flags(SI)
	JZ    checked
	LEAQ  -7(R9), CX
	CMPQ  CX, R8
	JGT   toSlow
	MOVBQZX (DI)(R9*1), AX
	MOVL  $1, CX
	TESTB $0x80, AL
	JNZ   onePMapByte
	LEAQ  -6(R9), DX
	CMPQ  DX, R8
	JGT   toSlow
	MOVBQZX 1(DI)(R9*1), DX
	TESTB $0x80, DL
	JZ    toSlow
	CMPQ  (Decoder_limits+Limits_MaxPMapBytes)(R13), $2
	JLT   toSlow
	ANDL  $0x7f, DX
	SHLQ  $50, DX
	SHLQ  $57, AX
	ORQ   DX, AX
	MOVL  $2, CX
	JMP   checked
onePMapByte:
	SHLQ  $57, AX
checked:
	TESTW $const_fOptional, fop_flags(SI)
	JZ    shifted
	SHLQ  $1, R10
shifted:
	MOVQ  $0, 0(R11)
	MOVQ  R12, 8(R11)
	MOVQ  $0, 16(R11)
	MOVQ  BX, DX
	SHLQ  $40, DX
	ORQ   fop_tag(SI), DX
	MOVQ  DX, 24(R11)
	ADDQ  $32, R11
	ADDQ  R14, R12
	TESTQ BX, BX
	JZ    absent
	ADDQ  CX, R9
	MOVQ  st+32(FP), DX
	INCQ  fastState_depth(DX)
	MOVQ  AX, X0
	FRAME(CX)
	MOVQ  R10, (frame_pm+PMap_hi)(CX)
	MOVQ  $0, (frame_pm+PMap_lo)(CX)
	MOVQ  R12, DX
	SHRQ  $32, DX
	SUBQ  $2, DX
	MOVL  DX, frame_vi(CX)
	MOVQ  X0, R10
	JMP   ·asmEnsure(SB)
absent:
	JUMPTO(-1)
	JMP   ·asmEnsure(SB)
	STUBS

TEXT ·asmGroupEnd(SB), NOSPLIT, $0-64
	FRAME(CX)
	VALUE(frame_vi(CX), AX)
	MOVQ  R12, DX
	SHRQ  $32, DX
	DECQ  DX
	MOVL  DX, Value_End(AX)
	MOVQ  (frame_pm+PMap_hi)(CX), R10
	MOVQ  st+32(FP), DX
	DECQ  fastState_depth(DX)
	JMP   ·asmEnsure(SB)

TEXT ·asmSeq(SB), NOSPLIT, $0-64
	TESTW $const_fLengthNone, fop_flags(SI)
	JZ    toSlow
	LEAQ  -7(R9), CX
	CMPQ  CX, R8
	JGT   toSlow
	MOVBQZX (DI)(R9*1), AX
	TESTB $0x80, AL
	JZ    toSlow
	ANDL  $0x7f, AX
	MOVL  $1, BX
	TESTW $const_fNullable, fop_flags(SI)
	JZ    counted
	NULLABLE
counted:
	TESTQ BX, BX // absent: nothing to check (empty counts against MaxDepth, as in run)
	JZ    checked
	CMPQ  AX, (Decoder_limits+Limits_MaxSequenceLen)(R13)
	JGT   toSlow
	MOVQ  st+32(FP), DX
	MOVQ  fastState_depth(DX), DX
	CMPQ  DX, (Decoder_limits+Limits_MaxDepth)(R13)
	JGE   toSlow
checked:
	INCQ  R9
	STOREINT
	TESTQ AX, AX
	JZ    skip
	MOVQ  st+32(FP), DX
	INCQ  fastState_depth(DX)
	FRAME(CX)
	MOVQ  R10, (frame_pm+PMap_hi)(CX)
	MOVQ  $0, (frame_pm+PMap_lo)(CX)
	MOVQ  R12, DX
	SHRQ  $32, DX
	SUBQ  $2, DX
	MOVL  DX, frame_vi(CX)
	MOVQ  AX, frame_left(CX)
	JMP   ·asmEnsure(SB)
skip:
	JUMPTO(-1)
	JMP   ·asmEnsure(SB)
	STUBS

TEXT ·asmElem(SB), NOSPLIT, $0-64
	MOVQ  R12, AX
	SHRQ  $32, AX
	CMPQ  AX, (Decoder_limits+Limits_MaxValues)(R13)
	JGT   stop
	XORL  AX, AX
	TESTW $const_fNeedPMap, fop_flags(SI)
	JZ    started
	LEAQ  -7(R9), CX
	CMPQ  CX, R8
	JGT   stop
	MOVBQZX (DI)(R9*1), AX
	TESTB $0x80, AL
	JZ    twoBytes
	SHLQ  $57, AX
	INCQ  R9
	JMP   started
twoBytes:
	LEAQ  -6(R9), CX
	CMPQ  CX, R8
	JGT   stop
	MOVBQZX 1(DI)(R9*1), DX
	TESTB $0x80, DL
	JZ    stop
	CMPQ  (Decoder_limits+Limits_MaxPMapBytes)(R13), $2
	JLT   stop
	ANDL  $0x7f, DX
	SHLQ  $50, DX
	SHLQ  $57, AX
	ORQ   DX, AX
	ADDQ  $2, R9
started:
	FRAME(CX)
	MOVQ  R12, DX
	SHRQ  $32, DX
	DECQ  DX
	MOVL  DX, frame_ei(CX)
	MOVQ  $0, 0(R11)
	MOVQ  $0, 8(R11)
	MOVQ  $0, 16(R11)
	MOVQ  fop_tag(SI), CX
	MOVQ  CX, 24(R11)
	ADDQ  $32, R11
	ADDQ  R14, R12
	MOVQ  AX, R10
	JMP   ·asmEnsure(SB)
stop:
	MOVQ  $const_exitElem, AX
	JMP   ·asmExit(SB)

TEXT ·asmElemEnd(SB), NOSPLIT, $0-64
	FRAME(CX)
	VALUE(frame_ei(CX), AX)
	MOVQ  R12, DX
	SHRQ  $32, DX
	DECQ  DX
	MOVL  DX, Value_End(AX)
	DECQ  frame_left(CX)
	JZ    done
	JUMPTO(0)
	JMP   ·asmElem(SB)
done:
	VALUE(frame_vi(CX), AX)
	MOVQ  R12, DX
	SHRQ  $32, DX
	DECQ  DX
	MOVL  DX, Value_End(AX)
	MOVQ  (frame_pm+PMap_hi)(CX), R10
	MOVQ  st+32(FP), DX
	DECQ  fastState_depth(DX)
	JMP   ·asmEnsure(SB)

#define HANDLER(name, i) \
	LEAQ name(SB), AX; \
	MOVQ AX, (i*8)(DI)

TEXT ·asmHandlers(SB), NOSPLIT, $0-8
	MOVQ t+0(FP), DI
	HANDLER(·asmSlow, const_hSlow)
	HANDLER(·asmEnd, const_hEnd)
	HANDLER(·asmGroup, const_hGroup)
	HANDLER(·asmGroupEnd, const_hGroupEnd)
	HANDLER(·asmSeq, const_hSeq)
	HANDLER(·asmElem, const_hElem)
	HANDLER(·asmElemEnd, const_hElemEnd)
	HANDLER(·asmIntU, const_hIntU)
	HANDLER(·asmIntUN, const_hIntUN)
	HANDLER(·asmIntG, const_hIntG)
	HANDLER(·asmConst, const_hConst)
	HANDLER(·asmConstG, const_hConstG)
	HANDLER(·asmDefaultU, const_hDefaultU)
	HANDLER(·asmDefaultUN, const_hDefaultUN)
	HANDLER(·asmDefaultG, const_hDefaultG)
	HANDLER(·asmCopyU, const_hCopyU)
	HANDLER(·asmCopyUN, const_hCopyUN)
	HANDLER(·asmCopyG, const_hCopyG)
	HANDLER(·asmIncrementU, const_hIncrementU)
	HANDLER(·asmIncrementG, const_hIncrementG)
	HANDLER(·asmDeltaInt32, const_hDeltaInt32)
	HANDLER(·asmDeltaInt32N, const_hDeltaInt32N)
	HANDLER(·asmDeltaInt64, const_hDeltaInt64)
	HANDLER(·asmDeltaInt64N, const_hDeltaInt64N)
	HANDLER(·asmDeltaUint32, const_hDeltaUint32)
	HANDLER(·asmDeltaUint32N, const_hDeltaUint32N)
	HANDLER(·asmDeltaUint64, const_hDeltaUint64)
	HANDLER(·asmDeltaUint64N, const_hDeltaUint64N)
	HANDLER(·asmDeltaMant, const_hDeltaMant)
	HANDLER(·asmDefaultExp, const_hDefaultExp)
	HANDLER(·asmDefaultExpN, const_hDefaultExpN)
	HANDLER(·asmDeltaG, const_hDeltaG)
	HANDLER(·asmASCII, const_hASCII)
	HANDLER(·asmASCIIDefault, const_hASCIIDefault)
	HANDLER(·asmASCIICopy, const_hASCIICopy)
	HANDLER(·asmBytesConst, const_hBytesConst)
	RET
