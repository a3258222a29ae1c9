package mirror

import (
	"math/bits"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// refOnesSum is the textbook RFC 1071 loop over big-endian 16-bit words.
func refOnesSum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

func TestOnesSumMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 3000)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for n := 0; n <= 200; n++ {
		for _, off := range []int{0, 1, 3} {
			b := buf[off : off+n]
			if got, want := onesSum(b), refOnesSum(b); got != want && !(got == 0xffff && want == 0) && !(got == 0 && want == 0xffff) {
				t.Fatalf("len %d off %d: onesSum %#04x, reference %#04x", n, off, got, want)
			}
		}
	}
	for i := range buf {
		buf[i] = 0xff
	}
	for _, n := range []int{1, 2, 63, 64, 65, 1408, 3000} {
		if got, want := onesSum(buf[:n]), refOnesSum(buf[:n]); got != want {
			t.Fatalf("all ones, len %d: %#04x, want %#04x", n, got, want)
		}
	}
}

// TestOnesSumScalarAndVectorAgree checks the vector loop against the scalar
// one and the reference: random lengths 0..9000 at random alignments (the
// vector loop's head load depends on the address), all-0xff buffers (the
// largest lane sums), odd lengths, every length around the loop's steps, and
// a non-zero initial sum (the TCP pseudo-header's constants).
func TestOnesSumScalarAndVectorAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	random := make([]byte, 70100)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	ones := make([]byte, len(random))
	for i := range ones {
		ones[i] = 0xff
	}
	saved := vectorEnabled()
	defer setAVX2(saved)
	check := func(b []byte, init uint32, what string) {
		t.Helper()
		setAVX2(false)
		scalar := onesSumLE(b, init)
		setAVX2(saved)
		ref := bits.ReverseBytes16(addOnes(refOnesSum(b), bits.ReverseBytes16(uint16(init))))
		if got := onesSumLE(b, init); got != scalar || !onesEqual(ref, scalar) {
			t.Fatalf("%s, len %d at %#x, init %#x: vector %#04x, scalar %#04x, reference %#04x",
				what, len(b), addrOf(b)%64, init, got, scalar, ref)
		}
	}
	for _, n := range []int{255, 256, 257, 1408, 1428, 1448, 1500, 9000, 65535, 65536 + 31, 65536 + 32, 69999} {
		for _, off := range []int{0, 1, 2, 26, 30} {
			check(random[off:off+n], 0, "random")
			check(ones[off:off+n], 0, "all ones")
			check(ones[off:off+n], 0xffff, "all ones, init 0xffff")
		}
	}
	// Every length around the vector loop's steps (32, 64 and 128 bytes),
	// its head and its tail, at every alignment within a cache line.
	for n := 0; n <= 300; n++ {
		for off := 0; off < 64; off++ {
			check(random[off:off+n], 0, "random")
			check(ones[off:off+n], 0, "all ones")
		}
	}
	for i := 0; i < 20000; i++ {
		n, off := rng.IntN(9001), rng.IntN(4096)
		if i%4 == 0 {
			n |= 1 // odd lengths: the last byte is the low byte of a word
		}
		b := random[off : off+n]
		if i%8 == 0 {
			b = ones[off : off+n]
		}
		check(b, uint32(rng.IntN(0x10000)), "random length")
	}
}

// onesEqual reports whether two folded ones' complement sums are equal;
// 0 and 0xffff are both zero, and only all-zero input sums to 0.
func onesEqual(a, b uint16) bool {
	return a == b || a|b == 0xffff && (a == 0 || b == 0)
}

func addrOf(b []byte) uintptr {
	if len(b) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&b[0]))
}

func TestIPv4HeaderSumOK(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for i := 0; i < 10000; i++ {
		h := make([]byte, 20+4*rng.IntN(11)) // IHL 5 to 15
		for j := range h {
			h[j] = byte(rng.Uint32())
		}
		if i%2 == 0 { // make it valid
			h[10], h[11] = 0, 0
			ck := ^refOnesSum(h)
			h[10], h[11] = byte(ck>>8), byte(ck)
		}
		if got, want := ipv4HeaderSumOK(h), refOnesSum(h) == 0xffff; got != want {
			t.Fatalf("%x: ipv4HeaderSumOK %v, reference %v", h, got, want)
		}
	}
}

