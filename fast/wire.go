package fast

import (
	"errors"
	"math"
)

// Errors returned by the wire primitives. They are preallocated, so the
// primitives allocate nothing on the error path either. The Decoder wraps them
// in a *DecodeError that adds the spec code, template, field and offset.
var (
	// ErrShort means b ends inside the value: on a TCP stream the rest is
	// still to come, so it is "need more bytes", not corruption.
	ErrShort = errors.New("fast: need more bytes")
	// ErrOverflow is the spec's dynamic error D2: an integer does not fit its
	// type, or its stop-bit encoding is longer than MaxIntBytes.
	ErrOverflow = errors.New("fast: integer overflow")
	// ErrLimit means a string, byte vector, sequence or presence map is longer
	// than the bound the caller configured (see Limits).
	ErrLimit = errors.New("fast: length over limit")
)

// MaxIntBytes is the longest stop-bit integer the primitives accept: ten
// bytes carry 70 data bits, enough for any 64-bit value and for the nullable
// encodings of MaxUint64 and MaxInt64. Longer encodings are reported as
// ErrOverflow, like an 11-byte integer in the spec, so a stream of zero bytes
// cannot keep a reader busy.
const MaxIntBytes = 10

const (
	stopBit  = 0x80
	dataBits = 0x7f
	signBit  = 0x40
)

// ReadUint32 decodes a mandatory uInt32 starting at b[off] and returns the
// offset just past it. Overlong encodings (leading zero groups) are accepted.
func ReadUint32(b []byte, off int) (v uint32, next int, err error) {
	u, next, err := readUint(b, off, math.MaxUint32)
	return uint32(u), next, err
}

// ReadUint64 decodes a mandatory uInt64 starting at b[off].
func ReadUint64(b []byte, off int) (v uint64, next int, err error) {
	return readUint(b, off, math.MaxUint64)
}

// ReadNullableUint32 decodes an optional (nullable) uInt32 starting at b[off]:
// 0x80 is absent, any other wire value n is the value n-1, so the wire value
// may exceed the type by one (MaxUint32 is 10 00 00 00 80).
func ReadNullableUint32(b []byte, off int) (v uint32, present bool, next int, err error) {
	u, next, err := readUint(b, off, math.MaxUint32+1)
	if err != nil || u == 0 {
		return 0, false, next, err
	}
	return uint32(u - 1), true, next, nil
}

// ReadNullableUint64 decodes an optional (nullable) uInt64 starting at b[off].
// The wire value of MaxUint64 is 2^64, one more than the type holds, and is
// accepted.
func ReadNullableUint64(b []byte, off int) (v uint64, present bool, next int, err error) {
	if off < len(b) && b[off] == stopBit {
		return 0, false, off + 1, nil
	}
	u, next, err := readUint(b, off, math.MaxUint64)
	if err == nil {
		if u == 0 { // an overlong NULL (00 80)
			return 0, false, next, nil
		}
		return u - 1, true, next, nil
	}
	if err == ErrOverflow && isTwoToThe64(b, off) {
		return math.MaxUint64, true, off + MaxIntBytes, nil
	}
	return 0, false, next, err
}

// isTwoToThe64 reports whether b[off:] starts with the minimal 10-byte
// encoding of 2^64: 02 00 00 00 00 00 00 00 00 80.
func isTwoToThe64(b []byte, off int) bool {
	if len(b)-off < MaxIntBytes || b[off] != 0x02 || b[off+MaxIntBytes-1] != stopBit {
		return false
	}
	for _, c := range b[off+1 : off+MaxIntBytes-1] {
		if c != 0 {
			return false
		}
	}
	return true
}

// ReadInt32 decodes a mandatory int32 starting at b[off].
func ReadInt32(b []byte, off int) (v int32, next int, err error) {
	x, _, next, err := readInt(b, off, math.MinInt32, math.MaxInt32)
	return int32(x), next, err
}

// ReadInt64 decodes a mandatory int64 starting at b[off].
func ReadInt64(b []byte, off int) (v int64, next int, err error) {
	x, _, next, err := readInt(b, off, math.MinInt64, math.MaxInt64)
	return x, next, err
}

