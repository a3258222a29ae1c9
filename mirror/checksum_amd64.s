#include "textflag.h"

// func sumAVX2(p *byte, n int, acc *[16]uint32)
//
// Adds the little-endian 16-bit words of p[0:n] (n a multiple of 64) into
// 16 lanes of 32 bits: even words to acc[0:8], odd words to acc[8:16]. A
// lane takes at most n/32 words, so n below 2 MiB cannot overflow it.
TEXT ·sumAVX2(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ acc+16(FP), DI
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
	VMOVDQU Y0, 0(DI)
	VMOVDQU Y1, 32(DI)
	VZEROUPPER
	RET
