package stopbit_test

import (
	"math/rand/v2"
	"testing"

	"github.com/tickwire/tickwire/internal/guardmem"
)

// TestScanStaysInBuffer runs Scan (the kernel, where the CPU has it, and the
// portable loop) on buffers flush against inaccessible pages, both ends,
// every length up to 300 bytes and a few start offsets: a load outside the
// buffer crashes the test.
func TestScanStaysInBuffer(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, atEnd := range []bool{true, false} {
		page := guardmem.Bytes(t, guardmem.MaxLen, atEnd)
		for n := 1; n <= 300; n++ {
			b := guardmem.Flush(page, n, atEnd)
			copy(b, randomStream(r, n))
			for _, off := range []int{0, 1, n / 2, n - 1} {
				check(t, b, off)
			}
			// All stop bits, and none (one long token).
			for i := range b {
				b[i] = 0x80 | byte(i)
			}
			check(t, b, 0)
			for i := range b {
				b[i] = byte(i) & 0x7f
			}
			check(t, b, 0)
		}
	}
}