// ReadNullableInt32 decodes an optional (nullable) int32 starting at b[off]:
// 0x80 is absent, a positive wire value n is n-1, a negative one is itself.
func ReadNullableInt32(b []byte, off int) (v int32, present bool, next int, err error) {
	x, _, next, err := readInt(b, off, math.MinInt32, math.MaxInt32+1)
	if err != nil || x == 0 {
		return 0, false, next, err
	}
	if x > 0 {
		x--
	}
	return int32(x), true, next, nil
}

// ReadNullableInt64 decodes an optional (nullable) int64 starting at b[off].
// The wire value of MaxInt64 is 2^63, one more than the type holds, and is
// accepted.
func ReadNullableInt64(b []byte, off int) (v int64, present bool, next int, err error) {
	x, wide, next, err := readInt(b, off, math.MinInt64, 1<<63)
	switch {
	case err != nil || (x == 0 && !wide):
		return 0, false, next, err
	case wide:
		return math.MaxInt64, true, next, nil
	case x > 0:
		x--
	}
	return x, true, next, nil
}

// readUint decodes a stop-bit unsigned integer no larger than max.
func readUint(b []byte, off int, max uint64) (uint64, int, error) {
	if off >= len(b) {
		return 0, off, ErrShort
	}
	c := b[off]
	v := uint64(c & dataBits)
	if c&stopBit != 0 {
		return v, off + 1, nil
	}
	end := min(len(b), off+MaxIntBytes)
	for i := off + 1; i < end; i++ {
		c = b[i]
		if v > max>>7 {
			return 0, i, ErrOverflow
		}
		v = v<<7 | uint64(c&dataBits)
		if v > max {
			return 0, i, ErrOverflow
		}
		if c&stopBit != 0 {
			return v, i + 1, nil
		}
	}
	if end == off+MaxIntBytes {
		return 0, end, ErrOverflow
	}
	return 0, off, ErrShort
}

// readInt decodes a stop-bit two's-complement integer in [min, max]. max may
// be 2^63 (the nullable wire value of MaxInt64): that one value is returned as
// wide=true because it does not fit an int64.
func readInt(b []byte, off int, min int64, max uint64) (v int64, wide bool, next int, err error) {
	if off >= len(b) {
		return 0, false, off, ErrShort
	}
	c := b[off]
	end := off + MaxIntBytes
	if end > len(b) {
		end = len(b)
	}
	if c&signBit != 0 {
		// Negative: sign-extend the first 7-bit group.
		x := int64(c&dataBits) - 0x80
		if c&stopBit != 0 {
			return x, false, off + 1, nil
		}
		for i := off + 1; i < end; i++ {
			c = b[i]
			if x < min>>7 {
				return 0, false, i, ErrOverflow
			}
			x = x<<7 | int64(c&dataBits)
			if x < min {
				return 0, false, i, ErrOverflow
			}
			if c&stopBit != 0 {
				return x, false, i + 1, nil
			}
		}
	} else {
		u := uint64(c & dataBits)
		if c&stopBit != 0 {
			return int64(u), false, off + 1, nil
		}
		for i := off + 1; i < end; i++ {
			c = b[i]
			if u > max>>7 {
				return 0, false, i, ErrOverflow
			}
			u = u<<7 | uint64(c&dataBits)
			if u > max {
				return 0, false, i, ErrOverflow
			}
			if c&stopBit != 0 {
				if u == 1<<63 {
					return 0, true, i + 1, nil
				}
				return int64(u), false, i + 1, nil
			}
		}
	}
	if end == off+MaxIntBytes {
		return 0, false, end, ErrOverflow
	}
	return 0, false, off, ErrShort
}

// ReadASCII decodes a mandatory ASCII string starting at b[off], at most
// maxLen characters long (longer is ErrLimit).
//
// s aliases b and is valid as long as b is. It is the string in wire form:
// when s is not empty its last byte still carries the stop bit (0x80), which
// the decoder must not clear in b because a message cut short is decoded
// again from its start once more bytes arrive. Use CopyASCII or
// AppendASCIIValue to obtain the characters. The spec's preamble rule (10.6.3)
// is applied: 80 is "" (s empty) and 00 80 is "\x00" (s is the single byte
// 0x80, which unmasks to NUL).
func ReadASCII(b []byte, off int, maxLen int) (s []byte, next int, err error) {
	next, err = scanASCII(b, off, maxLen+1)
	if err != nil {
		return nil, next, err
	}
	switch {
	case next-off == 1 && b[off] == stopBit:
		return b[off:off], next, nil
	case next-off == 2 && b[off] == 0:
		return b[off+1 : next], next, nil
	}
	if next-off > maxLen {
		return nil, off, ErrLimit
	}
	return b[off:next], next, nil
}

