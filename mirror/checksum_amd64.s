#include "textflag.h"

// func sumAVX2(p *byte, n int) uint64
//
// Returns the sum of the little-endian 16-bit words of p[0:n], n a multiple
// of 64 and at most 1 MiB: each 32-bit lane then takes at most n/32 words,
// so the lanes cannot overflow before they are widened to 64 bits.
TEXT ·sumAVX2(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	VPCMPEQD Y5, Y5, Y5
	VPSRLD $16, Y5, Y5

loop:
	CMPQ CX, $64
	JB done
	VMOVDQU 0(SI), Y2
	VMOVDQU 32(SI), Y3
	VPSRLD $16, Y2, Y4
	VPAND Y5, Y2, Y2
	VPSRLD $16, Y3, Y8
	VPAND Y5, Y3, Y3
	VPADDD Y2, Y0, Y0
	VPADDD Y4, Y1, Y1
	VPADDD Y3, Y6, Y6
	VPADDD Y8, Y7, Y7
	ADDQ $64, SI
	SUBQ $64, CX
	JMP loop

done:
	VPADDD Y6, Y0, Y0
	VPADDD Y7, Y1, Y1
	VPADDD Y1, Y0, Y0
	// Widen the eight 32-bit lanes to 64 bits and add them up.
	VEXTRACTI128 $1, Y0, X3
	VPMOVZXDQ X0, Y2
	VPMOVZXDQ X3, Y3
	VPADDQ Y3, Y2, Y2
	VEXTRACTI128 $1, Y2, X3
	VPADDQ X3, X2, X2
	VPSHUFD $0x4e, X2, X3
	VPADDQ X3, X2, X2
	VMOVQ X2, AX
	MOVQ AX, ret+16(FP)
	VZEROUPPER
	RET
