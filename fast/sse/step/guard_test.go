package step

import (
	"testing"

	"github.com/tickwire/tickwire/internal/guardmem"
)

// TestChecksumStaysInBuffer sums buffers flush against inaccessible pages,
// both ends, every length up to 300 bytes, with the vector loop and without:
// a load outside the buffer (the vector loop's last block is the 32 bytes
// ending at the buffer's end) crashes the test.
func TestChecksumStaysInBuffer(t *testing.T) {
	for _, atEnd := range []bool{true, false} {
		page := guardmem.Bytes(t, guardmem.MaxLen, atEnd)
		for n := 0; n <= 300; n++ {
			b := guardmem.Flush(page, n, atEnd)
			for i := range b {
				b[i] = byte(i*7 + n)
			}
			checkChecksum(t, b)
		}
	}
}