// ReadNullableASCII decodes an optional ASCII string starting at b[off]: 80 is
// absent, 00 80 is "" and 00 00 80 is "\x00" (spec 10.6.3). s is in the wire
// form described at ReadASCII and aliases b.
func ReadNullableASCII(b []byte, off int, maxLen int) (s []byte, present bool, next int, err error) {
	next, err = scanASCII(b, off, maxLen+2)
	if err != nil {
		return nil, false, next, err
	}
	switch {
	case next-off == 1 && b[off] == stopBit:
		return nil, false, next, nil
	case next-off == 2 && b[off] == 0:
		return b[off+1 : off+1], true, next, nil
	case next-off == 3 && b[off] == 0 && b[off+1] == 0:
		return b[off+2 : next], true, next, nil
	}
	if next-off > maxLen {
		return nil, false, off, ErrLimit
	}
	return b[off:next], true, next, nil
}

// scanASCII returns the offset just past the byte with the stop bit, looking
// at no more than maxBytes bytes.
func scanASCII(b []byte, off int, maxBytes int) (int, error) {
	end := len(b)
	limited := false
	if maxBytes >= 0 && off+maxBytes < end {
		end = off + maxBytes
		limited = true
	}
	for i := off; i < end; i++ {
		if b[i]&stopBit != 0 {
			return i + 1, nil
		}
	}
	if limited {
		return off, ErrLimit
	}
	return off, ErrShort
}

// CopyASCII copies the characters of s, a string in the wire form that
// ReadASCII returns, into dst with the stop bit removed. It returns the number
// of bytes copied, min(len(dst), len(s)).
func CopyASCII(dst, s []byte) int {
	n := copy(dst, s)
	if n == len(s) && n > 0 {
		dst[n-1] &= dataBits
	}
	return n
}

// AppendASCIIValue appends the characters of s, a string in the wire form that
// ReadASCII returns, to dst with the stop bit removed.
func AppendASCIIValue(dst, s []byte) []byte {
	dst = append(dst, s...)
	if len(s) > 0 {
		dst[len(dst)-1] &= dataBits
	}
	return dst
}

// ReadByteVector decodes a mandatory byteVector (or unicode string, whose
// bytes are UTF-8) starting at b[off]: a uInt32 length then that many bytes.
// v aliases b and is valid as long as b is. A length over maxLen is ErrLimit,
// whatever the buffer holds, so a length on the wire never sizes anything.
func ReadByteVector(b []byte, off int, maxLen int) (v []byte, next int, err error) {
	n, p, err := ReadUint32(b, off)
	if err != nil {
		return nil, p, err
	}
	return sliceVector(b, off, p, n, maxLen)
}

// ReadNullableByteVector decodes an optional byteVector: its length is a
// nullable uInt32, 0x80 meaning absent.
func ReadNullableByteVector(b []byte, off int, maxLen int) (v []byte, present bool, next int, err error) {
	n, present, p, err := ReadNullableUint32(b, off)
	if err != nil || !present {
		return nil, false, p, err
	}
	v, next, err = sliceVector(b, off, p, n, maxLen)
	return v, err == nil, next, err
}

func sliceVector(b []byte, off, p int, n uint32, maxLen int) ([]byte, int, error) {
	if uint64(n) > uint64(maxLen) {
		return nil, off, ErrLimit
	}
	if len(b)-p < int(n) {
		return nil, off, ErrShort
	}
	return b[p : p+int(n)], p + int(n), nil
}

// PMap is a decoded presence map. Bits are consumed in order with Next; past
// the last transmitted bit the map reads as zeros, as the spec's truncation
// rule says. A PMap holds up to MaxPMapBits bits in two words, so Next is a
// few shifts that the compiler inlines.
type PMap struct {
	hi, lo uint64 // the bits not yet consumed, first one in the top bit of hi
}

