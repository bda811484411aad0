//go:build amd64 && !purego

#include "textflag.h"

// AVX2 kernels of Hindsight's PELT (pelt.go, pelt_amd64.go). Each computes,
// lane by lane, exactly what the Go code beside it computes (the same IEEE
// operations in the same order), so the results are bit-identical; each
// handles the largest multiple of 4 elements and leaves the rest to Go.

DATA posInf<>+0(SB)/8, $0x7ff0000000000000
GLOBL posInf<>(SB), RODATA|NOPTR, $8
DATA minVarC<>+0(SB)/8, $0x3da5fd7fe1796495 // 1e-11
GLOBL minVarC<>(SB), RODATA|NOPTR, $8
DATA log2PiC<>+0(SB)/8, $0x3ffd67f1c864beb4 // 1.8378770664093453
GLOBL log2PiC<>(SB), RODATA|NOPTR, $8
DATA oneC<>+0(SB)/8, $0x3ff0000000000000
GLOBL oneC<>(SB), RODATA|NOPTR, $8
DATA twoC<>+0(SB)/8, $0x4000000000000000
GLOBL twoC<>(SB), RODATA|NOPTR, $8
DATA fourC<>+0(SB)/8, $0x4010000000000000
GLOBL fourC<>(SB), RODATA|NOPTR, $8
DATA halfC<>+0(SB)/8, $0x3fe0000000000000
GLOBL halfC<>(SB), RODATA|NOPTR, $8
DATA iotaC<>+0(SB)/8, $0x0000000000000000 // 0, 1, 2, 3
DATA iotaC<>+8(SB)/8, $0x3ff0000000000000
DATA iotaC<>+16(SB)/8, $0x4000000000000000
DATA iotaC<>+24(SB)/8, $0x4008000000000000
GLOBL iotaC<>(SB), RODATA|NOPTR, $32

// the constants of math.archLog (math/log_amd64.s)
DATA mantMask<>+0(SB)/8, $0x000fffffffffffff
GLOBL mantMask<>(SB), RODATA|NOPTR, $8
DATA expMask<>+0(SB)/8, $0x00000000000007ff
GLOBL expMask<>(SB), RODATA|NOPTR, $8
DATA magic<>+0(SB)/8, $0x4330000000000000 // 2^52
GLOBL magic<>(SB), RODATA|NOPTR, $8
DATA magicBias<>+0(SB)/8, $0x43300000000003fe // 2^52 + 0x3FE
GLOBL magicBias<>(SB), RODATA|NOPTR, $8
DATA hSqrt2<>+0(SB)/8, $0x3fe6a09e667f3bcd
GLOBL hSqrt2<>(SB), RODATA|NOPTR, $8
DATA ln2Hi<>+0(SB)/8, $0x3fe62e42fee00000
GLOBL ln2Hi<>(SB), RODATA|NOPTR, $8
DATA ln2Lo<>+0(SB)/8, $0x3dea39ef35793c76
GLOBL ln2Lo<>(SB), RODATA|NOPTR, $8
DATA logL1<>+0(SB)/8, $0x3fe5555555555593
GLOBL logL1<>(SB), RODATA|NOPTR, $8
DATA logL2<>+0(SB)/8, $0x3fd999999997fa04
GLOBL logL2<>(SB), RODATA|NOPTR, $8
DATA logL3<>+0(SB)/8, $0x3fd2492494229359
GLOBL logL3<>(SB), RODATA|NOPTR, $8
DATA logL4<>+0(SB)/8, $0x3fcc71c51d8e78af
GLOBL logL4<>(SB), RODATA|NOPTR, $8
DATA logL5<>+0(SB)/8, $0x3fc7466496cb03de
GLOBL logL5<>(SB), RODATA|NOPTR, $8
DATA logL6<>+0(SB)/8, $0x3fc39a09d078c69f
GLOBL logL6<>(SB), RODATA|NOPTR, $8
DATA logL7<>+0(SB)/8, $0x3fc2f112df3e5244
GLOBL logL7<>(SB), RODATA|NOPTR, $8

