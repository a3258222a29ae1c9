package stopbit_test

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/tickwire/tickwire/fast/internal/stopbit"
)

// token is one stop-bit token as a byte-by-byte reading finds it.
type token struct {
	value uint64
	end   int
	len   int
	raw   uint64 // b[end-7:end+1] as a little-endian word, zeros before b[0]
}

// reference reads the tokens of b from off on the plain way and applies
// Scan's stopping rules: blocks of 64 bytes from off, a new block only while
// at most MaxTokens-64 tokens are held, a stop before a token over 8 bytes.
func reference(b []byte, off int) (toks []token, full bool) {
	if off < 0 {
		return nil, false
	}
	start := off
	for blk := off; blk < len(b); blk += 64 {
		if len(toks) > stopbit.MaxTokens-64 {
			return toks, true
		}
		for e := blk; e < min(blk+64, len(b)); e++ {
			if b[e] < 0x80 {
				continue
			}
			if e-start+1 > stopbit.MaxLen {
				return toks, false
			}
			var v uint64
			for _, c := range b[start : e+1] {
				v = v<<7 | uint64(c&0x7f)
			}
			var raw uint64
			for i := e - 7; i <= e; i++ {
				if i >= 0 {
					raw |= uint64(b[i]) << (8 * (i - (e - 7)))
				}
			}
			toks = append(toks, token{v, e, e - start + 1, raw})
			start = e + 1
		}
	}
	return toks, false
}

// check scans b from off with the kernel (when the CPU has it) and with the
// portable loop and compares both with reference.
func check(t *testing.T, b []byte, off int) {
	t.Helper()
	want, wantFull := reference(b, off)
	for _, kernel := range []bool{true, false} {
		restore := stopbit.SetKernel(kernel)
		var toks stopbit.Tokens
		// Stale entries must not matter: fill the batch with junk first.
		for i := range toks.Value {
			toks.Value[i], toks.End[i], toks.Len[i], toks.Raw[i] = ^uint64(0), ^uint32(0), 0xff, ^uint64(0)
		}
		n, full := stopbit.Scan(b, off, &toks)
		restore()
		if n != len(want) || full != wantFull {
			t.Fatalf("kernel=%v off=%d % x: %d tokens full=%v, want %d full=%v", kernel, off, b, n, full, len(want), wantFull)
		}
		for i, w := range want {
			got := token{toks.Value[i], int(toks.End[i]), int(toks.Len[i]), toks.Raw[i]}
			if got != w {
				t.Fatalf("kernel=%v off=%d % x: token %d = %+v, want %+v", kernel, off, b, i, got, w)
			}
		}
	}
}

// randomStream returns n bytes of tokens of random lengths (1 to 10 bytes,
// mostly short), the stop bit on each token's last byte.
func randomStream(r *rand.Rand, n int) []byte {
	return stream(r, n, func() int {
		l := 1 + r.IntN(4)
		if r.IntN(8) == 0 {
			l = 1 + r.IntN(10)
		}
		return l
	})
}

// stream returns n bytes of tokens of random bytes whose lengths tokenLen
// chooses, the stop bit on each token's last byte.
func stream(r *rand.Rand, n int, tokenLen func() int) []byte {
	b := make([]byte, 0, n+10)
	for len(b) < n {
		l := tokenLen()
		for i := range l {
			c := byte(r.IntN(0x80))
			if i == l-1 {
				c |= 0x80
			}
			b = append(b, c)
		}
	}
	return b[:n]
}

// runScanners runs bench as sub-benchmarks "Kernel" (with the kernel on,
// where the CPU has it) and "Go".
func runScanners(b *testing.B, bench func(b *testing.B)) {
	for _, kernel := range []bool{true, false} {
		name := "Go"
		if kernel {
			name = "Kernel"
		}
		b.Run(name, func(b *testing.B) {
			defer stopbit.SetKernel(kernel)()
			bench(b)
		})
	}
}

func TestScan(t *testing.T) {
	if !stopbit.Accelerated {
		t.Log("no kernel on this CPU: only the portable loop is tested")
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		n := r.IntN(700)
		if r.IntN(4) == 0 {
			n = r.IntN(70)
		}
		b := randomStream(r, n)
		check(t, b, 0)
		if n > 0 {
			check(t, b, r.IntN(n))
		}
	}
}

func TestScanEdges(t *testing.T) {
	all := bytes.Repeat([]byte{0x80}, 600) // a token per byte: the batch fills
	check(t, all, 0)
	check(t, all, 5)
	check(t, bytes.Repeat([]byte{0xff}, 40), 0)
	check(t, make([]byte, 100), 0) // no stop bit: nothing
	eight := []byte{0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0xff}
	check(t, eight, 0)
	check(t, append([]byte{1}, eight...), 0) // 9 bytes: stops before it
	check(t, append(bytes.Repeat([]byte{0x81}, 40), eight...), 0)
	check(t, append(bytes.Repeat([]byte{0x81}, 40), eight...), 39)
	check(t, nil, 0)
	check(t, []byte{0x80}, 0)
	check(t, []byte{0x80}, 1)
	check(t, []byte{0x80}, -1)
	// Every length and alignment of an 8-byte token around block ends.
	for pre := range 70 {
		b := append(bytes.Repeat([]byte{0x85}, pre), eight...)
		check(t, b, 0)
		check(t, append(b, 0x81, 0x02), 0)
	}
}

