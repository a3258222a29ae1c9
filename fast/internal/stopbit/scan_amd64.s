#include "textflag.h"

// Offsets of the arrays of Tokens (MaxTokens 512).
#define VALUE 0
#define END 4096
#define LEN 6144
#define RAW 6656

// Constants of the second pass, one per 32-byte row: lens over 8, the
// bytes of four dword lens gathered into the low dword, the 7-bit group
// mask, the multipliers joining byte pairs (the lower byte the
// more significant group: 128, 1) and word pairs (16384, 1), 1<<28 (in
// each qword's low dword) joining the two 28-bit halves, and 7 (in each
// qword's low dword) for a token's bit count.
DATA pass2<>+0(SB)/8, $0x0000000800000008
DATA pass2<>+8(SB)/8, $0x0000000800000008
DATA pass2<>+16(SB)/8, $0x0000000800000008
DATA pass2<>+24(SB)/8, $0x0000000800000008
DATA pass2<>+32(SB)/8, $0x808080800c080400
DATA pass2<>+40(SB)/8, $0x8080808080808080
DATA pass2<>+48(SB)/8, $0x808080800c080400
DATA pass2<>+56(SB)/8, $0x8080808080808080
DATA pass2<>+64(SB)/8, $0x7f7f7f7f7f7f7f7f
DATA pass2<>+72(SB)/8, $0x7f7f7f7f7f7f7f7f
DATA pass2<>+80(SB)/8, $0x7f7f7f7f7f7f7f7f
DATA pass2<>+88(SB)/8, $0x7f7f7f7f7f7f7f7f
DATA pass2<>+96(SB)/8, $0x0180018001800180
DATA pass2<>+104(SB)/8, $0x0180018001800180
DATA pass2<>+112(SB)/8, $0x0180018001800180
DATA pass2<>+120(SB)/8, $0x0180018001800180
DATA pass2<>+128(SB)/8, $0x0001400000014000
DATA pass2<>+136(SB)/8, $0x0001400000014000
DATA pass2<>+144(SB)/8, $0x0001400000014000
DATA pass2<>+152(SB)/8, $0x0001400000014000
DATA pass2<>+160(SB)/8, $0x10000000
DATA pass2<>+168(SB)/8, $0x10000000
DATA pass2<>+176(SB)/8, $0x10000000
DATA pass2<>+184(SB)/8, $0x10000000
DATA pass2<>+192(SB)/8, $7
DATA pass2<>+200(SB)/8, $7
DATA pass2<>+208(SB)/8, $7
DATA pass2<>+216(SB)/8, $7
GLOBL pass2<>(SB), RODATA|NOPTR, $224

// GROUP_LENS loads the ends of the four tokens from R12 on (and the end
// before them) and sets X3 to their lengths; it jumps to LONG when one is
// over 8 bytes.
#define GROUP_LENS(LONG) \
	VMOVDQU END(DI)(R12*4), X1; \
	VMOVDQU (END-4)(DI)(R12*4), X2; \
	VPSUBD X2, X1, X3; \
	VPCMPGTD X8, X3, X4; \
	VPMOVMSKB X4, AX; \
	TESTL AX, AX; \
	JNZ LONG

// GROUP_VALUES stores the lengths and values of the four tokens from R12 on
// (lengths in X3) and moves R12 past them.
#define GROUP_VALUES \
	VPSHUFB X9, X3, X5; \
	VMOVD X5, LEN(DI)(R12*1); \
	VPMOVZXDQ X3, Y6; \
	VPMULUDQ Y15, Y6, Y6; \
	VPSLLVQ Y6, Y10, Y6; \
	VMOVDQU RAW(DI)(R12*8), Y0; \
	VPAND Y11, Y0, Y0; \
	VPMADDUBSW Y0, Y12, Y0; \
	VPMADDWD Y13, Y0, Y0; \
	VPSRLQ $32, Y0, Y1; \
	VPMULUDQ Y14, Y0, Y0; \
	VPADDQ Y1, Y0, Y0; \
	VPANDN Y0, Y6, Y0; \
	VMOVDQU Y0, VALUE(DI)(R12*8); \
	ADDQ $4, R12

