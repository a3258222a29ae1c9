#include "textflag.h"

// func onesSumAVX2(p *byte, n int) uint16
//
// Returns the ones' complement sum of the little-endian 16-bit words of
// p[0:n] (a last odd byte is the low byte of a word), folded to 16 bits;
// n is at least 32.
//
// Flipping the top bit of every word (VPXOR with 0x8000, folded into the
// load) turns an unsigned word u into the signed word u - 32768, which
// VPMADDWD with a multiplier of 1 adds pairwise into signed 32-bit lanes:
// three instructions per 32 bytes, the load included. Every word
// processed, including the ones masked off the last load, is then short by
// exactly 32768, 2^19 per 32-byte vector, which is added back at the end of
// each block. Four independent accumulators over 128 bytes per iteration
// keep the loop off the latency of VPMADDWD and the adds. Blocks of 64 KiB
// (the last one up to 64 KiB + 31 bytes: at most 2049 vectors of eight
// lanes, each pair sum at most 65536 in absolute value) keep every lane and
// the sum of all lanes within 2^31; the blocks' sums add up in 64 bits.
TEXT ·onesSumAVX2(SB), NOSPLIT, $0-18
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), BX // bytes left for the blocks
	XORQ R9, R9      // sum of the blocks
	TESTQ $1, BX
	JZ even
	MOVBQZX -1(SI)(BX*1), R9
	DECQ BX

even:
	VPCMPEQW Y13, Y13, Y13
	VPSRLW $15, Y13, Y12 // 0x0001 words
	VPSLLW $15, Y13, Y13 // 0x8000 words

block:
	MOVQ BX, CX
	CMPQ BX, $(65536+32)
	JB lastblock
	MOVQ $65536, CX

lastblock:
	SUBQ CX, BX
	LEAQ 31(CX), R8
	SHRQ $5, R8 // 32-byte vectors in this block
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	SUBQ $128, CX
	JB tail

loop:
	VPXOR 0(SI), Y13, Y8
	VPXOR 32(SI), Y13, Y9
	VPXOR 64(SI), Y13, Y10
	VPXOR 96(SI), Y13, Y11
	VPMADDWD Y12, Y8, Y8
	VPMADDWD Y12, Y9, Y9
	VPMADDWD Y12, Y10, Y10
	VPMADDWD Y12, Y11, Y11
	VPADDD Y8, Y0, Y0
	VPADDD Y9, Y1, Y1
	VPADDD Y10, Y2, Y2
	VPADDD Y11, Y3, Y3
	ADDQ $128, SI
	SUBQ $128, CX
	JAE loop

tail:
	ADDQ $128, CX
	CMPQ CX, $64
	JB tail32
	VPXOR 0(SI), Y13, Y8
	VPXOR 32(SI), Y13, Y9
	VPMADDWD Y12, Y8, Y8
	VPMADDWD Y12, Y9, Y9
	VPADDD Y8, Y0, Y0
	VPADDD Y9, Y1, Y1
	ADDQ $64, SI
	SUBQ $64, CX

tail32:
	CMPQ CX, $32
	JB last
	VPXOR 0(SI), Y13, Y8
	VPMADDWD Y12, Y8, Y8
	VPADDD Y8, Y2, Y2
	ADDQ $32, SI
	SUBQ $32, CX

last:
	// The last CX bytes (even, below 32, only in the last block): load
	// the 32 bytes ending with them, which a block of at least 32 bytes
	// puts inside p[0:n] at an even offset, and keep only those CX bytes.
	TESTQ CX, CX
	JZ done
	VMOVDQU -32(SI)(CX*1), Y8
	LEAQ tailMask<>(SB), DX
	VPAND 0(DX)(CX*1), Y8, Y8
	VPXOR Y13, Y8, Y8
	VPMADDWD Y12, Y8, Y8
	VPADDD Y8, Y3, Y3

done:
	VPADDD Y1, Y0, Y0
	VPADDD Y3, Y2, Y2
	VPADDD Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD X1, X0, X0
	VPSHUFD $0x4e, X0, X1
	VPADDD X1, X0, X0
	VPSHUFD $0xb1, X0, X1
	VPADDD X1, X0, X0
	VMOVD X0, AX
	// Add back 32768 per word processed: the block's exact sum.
	MOVLQSX AX, AX
	SHLQ $19, R8
	ADDQ R8, AX
	ADDQ AX, R9
	TESTQ BX, BX
	JNZ block
	VZEROUPPER
	// Fold the 64-bit sum to 16 bits, each time adding the carry back in.
	MOVQ R9, AX
	SHRQ $32, AX
	ADDL R9, AX
	ADCL $0, AX
	MOVL AX, DX
	SHRL $16, DX
	ADDW DX, AX
	ADCW $0, AX
	MOVW AX, ret+16(FP)
	RET

// tailMask+k, k in [0, 32], is 32 bytes of which the last k are 0xff.
DATA tailMask<>+0(SB)/8, $0
DATA tailMask<>+8(SB)/8, $0
DATA tailMask<>+16(SB)/8, $0
DATA tailMask<>+24(SB)/8, $0
DATA tailMask<>+32(SB)/8, $0xffffffffffffffff
DATA tailMask<>+40(SB)/8, $0xffffffffffffffff
DATA tailMask<>+48(SB)/8, $0xffffffffffffffff
DATA tailMask<>+56(SB)/8, $0xffffffffffffffff
GLOBL tailMask<>(SB), RODATA|NOPTR, $64
