// Package stopbit splits bytes holding FAST stop-bit encoded fields into
// tokens: every field of an integer or ASCII string type ends at the first
// byte with its top bit set (the stop bit), and its value is the 7-bit
// groups of its bytes, the first byte most significant.
//
// Scan finds every token of a buffer in one call and decodes those of up to
// 8 bytes into a caller-owned Tokens batch. On amd64 with AVX2 and BMI2 it
// runs an assembly kernel (the stop bits of 64 bytes from four instructions,
// each token's end and bytes stored by a short scalar loop, then lengths and
// values worked out four tokens at a time by vector instructions);
// elsewhere a Go loop computes the same tokens. Generated decoders read a record's fields from
// the batch instead of decoding them byte by byte:
//
//	n, full := stopbit.Scan(payload, off, &toks)
//	pm := toks.Value[0] << (64 - 7*toks.Len[0]) // a presence map
//	...
package stopbit

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// MaxTokens is the capacity of a Tokens batch.
const MaxTokens = 512

// MaxLen is the longest token Scan decodes, in bytes: its value has at most
// 56 bits. Scan stops before a longer one.
const MaxLen = 8

// blockLen is the span whose stop bits Scan gathers at once (one 64-bit
// mask: the kernel's loop over a block's tokens ends, with a mispredicted
// branch, once per 64 bytes). Scan only starts a block while at most
// MaxTokens-blockLen tokens are in the batch, so a block's tokens always
// fit.
const blockLen = 64

// maxScan is the longest buffer Scan reads, as End holds 32-bit offsets (a
// variable: as a constant index it would not compile where int is 32 bits).
var maxScan uint64 = math.MaxUint32

// Tokens holds the tokens Scan found. Token i is valid for i < n, n as Scan
// returned it; the entries past n hold junk (what an earlier Scan left, or
// what this one computed past the tokens it reports).
type Tokens struct {
	// Value is the token's 7-bit groups packed, first byte most
	// significant: the unsigned integer it encodes.
	Value [MaxTokens]uint64
	// End is the offset in the scanned buffer of the token's stop byte.
	End [MaxTokens]uint32
	// Len is the token's length in bytes, 1 to MaxLen.
	Len [MaxTokens]uint8
	// Raw is the 8 bytes of the scanned buffer ending at the token's stop
	// byte as a little-endian word (zeros for bytes before the buffer):
	// the token's bytes on top, its stop byte highest, so that
	// Raw>>(64-8*Len) is its bytes in order, first lowest (an ASCII
	// string's characters).
	Raw [MaxTokens]uint64
}

// Accelerated reports whether Scan runs the assembly kernel. Callers that
// have a faster way than the portable Scan use this to choose.
var Accelerated = useKernel

// Scan finds the tokens of b that start at b[off] or later and decodes them
// into t, from t.Value[0] on. It returns their number n and full, true when
// it stopped because the batch might not hold the next block's tokens (call
// it again from the offset after t.End[n-1]). Otherwise it stopped at the
// end of b (bytes after the last stop byte are an unfinished token and are
// left out) or before a token longer than MaxLen bytes. Scan does NOT take
// ownership of b or t; it reads b only within b[0:len(b)]. Buffers over
// 4 GiB are scanned up to their first 4 GiB (End is 32 bits).
func Scan(b []byte, off int, t *Tokens) (n int, full bool) {
	if uint64(len(b)) > maxScan {
		b = b[:maxScan]
	}
	if off < 0 || off >= len(b) {
		return 0, false
	}
	if useKernel {
		if len(b) >= blockLen { // no padded copy needed: one call less
			return scanAVX2(&b[0], len(b), off, t)
		}
		return scanKernel(b, off, t)
	}
	return scanGo(b, off, t)
}

// scanGo is Scan in Go: the same blocks of blockLen bytes from off on, the
// same tokens, the same stopping points as the kernel.
func scanGo(b []byte, off int, t *Tokens) (n int, full bool) {
	prev := off - 1 // the previous token's stop byte
	for blk := off; blk < len(b); blk += blockLen {
		if n > MaxTokens-blockLen {
			return n, true
		}
		stops := stopMask(b[blk:min(blk+blockLen, len(b))])
		for stops != 0 {
			e := blk + bits.TrailingZeros64(stops)
			stops &= stops - 1
			l := e - prev
			if l > MaxLen {
				return n, false
			}
			var v, raw uint64
			for _, c := range b[prev+1 : e+1] {
				v = v<<7 | uint64(c&0x7f)
			}
			if e >= 7 {
				raw = binary.LittleEndian.Uint64(b[e-7:])
			} else {
				for _, c := range b[:e+1] {
					raw = raw>>8 | uint64(c)<<56
				}
			}
			t.Value[n&(MaxTokens-1)] = v
			t.End[n&(MaxTokens-1)] = uint32(e)
			t.Len[n&(MaxTokens-1)] = uint8(l)
			t.Raw[n&(MaxTokens-1)] = raw
			n++
			prev = e
		}
	}
	return n, false
}

// stopMask returns the stop bits of b (at most 64 bytes), bit i for b[i]:
// eight bytes at a time, the multiplication moving the top bit of each byte
// into the word's top byte without carries.
func stopMask(b []byte) uint64 {
	const top, gather = 0x8080808080808080, 0x0002040810204081
	var m uint64
	i := 0
	for ; i+8 <= len(b); i += 8 {
		m |= binary.LittleEndian.Uint64(b[i:]) & top * gather >> 56 << i
	}
	for ; i < len(b); i++ {
		m |= uint64(b[i]>>7) << i
	}
	return m
}
