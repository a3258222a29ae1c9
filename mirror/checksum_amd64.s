#include "textflag.h"

// func onesSumAVX2(p *byte, n int, init uint64) uint16
//
// Returns the ones' complement sum of init and the little-endian 16-bit
// words of p[0:n] (a last odd byte is the low byte of a word), folded to 16
// bits; n is at least 32 and init below 2^48.
//
// Flipping the top bit of every word (VPXOR with 0x8000, folded into the
// load) turns an unsigned word u into the signed word u - 32768, which
// VPMADDWD with a multiplier of 1 adds pairwise into signed 32-bit lanes:
// three instructions per 32 bytes, the load included. Every word
// processed, including the ones masked off the first and last loads, is
// then short by exactly 32768, 2^19 per 32-byte vector, which is added back
// at the end of each block. Four independent accumulators keep the loop off
// the latency of VPMADDWD and the adds; 256 bytes per iteration (five for a
// 1448-byte segment) keep the loop's own instructions few.
//
// When p is even, a first masked load takes the bytes up to the next 32-byte
// boundary, so that no later load straddles two cache lines (each such load
// costs a second L1 access). Word boundaries stay where they are: the head is
// an even number of bytes.
//
// Blocks of 64 KiB (the last one up to 64 KiB + 31 bytes, plus the head in
// the first: at most 2050 vectors of eight lanes, each pair sum at most 65536
// in absolute value) keep every lane and the sum of all lanes within 2^31;
// the blocks' sums add up in 64 bits.
TEXT ·onesSumAVX2(SB), NOSPLIT, $0-26
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), BX // bytes left for the blocks
	MOVQ init+16(FP), R9 // sum of the blocks
	TESTQ $1, BX
	JZ even
	MOVBQZX -1(SI)(BX*1), AX
	ADDQ AX, R9
	DECQ BX

even:
	VPCMPEQW Y13, Y13, Y13
	VPSRLW $15, Y13, Y12 // 0x0001 words
	VPSLLW $15, Y13, Y13 // 0x8000 words
	LEAQ sumMask<>(SB), DX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3

	// The head, when p is even and not on a 32-byte boundary: the first
	// CX bytes (even, below 32) of the 32 at p, which n >= 32 puts inside
	// p[0:n]. Its correction goes straight into the total.
	MOVQ SI, CX
	NEGQ CX
	ANDQ $31, CX
	JZ block
	TESTQ $1, SI
	JNZ block
	VMOVDQU 0(SI), Y8
	MOVQ $64, AX
	SUBQ CX, AX
	VPAND 0(DX)(AX*1), Y8, Y8
	VPXOR Y13, Y8, Y8
	VPMADDWD Y12, Y8, Y3
	ADDQ $(1<<19), R9
	ADDQ CX, SI
	SUBQ CX, BX

block:
	MOVQ BX, CX
	CMPQ BX, $(65536+32)
	JB lastblock
	MOVQ $65536, CX

lastblock:
	SUBQ CX, BX
	LEAQ 31(CX), R8
	SHRQ $5, R8 // 32-byte vectors in this block
	SUBQ $256, CX
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
	VPXOR 128(SI), Y13, Y8
	VPXOR 160(SI), Y13, Y9
	VPXOR 192(SI), Y13, Y10
	VPXOR 224(SI), Y13, Y11
	VPMADDWD Y12, Y8, Y8
	VPMADDWD Y12, Y9, Y9
	VPMADDWD Y12, Y10, Y10
	VPMADDWD Y12, Y11, Y11
	VPADDD Y8, Y0, Y0
	VPADDD Y9, Y1, Y1
	VPADDD Y10, Y2, Y2
	VPADDD Y11, Y3, Y3
	ADDQ $256, SI
	SUBQ $256, CX
	JAE loop

tail:
	ADDQ $256, CX
	CMPQ CX, $128
	JB tail64
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

tail64:
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
	// the 32 bytes ending with them, which n >= 32 puts inside p[0:n] at
	// an even offset, and keep only those CX bytes.
	TESTQ CX, CX
	JZ blockdone
	VMOVDQU -32(SI)(CX*1), Y8
	VPAND 0(DX)(CX*1), Y8, Y8
	VPXOR Y13, Y8, Y8
	VPMADDWD Y12, Y8, Y8
	VPADDD Y8, Y3, Y3

blockdone:
	// Add back 32768 per word processed.
	SHLQ $19, R8
	ADDQ R8, R9

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
	MOVLQSX AX, AX
	ADDQ AX, R9
	TESTQ BX, BX
	JZ fold
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	JMP block

fold:
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
	MOVW AX, ret+24(FP)
	RET

// sumMask+k, k in [0, 32], is 32 bytes of which the last k are 0xff;
// sumMask+64-k, k in [0, 32], is 32 bytes of which the first k are 0xff.
DATA sumMask<>+0(SB)/8, $0
DATA sumMask<>+8(SB)/8, $0
DATA sumMask<>+16(SB)/8, $0
DATA sumMask<>+24(SB)/8, $0
DATA sumMask<>+32(SB)/8, $0xffffffffffffffff
DATA sumMask<>+40(SB)/8, $0xffffffffffffffff
DATA sumMask<>+48(SB)/8, $0xffffffffffffffff
DATA sumMask<>+56(SB)/8, $0xffffffffffffffff
DATA sumMask<>+64(SB)/8, $0
DATA sumMask<>+72(SB)/8, $0
DATA sumMask<>+80(SB)/8, $0
DATA sumMask<>+88(SB)/8, $0
GLOBL sumMask<>(SB), RODATA|NOPTR, $96

// func prefetchLines(p *byte, n int)
//
// Asks for the cache lines of p[0:n], without waiting for them: a load that
// misses would hold up retirement, a prefetch does not. From 1408 bytes on
// (a full-size segment and its headers) it asks for 23 lines from p's in a
// straight line, up to 1472 bytes: past that the hardware prefetcher has
// seen the stream, and prefetches never fault, so a line past the end of p
// costs only the bandwidth. Shorter frames take a loop.
TEXT ·prefetchLines(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), BX
	CMPQ BX, $1408
	JB pfsmall
	PREFETCHT0 0(SI)
	PREFETCHT0 64(SI)
	PREFETCHT0 128(SI)
	PREFETCHT0 192(SI)
	PREFETCHT0 256(SI)
	PREFETCHT0 320(SI)
	PREFETCHT0 384(SI)
	PREFETCHT0 448(SI)
	PREFETCHT0 512(SI)
	PREFETCHT0 576(SI)
	PREFETCHT0 640(SI)
	PREFETCHT0 704(SI)
	PREFETCHT0 768(SI)
	PREFETCHT0 832(SI)
	PREFETCHT0 896(SI)
	PREFETCHT0 960(SI)
	PREFETCHT0 1024(SI)
	PREFETCHT0 1088(SI)
	PREFETCHT0 1152(SI)
	PREFETCHT0 1216(SI)
	PREFETCHT0 1280(SI)
	PREFETCHT0 1344(SI)
	PREFETCHT0 1408(SI)
	RET

pfsmall:
	LEAQ 0(SI)(BX*1), BX

pfloop:
	PREFETCHT0 0(SI)
	ADDQ $64, SI
	CMPQ SI, BX
	JB pfloop
	RET
