#include "textflag.h"

// func onesSumAVX2(p *byte, n int) uint16
//
// Returns the ones' complement sum of the little-endian 16-bit words of
// p[0:n], folded to 16 bits, n even, at least 32 and at most 64 KiB + 32:
// the sum of all the words then stays below 2^32, so every lane and the
// final sum of lanes can stay 32 bits wide.
//
// Each 32-bit lane x = hi<<16 | lo is added whole to one accumulator (A,
// wrapping) and its high word to another (B). The lane's exact lo sum is
// then A - B<<16 mod 2^32, so three vector operations per 32 bytes (add,
// shift, add) take the place of the four a mask-and-shift split needs. Four
// independent pairs of accumulators over 128 bytes per iteration keep the
// loop off the adds' latency and the loop counter's overhead.
TEXT ·onesSumAVX2(SB), NOSPLIT, $0-18
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	VPXOR Y0, Y0, Y0 // A accumulators: Y0 Y2 Y4 Y6
	VPXOR Y1, Y1, Y1 // B accumulators: Y1 Y3 Y5 Y7
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	SUBQ $128, CX
	JB tail

loop:
	VMOVDQU 0(SI), Y8
	VMOVDQU 32(SI), Y9
	VMOVDQU 64(SI), Y10
	VMOVDQU 96(SI), Y11
	VPADDD Y8, Y0, Y0
	VPSRLD $16, Y8, Y8
	VPADDD Y9, Y2, Y2
	VPSRLD $16, Y9, Y9
	VPADDD Y10, Y4, Y4
	VPSRLD $16, Y10, Y10
	VPADDD Y11, Y6, Y6
	VPSRLD $16, Y11, Y11
	VPADDD Y8, Y1, Y1
	VPADDD Y9, Y3, Y3
	VPADDD Y10, Y5, Y5
	VPADDD Y11, Y7, Y7
	ADDQ $128, SI
	SUBQ $128, CX
	JAE loop

tail:
	// CX+128 bytes (0 to 127) remain.
	ADDQ $128, CX
	CMPQ CX, $64
	JB tail32
	VMOVDQU 0(SI), Y8
	VMOVDQU 32(SI), Y9
	VPADDD Y8, Y0, Y0
	VPSRLD $16, Y8, Y8
	VPADDD Y9, Y2, Y2
	VPSRLD $16, Y9, Y9
	VPADDD Y8, Y1, Y1
	VPADDD Y9, Y3, Y3
	ADDQ $64, SI
	SUBQ $64, CX

tail32:
	CMPQ CX, $32
	JB last
	VMOVDQU 0(SI), Y8
	VPADDD Y8, Y4, Y4
	VPSRLD $16, Y8, Y8
	VPADDD Y8, Y5, Y5
	ADDQ $32, SI
	SUBQ $32, CX

last:
	// The last CX bytes (even, below 32): load the 32 bytes ending with
	// them, which n >= 32 puts inside p[0:n] at an even offset, and keep
	// only those CX bytes.
	TESTQ CX, CX
	JZ done
	VMOVDQU -32(SI)(CX*1), Y8
	LEAQ tailMask<>(SB), DX
	VPAND 0(DX)(CX*1), Y8, Y8
	VPADDD Y8, Y6, Y6
	VPSRLD $16, Y8, Y8
	VPADDD Y8, Y7, Y7

done:
	VPADDD Y2, Y0, Y0
	VPADDD Y6, Y4, Y4
	VPADDD Y4, Y0, Y0 // A
	VPADDD Y3, Y1, Y1
	VPADDD Y7, Y5, Y5
	VPADDD Y5, Y1, Y1 // B: the hi sums
	VPSLLD $16, Y1, Y2
	VPSUBD Y2, Y0, Y0 // A - B<<16: the lo sums
	VPADDD Y1, Y0, Y0 // lo + hi per lane
	VEXTRACTI128 $1, Y0, X1
	VPADDD X1, X0, X0
	VPSHUFD $0x4e, X0, X1
	VPADDD X1, X0, X0
	VPSHUFD $0xb1, X0, X1
	VPADDD X1, X0, X0
	VMOVD X0, AX
	VZEROUPPER
	// Fold the 32-bit sum to 16 bits: twice is enough below 2^32.
	MOVL AX, DX
	SHRL $16, DX
	ANDL $0xffff, AX
	ADDL DX, AX
	MOVL AX, DX
	SHRL $16, DX
	ADDL DX, AX
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