// func sumMinAVX2(a, b []float64) float64
TEXT ·sumMinAVX2(SB), NOSPLIT, $0-56
	MOVQ         a_base+0(FP), SI
	MOVQ         a_len+8(FP), CX
	MOVQ         b_base+24(FP), DX
	VBROADCASTSD posInf<>(SB), Y0
	VMOVAPD      Y0, Y1
	VMOVAPD      Y0, Y2
	VMOVAPD      Y0, Y3
	XORQ         AX, AX
	MOVQ         CX, BX
	ANDQ         $~15, BX

sum16:
	CMPQ    AX, BX
	JGE     sum4init
	VMOVUPD (SI)(AX*8), Y4
	VMOVUPD 32(SI)(AX*8), Y5
	VMOVUPD 64(SI)(AX*8), Y6
	VMOVUPD 96(SI)(AX*8), Y7
	VADDPD  (DX)(AX*8), Y4, Y4
	VADDPD  32(DX)(AX*8), Y5, Y5
	VADDPD  64(DX)(AX*8), Y6, Y6
	VADDPD  96(DX)(AX*8), Y7, Y7
	VMINPD  Y4, Y0, Y0
	VMINPD  Y5, Y1, Y1
	VMINPD  Y6, Y2, Y2
	VMINPD  Y7, Y3, Y3
	ADDQ    $16, AX
	JMP     sum16

sum4init:
	MOVQ CX, BX
	ANDQ $~3, BX

sum4:
	CMPQ    AX, BX
	JGE     sumDone
	VMOVUPD (SI)(AX*8), Y4
	VADDPD  (DX)(AX*8), Y4, Y4
	VMINPD  Y4, Y0, Y0
	ADDQ    $4, AX
	JMP     sum4

sumDone:
	VMINPD       Y1, Y0, Y0
	VMINPD       Y3, Y2, Y2
	VMINPD       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMINPD       X1, X0, X0
	VPERMILPD    $1, X0, X1
	VMINSD       X1, X0, X0
	VZEROUPPER
	MOVSD        X0, ret+48(FP)
	RET

// func pruneAVX2(fm, row []float64, pen, best float64) int
TEXT ·pruneAVX2(SB), NOSPLIT, $0-72
	MOVQ         fm_base+0(FP), DI
	MOVQ         fm_len+8(FP), CX
	MOVQ         row_base+24(FP), SI
	VBROADCASTSD pen+48(FP), Y1
	VBROADCASTSD best+56(FP), Y2
	VBROADCASTSD posInf<>(SB), Y3
	MOVQ         $-1, R8 // none yet
	XORQ         AX, AX
	ANDQ         $~3, CX

	// until the first cost + pen == best: prune and look for it
eq4:
	CMPQ      AX, CX
	JGE       pruneDone
	VMOVUPD   (DI)(AX*8), Y7
	VADDPD    (SI)(AX*8), Y7, Y4 // cost = fm + row
	VCMPPD    $0x06, Y2, Y4, Y5 // !(cost <= best) (NLE_UQ): pruned
	VMOVMSKPD Y5, BX
	TESTQ     BX, BX
	JZ        eqTest
	VBLENDVPD Y5, Y3, Y7, Y6    // pruned lanes: +Inf
	VMOVUPD   Y6, (DI)(AX*8)

eqTest:
	VADDPD    Y1, Y4, Y6
	VCMPPD    $0x00, Y2, Y6, Y6 // cost + pen == best (EQ_OQ)
	VMOVMSKPD Y6, BX
	ADDQ      $4, AX
	TESTQ     BX, BX
	JZ        eq4
	BSFQ      BX, BX
	LEAQ      -4(AX)(BX*1), R8

	// then prune only, 16 at a time while nothing is pruned
	MOVQ CX, DX
	ANDQ $~15, DX