// TestScanLongTokens puts tokens of 8 to 17 bytes at every position around
// two block ends, after one-byte tokens, from several start offsets: Scan
// must stop exactly before a long token wherever it starts or ends (in the
// block it starts in or a later one, as the block's first token or not).
func TestScanLongTokens(t *testing.T) {
	for l := 8; l <= 17; l++ {
		long := append(bytes.Repeat([]byte{0x01}, l-1), 0x82)
		for pre := range 140 {
			b := append(bytes.Repeat([]byte{0x81}, pre), long...)
			b = append(b, bytes.Repeat([]byte{0x83}, 70)...)
			for _, off := range []int{0, 1, 7, 8, 30, 63, 64, 65} {
				if off < len(b) {
					check(t, b, off)
				}
			}
		}
	}
}

// TestScanBoundedPastLongToken checks that Scan does not go on through b
// past a long token (the kernel's first pass stops at the end of the block
// where it sees one): a caller scanning again from after each long token
// must not rescan the rest of b every time. The kernel writes a token's End
// in its first pass, so End entries left as they were show where it
// stopped.
func TestScanBoundedPastLongToken(t *testing.T) {
	long := append(bytes.Repeat([]byte{0x01}, 11), 0x82)
	for pre := range 70 {
		b := append(bytes.Repeat([]byte{0x81}, pre), long...)
		b = append(b, bytes.Repeat([]byte{0x83}, 1000)...)
		for _, kernel := range []bool{true, false} {
			restore := stopbit.SetKernel(kernel)
			var toks stopbit.Tokens
			for i := range toks.End {
				toks.End[i] = ^uint32(0)
			}
			n, full := stopbit.Scan(b, 0, &toks)
			restore()
			if n != pre || full {
				t.Fatalf("kernel=%v pre=%d: %d tokens full=%v, want %d, false", kernel, pre, n, full, pre)
			}
			// At most the block holding the long token's eighth byte
			// and the one before: 128 bytes, a token each.
			for i := 128; i < len(toks.End); i++ {
				if toks.End[i] != ^uint32(0) {
					t.Fatalf("kernel=%v pre=%d: End[%d] = %d written: the scan went on past the long token", kernel, pre, i, toks.End[i])
				}
			}
		}
	}
}

func TestScanDoesNotAllocate(t *testing.T) {
	b := randomStream(rand.New(rand.NewPCG(3, 4)), 20)
	var toks stopbit.Tokens
	if a := testing.AllocsPerRun(100, func() { stopbit.Scan(b, 0, &toks) }); a != 0 {
		t.Fatalf("%v allocations per Scan", a)
	}
}

// FuzzScan compares the kernel and the portable loop with the reference on
// any bytes and any start offset.
func FuzzScan(f *testing.F) {
	f.Add([]byte{0x81, 0x02, 0x83}, 0)
	f.Add(bytes.Repeat([]byte{0x80}, 300), 3)
	f.Add(randomStream(rand.New(rand.NewPCG(5, 6)), 100), 7)
	f.Fuzz(func(t *testing.T, b []byte, off int) {
		check(t, b, off)
	})
}

func BenchmarkScan(b *testing.B) {
	buf := randomStream(rand.New(rand.NewPCG(7, 8)), 570)
	var toks stopbit.Tokens
	runScanners(b, func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		for b.Loop() {
			for off := 0; off < len(buf); {
				n, _ := stopbit.Scan(buf, off, &toks)
				if n == 0 {
					break
				}
				off = int(toks.End[n-1]) + 1
			}
		}
	})
}

// BenchmarkScanShort scans 444 bytes of tokens of 1 to 6 bytes (a third of
// them 1 byte, none longer than 8: one Scan call takes them all), the
// shape of an SSE payload, and reports the time per token.
func BenchmarkScanShort(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	buf := stream(r, 444, func() int {
		l := 1 + r.IntN(6)
		if r.IntN(3) == 0 {
			l = 1
		}
		return l
	})
	var toks stopbit.Tokens
	runScanners(b, func(b *testing.B) {
		n, _ := stopbit.Scan(buf, 0, &toks)
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		for b.Loop() {
			stopbit.Scan(buf, 0, &toks)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/token")
	})
}

// TestLayout checks the offsets of Tokens' arrays that scan_amd64.s uses.
func TestLayout(t *testing.T) {
	var toks stopbit.Tokens
	if stopbit.MaxTokens != 512 || unsafe.Offsetof(toks.End) != 4096 || unsafe.Offsetof(toks.Len) != 6144 ||
		unsafe.Offsetof(toks.Raw) != 6656 {
		t.Fatalf("Tokens layout changed (MaxTokens %d, End at %d, Len at %d, Raw at %d): update scan_amd64.s",
			stopbit.MaxTokens, unsafe.Offsetof(toks.End), unsafe.Offsetof(toks.Len), unsafe.Offsetof(toks.Raw))
	}
}
