package fast

import (
	"testing"

	"github.com/tickwire/tickwire/internal/guardmem"
)

// TestDecodeStaysInBuffer decodes mFAST's complex30000 messages, and every
// prefix of the first ones, from buffers flush against inaccessible pages
// (at either end), with the loop the package runs (the assembly loop on
// amd64 with BMI2): a load outside the message crashes the test. Each
// message must decode to what it decodes to from ordinary memory, and each
// prefix must be short.
func TestDecodeStaysInBuffer(t *testing.T) {
	ts, recs, _ := loadComplex30000(t)
	plain, guarded := mustNew(t, ts), mustNew(t, ts)
	end, start := guardmem.Bytes(t, guardmem.MaxLen, true), guardmem.Bytes(t, guardmem.MaxLen, false)
	var want, got Message
	for i, rec := range recs {
		if len(rec) > guardmem.MaxLen {
			t.Fatalf("message %d: %d bytes, longer than a guarded buffer", i, len(rec))
		}
		if i < 300 {
			// Prefixes first: a short message leaves the dictionaries
			// as they were.
			for n := range len(rec) {
				b := guardmem.Flush(end, n, true)
				copy(b, rec)
				if _, err := guarded.Decode(b, &got); Code(err) != "SHORT" {
					t.Fatalf("message %d cut to %d bytes: %v, want SHORT", i, n, err)
				}
			}
		}
		b := guardmem.Flush(start, len(rec), false)
		if i%2 == 0 {
			b = guardmem.Flush(end, len(rec), true)
		}
		copy(b, rec)
		wn, werr := plain.Decode(rec, &want)
		gn, gerr := guarded.Decode(b, &got)
		if werr != nil || gerr != nil || wn != gn || len(want.Values) != len(got.Values) {
			t.Fatalf("message %d: %d bytes, %v from the heap; %d bytes, %v guarded", i, wn, werr, gn, gerr)
		}
		for j := range want.Values {
			if want.Values[j] != got.Values[j] {
				t.Fatalf("message %d value %d: %+v guarded, %+v from the heap", i, j, got.Values[j], want.Values[j])
			}
		}
	}
}