prune16:
	MOVQ    AX, BX
	ADDQ    $16, BX
	CMPQ    BX, DX
	JGT     prune4
	VMOVUPD (DI)(AX*8), Y4
	VMOVUPD 32(DI)(AX*8), Y5
	VMOVUPD 64(DI)(AX*8), Y6
	VMOVUPD 96(DI)(AX*8), Y7
	VADDPD  (SI)(AX*8), Y4, Y4
	VADDPD  32(SI)(AX*8), Y5, Y5
	VADDPD  64(SI)(AX*8), Y6, Y6
	VADDPD  96(SI)(AX*8), Y7, Y7
	VCMPPD  $0x06, Y2, Y4, Y4
	VCMPPD  $0x06, Y2, Y5, Y5
	VCMPPD  $0x06, Y2, Y6, Y6
	VCMPPD  $0x06, Y2, Y7, Y7
	VORPD   Y5, Y4, Y8
	VORPD   Y7, Y6, Y9
	VORPD   Y9, Y8, Y8
	VPTEST  Y8, Y8
	JNZ     prune4 // something is pruned here: 4 at a time
	ADDQ    $16, AX
	JMP     prune16

prune4:
	CMPQ      AX, CX
	JGE       pruneDone
	VMOVUPD   (DI)(AX*8), Y7
	VADDPD    (SI)(AX*8), Y7, Y4
	VCMPPD    $0x06, Y2, Y4, Y5
	VMOVMSKPD Y5, BX
	ADDQ      $4, AX
	TESTQ     BX, BX
	JZ        prune4next
	VBLENDVPD Y5, Y3, Y7, Y6
	VMOVUPD   Y6, -32(DI)(AX*8)

prune4next:
	TESTQ $15, AX
	JNZ   prune4
	JMP   prune16

pruneDone:
	VZEROUPPER
	MOVQ R8, ret+64(FP)
	RET

// func costRowAVX2(dst, s, q []float64, sb, qb, k0 float64) int
//
// dst[c] = k * ((log2Pi + log(v)) + 1), k = k0 - c, sum = sb - s[c],
// v = ((qb - q[c]) - sum*sum/k) / k, minVar where v <= 0: pelt.segCost,
// with log as math.archLog computes it. It stops before the first group of
// 4 with a v that is NaN or +Inf (archLog's special cases) and returns how
// many it wrote.
TEXT ·costRowAVX2(SB), NOSPLIT, $0-104
	MOVQ         dst_base+0(FP), DI
	MOVQ         dst_len+8(FP), CX
	MOVQ         s_base+24(FP), SI
	MOVQ         q_base+48(FP), DX
	VBROADCASTSD sb+72(FP), Y13
	VBROADCASTSD qb+80(FP), Y14
	VBROADCASTSD k0+88(FP), Y15
	VMOVUPD      iotaC<>(SB), Y12
	VSUBPD       Y12, Y15, Y15 // k of each lane
	VBROADCASTSD oneC<>(SB), Y12
	VBROADCASTSD posInf<>(SB), Y11
	XORQ         AX, AX
	ANDQ         $~3, CX

