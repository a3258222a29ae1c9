#include "textflag.h"

// tailMask is 32 zero bytes then 32 bytes of 0xff: the 32 bytes from
// tailMask+r keep the last r bytes of a 32-byte load and clear the rest.
DATA tailMask<>+0(SB)/8, $0
DATA tailMask<>+8(SB)/8, $0
DATA tailMask<>+16(SB)/8, $0
DATA tailMask<>+24(SB)/8, $0
DATA tailMask<>+32(SB)/8, $-1
DATA tailMask<>+40(SB)/8, $-1
DATA tailMask<>+48(SB)/8, $-1
DATA tailMask<>+56(SB)/8, $-1
GLOBL tailMask<>(SB), RODATA|NOPTR, $64

// func sumAVX2(p *byte, n int) uint64
//
// n is at least 32. VPSADBW against zero sums each 8-byte group into a
// 64-bit lane; two accumulators take 64 bytes per iteration. The last n%32
// bytes are summed from the 32 bytes ending at p+n, the ones already
// summed cleared by a mask (tailMask), so no byte is read outside p[0:n].
TEXT ·sumAVX2(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	LEAQ (SI)(CX*1), DX // the end, for the tail
	ANDQ $31, CX
	LEAQ tailMask<>(SB), AX
	VMOVDQU (AX)(CX*1), Y5
	MOVQ n+8(FP), CX
	ANDQ $-32, CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	CMPQ CX, $64
	JB one

pair:
	VPSADBW (SI), Y2, Y3
	VPSADBW 32(SI), Y2, Y4
	VPADDQ Y3, Y0, Y0
	VPADDQ Y4, Y1, Y1
	ADDQ $64, SI
	SUBQ $64, CX
	CMPQ CX, $64
	JAE pair
	TESTQ CX, CX
	JZ tail

one:
	VPSADBW (SI), Y2, Y3
	VPADDQ Y3, Y0, Y0

tail:
	// With n a multiple of 32 the mask is all zero: the load adds nothing.
	VPAND -32(DX), Y5, Y3
	VPSADBW Y3, Y2, Y3
	VPADDQ Y3, Y1, Y1
	VPADDQ Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDQ X1, X0, X0
	VPSHUFD $0x4e, X0, X1
	VPADDQ X1, X0, X0
	VMOVQ X0, AX
	VZEROUPPER
	MOVQ AX, ret+16(FP)
	RET

// func sohMaskAVX2(p *[128]byte) (lo, hi uint64)
TEXT ·sohMaskAVX2(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), SI
	MOVL $1, AX
	VMOVD AX, X4
	VPBROADCASTB X4, Y4
	VPCMPEQB (SI), Y4, Y0
	VPCMPEQB 32(SI), Y4, Y1
	VPCMPEQB 64(SI), Y4, Y2
	VPCMPEQB 96(SI), Y4, Y3
	VPMOVMSKB Y0, AX
	VPMOVMSKB Y1, BX
	VPMOVMSKB Y2, CX
	VPMOVMSKB Y3, DX
	SHLQ $32, BX
	ORQ BX, AX
	SHLQ $32, DX
	ORQ DX, CX
	VZEROUPPER
	MOVQ AX, lo+8(FP)
	MOVQ CX, hi+16(FP)
	RET