// MaxPMapBits is the number of presence-map bits a PMap holds: 18 bytes of
// 7 bits. Longer maps are accepted when the bits past this are all zero (an
// overlong encoding); otherwise ReadPMap returns ErrLimit.
const MaxPMapBits = 126

// ReadPMap decodes a presence map starting at b[off], at most maxBytes bytes
// long (longer is ErrLimit). Overlong maps (trailing zero groups) are
// accepted.
func ReadPMap(b []byte, off int, maxBytes int) (p PMap, next int, err error) {
	if off < len(b) && b[off]&stopBit != 0 {
		// One-byte maps are the common case: skip the scan.
		return PMap{hi: uint64(b[off]) << 57}, off + 1, nil
	}
	next, err = scanASCII(b, off, maxBytes)
	if err != nil {
		return PMap{}, next, err
	}
	n := 0
	for _, c := range b[off:next] {
		if n == MaxPMapBits/7 {
			if c&dataBits != 0 {
				return PMap{}, off, ErrLimit
			}
			continue
		}
		p.hi = p.hi<<7 | p.lo>>57
		p.lo = p.lo<<7 | uint64(c&dataBits)
		n++
	}
	// Move the 7n bits from the bottom of the 128-bit value to its top.
	shift := uint(128 - 7*n)
	if shift >= 64 {
		p.hi, p.lo = p.lo<<(shift-64), 0
	} else {
		p.hi, p.lo = p.hi<<shift|p.lo>>(64-shift), p.lo<<shift
	}
	return p, next, nil
}

// Peek returns the next bit of the map without consuming it.
func (p *PMap) Peek() bool { return p.hi>>63 != 0 }

// Next consumes the next bit of the map; it returns false past the end.
func (p *PMap) Next() bool {
	bit := p.hi>>63 != 0
	p.hi <<= 1
	if p.lo != 0 { // maps longer than 9 bytes only
		p.hi |= p.lo >> 63
		p.lo <<= 1
	}
	return bit
}

// PMapBuilder collects presence-map bits while an encoder writes the fields
// into a scratch buffer; AppendTo then writes the minimal map in front of
// them. The zero value is ready to use; Reset keeps its storage, so a reused
// builder allocates nothing in steady state.
type PMapBuilder struct {
	groups []byte // 7 bits per byte, first bit in bit 6
	n      int    // bits added
}

// Reset forgets all bits.
func (p *PMapBuilder) Reset() {
	p.groups = p.groups[:0]
	p.n = 0
}

// Add appends one bit.
func (p *PMapBuilder) Add(bit bool) {
	if p.n%7 == 0 {
		p.groups = append(p.groups, 0)
	}
	if bit {
		p.groups[len(p.groups)-1] |= 1 << (6 - uint(p.n%7))
	}
	p.n++
}

// Len returns the number of bits added.
func (p *PMapBuilder) Len() int { return p.n }

// AppendTo appends the minimal encoding of the map to dst: trailing zero
// bytes are dropped, and an all-zero map is the single byte 0x80.
func (p *PMapBuilder) AppendTo(dst []byte) []byte {
	last := len(p.groups) - 1
	for last > 0 && p.groups[last] == 0 {
		last--
	}
	if last < 0 {
		return append(dst, stopBit)
	}
	dst = append(dst, p.groups[:last+1]...)
	dst[len(dst)-1] |= stopBit
	return dst
}

// AppendUint32 appends the stop-bit encoding of v.
func AppendUint32(dst []byte, v uint32) []byte { return appendUint(dst, uint64(v)) }

// AppendUint64 appends the stop-bit encoding of v.
func AppendUint64(dst []byte, v uint64) []byte { return appendUint(dst, v) }

// AppendInt32 appends the stop-bit two's-complement encoding of v.
func AppendInt32(dst []byte, v int32) []byte { return appendInt(dst, int64(v)) }

// AppendInt64 appends the stop-bit two's-complement encoding of v.
func AppendInt64(dst []byte, v int64) []byte { return appendInt(dst, v) }

// AppendNullableUint32 appends an optional uInt32: v+1, or 0x80 when absent.
func AppendNullableUint32(dst []byte, v uint32, present bool) []byte {
	if !present {
		return append(dst, stopBit)
	}
	return appendUint(dst, uint64(v)+1)
}