// TestOnesSumLargeAllOnes drives the vector lanes to their largest sums
// (every word 0xffff) over several 1 MiB chunks.
func TestOnesSumLargeAllOnes(t *testing.T) {
	buf := make([]byte, 3<<20+100)
	for i := range buf {
		buf[i] = 0xff
	}
	saved := vectorEnabled()
	defer setAVX2(saved)
	setAVX2(false)
	scalar := onesSum(buf)
	setAVX2(saved)
	if got := onesSum(buf); got != scalar || scalar != 0xffff {
		t.Fatalf("vector %#04x, scalar %#04x, want 0xffff", got, scalar)
	}
}

func BenchmarkOnesSum1448(b *testing.B) {
	buf := make([]byte, 1448)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	b.SetBytes(int64(len(buf)))
	var s uint16
	for i := 0; i < b.N; i++ {
		s += onesSum(buf)
	}
	sink = s
}

var sink uint16

// TestTCPChecksumAnyHeaderLength checks tcpChecksum against a checksum
// computed the textbook way, with and without IPv4 options (the 20-byte
// header takes the one-pass path over addresses and segment).
func TestTCPChecksumAnyHeaderLength(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for i := 0; i < 5000; i++ {
		ihl := 20
		if i%2 == 1 {
			ihl += 4 * (1 + rng.IntN(10))
		}
		segLen := 20 + rng.IntN(2000)
		pkt := make([]byte, ihl+segLen)
		for j := range pkt {
			pkt[j] = byte(rng.Uint32())
		}
		pkt[0] = 0x40 | byte(ihl/4)
		seg := pkt[ihl:]
		seg[16], seg[17] = 0, 0
		pseudo := append(append([]byte(nil), pkt[12:20]...), 0, ipProtoTCP, byte(segLen>>8), byte(segLen))
		ps := refOnesSum(pseudo)
		ck := ^uint16(addOnes(ps, refOnesSum(seg)))
		seg[16], seg[17] = byte(ck>>8), byte(ck)
		if got := tcpChecksum(pkt, ihl); got != checksumGood {
			t.Fatalf("ihl %d, segment %d bytes: %v, want good", ihl, segLen, got)
		}
		k := ihl + rng.IntN(segLen)
		if k == ihl+16 || k == ihl+17 {
			k = ihl + 18
		}
		pkt[k] ^= byte(1 + rng.IntN(255))
		want := checksumBad
		if ck == 0 || ck == ps || ck == ^ps {
			want = checksumOffloadLike // what the field holds decides
		}
		if got := tcpChecksum(pkt, ihl); got != want {
			t.Fatalf("ihl %d, segment %d bytes, byte %d changed: %v, want %v", ihl, segLen, k-ihl, got, want)
		}
		seg[16], seg[17] = byte(ps>>8), byte(ps)
		if got := tcpChecksum(pkt, ihl); got != checksumOffloadLike {
			t.Fatalf("ihl %d: pseudo-header sum in the field: %v, want offload-like", ihl, got)
		}
	}
}

// FuzzOnesSum checks the vector sum against the reference on arbitrary
// bytes at an arbitrary alignment.
func FuzzOnesSum(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, shift uint8) {
		buf := make([]byte, len(data)+64)
		off := int(shift % 64)
		b := buf[off : off+len(data)]
		copy(b, data)
		got, want := onesSum(b), refOnesSum(b)
		if got != want && !(got == 0xffff && want == 0) {
			t.Fatalf("len %d off %d: onesSum %#04x, reference %#04x", len(b), off, got, want)
		}
	})
}

// BenchmarkOnesSum1448Scalar measures the loop used where there is no
// vector one.
func BenchmarkOnesSum1448Scalar(b *testing.B) {
	buf := make([]byte, 1448)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	b.SetBytes(int64(len(buf)))
	var s uint16
	for i := 0; i < b.N; i++ {
		s += scalarOnesSum(buf, 0)
	}
	sink = s
}