// GROUP is one group of the second pass, LONG where a long token ends it.
#define GROUP(LONG) GROUP_LENS(LONG); GROUP_VALUES

// func scanAVX2(b *byte, n, off int, t *Tokens) (count int, full bool)
//
// Scan's kernel; n >= 64 and 0 <= off < n. Two passes, interleaved: after
// each block of the first, five groups of the second when 20 tokens wait
// for it (nearly always), so that its vector work runs beside the next
// block's scalar loop instead of after all of it; the groups left at the
// end run in a loop.
//
// The first finds the tokens: for each block of 64 bytes from off on (the
// last one read as the 64 bytes ending at n, its mask shifted down to the
// block), two VPMOVMSKB give the stop bits; each set bit e ends a token,
// whose end goes to End and the 8 bytes ending at e (its bytes on top, the
// stop byte highest) to Raw. A token ending in b[0:7] reads
// b[0:8] shifted up instead (a separate loop, run for the first block
// only), so no load leaves b[0:n]. Lengths are not looked at here.
//
// The second turns four tokens at a time into lengths and values with
// vector instructions: the lengths are the differences of the ends, the
// first over 8 bytes ends the batch (count), the 7-bit groups of all 8
// bytes of each word are joined by multiply-adds (VPMADDUBSW, VPMADDWD,
// VPMULUDQ) and the value is cut to the token's 7*len bits (VPANDN with
// ^0<<7len), which drops the earlier tokens' bytes. A group past count
// computes junk into entries past count, which Scan's contract allows.
// The end before the first token is stored just before End (in the last
// Value entry, written only by the last group), so that every group loads
// its previous ends one entry before its own.
// Zen 4 runs vector shifts and shuffles on two of its four vector pipes:
// the second pass is written to need few of them (two shuffles, two shifts
// a group). fast/DESIGN.md records the variants measured and dropped.
//
// A long token also ends the first pass, at the end of the block where its
// eighth byte without a stop bit is found (a test of the block's stop bits
// for 8 clear bits in a row, about 17 instructions a block): the work past
// a long token is bounded (a caller scanning again from after it, as the
// token path does, does not rescan the rest of b each time).
//
// Registers, first pass: SI b, DX n (or the end of the block where a long
// token was seen), BX block start, DI t, CX count, R8 the run check's
// mask, R9 the bytes at the end of the previous block without a stop bit,
// R10 the block's stop bits, R11 e, R13 the token's word, R14 scratch, R15
// the first block's stop bits in b[0:7]. Second pass: R12 the next group's
// first token (throughout), R8 full (0 or 1) once the first pass is done,
// AX and X0-X6 scratch, X8-X15 the constants.
TEXT ·scanAVX2(SB), NOSPLIT, $0-41
	MOVQ b+0(FP), SI
	MOVQ n+8(FP), DX
	MOVQ off+16(FP), BX
	MOVQ t+24(FP), DI
	XORQ CX, CX
	XORQ R9, R9
	XORQ R12, R12
	LEAQ -1(BX), AX
	MOVL AX, (END-4)(DI) // the end before the first token, for the first group
	MOVQ $0x01ffffffffffffff, R8
	LEAQ pass2<>(SB), AX
	VMOVDQU 0(AX), X8
	VMOVDQU 32(AX), X9
	VPCMPEQD Y10, Y10, Y10
	VMOVDQU 64(AX), Y11
	VMOVDQU 96(AX), Y12
	VMOVDQU 128(AX), Y13
	VMOVDQU 160(AX), Y14
	VMOVDQU 192(AX), Y15

block:
	CMPQ CX, $(512-64)
	JA full
	LEAQ 64(BX), AX
	CMPQ AX, DX
	JA last
	VMOVDQU (SI)(BX*1), Y0
	VMOVDQU 32(SI)(BX*1), Y1
	VPMOVMSKB Y0, R10
	VPMOVMSKB Y1, R14
	SHLQ $32, R14
	ORQ R14, R10
	MOVQ R10, R14