// AppendNullableUint64 appends an optional uInt64: v+1, or 0x80 when absent.
// MaxUint64 becomes the 10-byte encoding of 2^64.
func AppendNullableUint64(dst []byte, v uint64, present bool) []byte {
	switch {
	case !present:
		return append(dst, stopBit)
	case v == math.MaxUint64:
		return append(dst, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, stopBit)
	}
	return appendUint(dst, v+1)
}

// AppendNullableInt32 appends an optional int32: v+1 when v >= 0, v when
// negative, 0x80 when absent.
func AppendNullableInt32(dst []byte, v int32, present bool) []byte {
	return AppendNullableInt64(dst, int64(v), present)
}

// AppendNullableInt64 appends an optional int64: v+1 when v >= 0, v when
// negative, 0x80 when absent. MaxInt64 becomes the encoding of 2^63.
func AppendNullableInt64(dst []byte, v int64, present bool) []byte {
	switch {
	case !present:
		return append(dst, stopBit)
	case v == math.MaxInt64:
		// 2^63 with a clear sign bit needs ten groups: 01 00 ... 00 80.
		return append(dst, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, stopBit)
	case v >= 0:
		return appendInt(dst, v+1)
	}
	return appendInt(dst, v)
}

func appendUint(dst []byte, v uint64) []byte {
	if v < 0x80 {
		return append(dst, byte(v)|stopBit)
	}
	n := 1
	for x := v >> 7; x != 0; x >>= 7 {
		n++
	}
	for i := n - 1; i > 0; i-- {
		dst = append(dst, byte(v>>(7*uint(i)))&dataBits)
	}
	return append(dst, byte(v)&dataBits|stopBit)
}

func appendInt(dst []byte, v int64) []byte {
	if v >= -64 && v < 64 {
		return append(dst, byte(v)&dataBits|stopBit)
	}
	// Count the groups needed so that the top group's bit 6 equals the sign.
	n := 1
	for x := v >> 6; x != 0 && x != -1; x >>= 7 {
		n++
	}
	for i := n - 1; i > 0; i-- {
		dst = append(dst, byte(v>>(7*uint(i)))&dataBits)
	}
	return append(dst, byte(v)&dataBits|stopBit)
}

// AppendASCII appends a mandatory ASCII string. "" is 80 and "\x00" is 00 80
// (spec 10.6.3). Characters are 7-bit: the top bit of each byte of s is
// ignored. A string longer than one byte must not start with NUL: it has no
// faithful encoding ("\x00\x00" would read back as "\x00").
func AppendASCII(dst []byte, s []byte) []byte {
	switch {
	case len(s) == 0:
		return append(dst, stopBit)
	case len(s) == 1 && s[0] == 0:
		return append(dst, 0, stopBit)
	}
	return appendChars(dst, s)
}

// AppendNullableASCII appends an optional ASCII string: 80 is absent, 00 80
// is "" and 00 00 80 is "\x00".
func AppendNullableASCII(dst []byte, s []byte, present bool) []byte {
	switch {
	case !present:
		return append(dst, stopBit)
	case len(s) == 0:
		return append(dst, 0, stopBit)
	case len(s) == 1 && s[0] == 0:
		return append(dst, 0, 0, stopBit)
	}
	return appendChars(dst, s)
}

func appendChars(dst []byte, s []byte) []byte {
	start := len(dst)
	dst = append(dst, s...)
	for i := start; i < len(dst); i++ {
		dst[i] &= dataBits
	}
	dst[len(dst)-1] |= stopBit
	return dst
}

// AppendByteVector appends a mandatory byteVector (or unicode string): its
// length as a uInt32, then its bytes.
func AppendByteVector(dst []byte, v []byte) []byte {
	dst = appendUint(dst, uint64(len(v)))
	return append(dst, v...)
}

// AppendNullableByteVector appends an optional byteVector: a nullable uInt32
// length (0x80 when absent), then its bytes.
func AppendNullableByteVector(dst []byte, v []byte, present bool) []byte {
	if !present {
		return append(dst, stopBit)
	}
	dst = appendUint(dst, uint64(len(v))+1)
	return append(dst, v...)
}