cost4:
	CMPQ    AX, CX
	JGE     costDone
	VMOVUPD (SI)(AX*8), Y1
	VSUBPD  Y1, Y13, Y1 // sum = sb - s[c]
	VMULPD  Y1, Y1, Y1  // sum*sum
	VDIVPD  Y15, Y1, Y1 // sum*sum/k
	VMOVUPD (DX)(AX*8), Y2
	VSUBPD  Y2, Y14, Y2 // qb - q[c]
	VSUBPD  Y1, Y2, Y2  // (qb - q[c]) - sum*sum/k
	VDIVPD  Y15, Y2, Y2 // v

	// v <= 0: minVar
	VXORPD       Y3, Y3, Y3
	VCMPPD       $0x12, Y3, Y2, Y4 // v <= 0 (LE_OQ)
	VBROADCASTSD minVarC<>(SB), Y5
	VBLENDVPD    Y4, Y5, Y2, Y2

	// NaN or +Inf: left to Go
	VCMPPD    $0x11, Y11, Y2, Y4 // v < +Inf (LT_OQ)
	VMOVMSKPD Y4, BX
	CMPQ      BX, $15
	JNE       costDone

	// log(v), as math.archLog: f1, e := frexp(v)
	VPBROADCASTQ mantMask<>(SB), Y0
	VPAND        Y0, Y2, Y3
	VPBROADCASTQ halfC<>(SB), Y0
	VPOR         Y0, Y3, Y3 // f1
	VPSRLQ       $52, Y2, Y4
	VPBROADCASTQ expMask<>(SB), Y0
	VPAND        Y0, Y4, Y4
	VPBROADCASTQ magic<>(SB), Y0
	VPOR         Y0, Y4, Y4
	VBROADCASTSD magicBias<>(SB), Y0
	VSUBPD       Y0, Y4, Y4 // e - 0x3FE, exactly

	// if f1 <= sqrt2/2 { e -= 1; f1 *= 2 }
	VBROADCASTSD hSqrt2<>(SB), Y5
	VCMPPD       $0x05, Y3, Y5, Y5 // !(sqrt2/2 < f1) (NLT_US)
	VANDPD       Y12, Y5, Y6       // 1 or 0
	VSUBPD       Y6, Y4, Y4
	VADDPD       Y12, Y6, Y6       // 2 or 1
	VMULPD       Y6, Y3, Y3
	VSUBPD       Y12, Y3, Y3       // f := f1 - 1

	// s := f / (2 + f); s2 := s*s; s4 := s2*s2
	VBROADCASTSD twoC<>(SB), Y7
	VADDPD       Y3, Y7, Y7
	VDIVPD       Y7, Y3, Y7 // s
	VMULPD       Y7, Y7, Y8 // s2
	VMULPD       Y8, Y8, Y9 // s4

	// t1 := s2 * (L1 + s4*(L3+s4*(L5+s4*L7)))
	VBROADCASTSD logL7<>(SB), Y10
	VMULPD       Y9, Y10, Y10
	VBROADCASTSD logL5<>(SB), Y0
	VADDPD       Y0, Y10, Y10
	VMULPD       Y9, Y10, Y10
	VBROADCASTSD logL3<>(SB), Y0
	VADDPD       Y0, Y10, Y10
	VMULPD       Y9, Y10, Y10
	VBROADCASTSD logL1<>(SB), Y0
	VADDPD       Y0, Y10, Y10
	VMULPD       Y10, Y8, Y8 // t1

	// t2 := s4 * (L2 + s4*(L4+s4*L6))
	VBROADCASTSD logL6<>(SB), Y10
	VMULPD       Y9, Y10, Y10
	VBROADCASTSD logL4<>(SB), Y0
	VADDPD       Y0, Y10, Y10
	VMULPD       Y9, Y10, Y10
	VBROADCASTSD logL2<>(SB), Y0
	VADDPD       Y0, Y10, Y10
	VMULPD       Y10, Y9, Y9 // t2

	VADDPD Y9, Y8, Y8 // R := t1 + t2

	// hfsq := 0.5 * f * f
	VBROADCASTSD halfC<>(SB), Y10
	VMULPD       Y3, Y10, Y10
	VMULPD       Y3, Y10, Y10

	// e*Ln2Hi - ((hfsq - (s*(hfsq+R) + e*Ln2Lo)) - f)
	VADDPD       Y10, Y8, Y8
	VMULPD       Y8, Y7, Y7
	VBROADCASTSD ln2Lo<>(SB), Y0
	VMULPD       Y0, Y4, Y9
	VADDPD       Y9, Y7, Y7
	VSUBPD       Y7, Y10, Y10
	VSUBPD       Y3, Y10, Y10
	VBROADCASTSD ln2Hi<>(SB), Y0
	VMULPD       Y0, Y4, Y4
	VSUBPD       Y10, Y4, Y4 // log(v)

	// k * ((log2Pi + log(v)) + 1)
	VBROADCASTSD log2PiC<>(SB), Y0
	VADDPD       Y4, Y0, Y4
	VADDPD       Y12, Y4, Y4
	VMULPD       Y4, Y15, Y4
	VMOVUPD      Y4, (DI)(AX*8)

	VBROADCASTSD fourC<>(SB), Y0
	VSUBPD       Y0, Y15, Y15
	ADDQ         $4, AX
	JMP          cost4

costDone:
	VZEROUPPER
	MOVQ AX, ret+96(FP)
	RET