bits:
	// A token over 8 bytes has 8 bytes without a stop bit in a row (so
	// has an unfinished one at the end of b): the scan ends after this
	// block (DX moved to its end), so that a long token costs at most a
	// block of work past it. R14 holds the block's stop bits (bytes past n
	// set), R9 how many bytes end the previous block without one, R8 the
	// bits where a run of 8 starts inside the block.
	TZCNTQ R14, AX
	ADDQ R9, AX
	CMPQ AX, $8
	JAE runFound
	LZCNTQ R14, R9
	RORXQ $1, R14, AX
	ORQ R14, AX
	RORXQ $2, AX, R13
	ORQ R13, AX
	RORXQ $4, AX, R13
	ORQ R13, AX
	ANDNQ R8, AX, AX
	JNZ runFound

runChecked:
	CMPQ BX, $7
	JB front

tokens:
	TESTQ R10, R10
	JZ groups

token:
	TZCNTQ R10, R11
	ADDQ BX, R11
	MOVQ -7(SI)(R11*1), R13
	MOVQ R13, RAW(DI)(CX*8)
	MOVL R11, END(DI)(CX*4)
	INCQ CX
	BLSRQ R10, R10
	JNZ token

groups:
	// Five groups of the second pass for the tokens found so far when 20
	// wait (nearly always: a block holds about 20 or more), so that its
	// vector work runs beside the next block's scalar work.
	LEAQ 20(R12), AX
	CMPQ AX, CX
	JA nextblock
	GROUP(longInterleaved)
	GROUP(longInterleaved)
	GROUP(longInterleaved)
	GROUP(longInterleaved)
	GROUP(longInterleaved)

nextblock:
	ADDQ $64, BX
	CMPQ BX, DX
	JB block
	JMP end

	// A token over 8 bytes in a group of the first pass's loop (all of its
	// lanes are tokens found): the batch ends before it; the group is
	// done by the loop below.
longInterleaved:
	TZCNTL AX, AX
	SHRL $2, AX
	ADDQ R12, AX
	MOVQ AX, CX
	XORQ R8, R8
	JMP values

last:
	VMOVDQU -64(SI)(DX*1), Y0
	VMOVDQU -32(SI)(DX*1), Y1
	VPMOVMSKB Y0, R10
	VPMOVMSKB Y1, R14
	SHLQ $32, R14
	ORQ R14, R10
	MOVQ DX, AX
	SUBQ BX, AX
	MOVQ $64, R14
	SUBQ AX, R14
	SHRXQ R14, R10, R10
	MOVQ $-1, R14 // the bytes past n count as stops in the run check
	SHLXQ AX, R14, R14
	ORQ R10, R14
	JMP bits

runFound:
	LEAQ 64(BX), DX
	JMP runChecked

	// The first block when it starts below b[7]: the tokens ending in
	// b[0:7] (bits 0 to 6-BX of R10, moved to R15) read b[0:8] shifted up
	// so that their stop byte is on top; the rest go to the loop above.
front:
	MOVQ $7, R14
	SUBQ BX, R14
	MOVQ $1, R15
	SHLXQ R14, R15, R15
	DECQ R15
	ANDQ R10, R15
	XORQ R15, R10

frontToken:
	TESTQ R15, R15
	JZ tokens
	TZCNTQ R15, R11
	BLSRQ R15, R15
	ADDQ BX, R11
	MOVQ (SI), R13
	MOVQ $7, R14
	SUBQ R11, R14
	SHLQ $3, R14
	SHLXQ R14, R13, R13
	MOVQ R13, RAW(DI)(CX*8)
	MOVL R11, END(DI)(CX*4)
	INCQ CX
	JMP frontToken

full:
	MOVQ $1, R8
	JMP values

end:
	XORQ R8, R8

values:
	// The groups left (those of the last blocks).
	CMPQ R12, CX
	JAE done

group:
	GROUP_LENS(long)

values4:
	GROUP_VALUES
	CMPQ R12, CX
	JB group

done:
	VZEROUPPER
	MOVQ CX, count+32(FP)
	MOVB R8, full+40(FP)
	RET

	// A token over 8 bytes in this group: if it is one of the count
	// tokens found, the batch ends before it (and not for room).
long:
	TZCNTL AX, AX
	SHRL $2, AX
	ADDQ R12, AX
	CMPQ AX, CX
	JAE values4
	MOVQ AX, CX
	XORQ R8, R8
	JMP values4
