package fast

import (
	"os"
	"testing"

	"github.com/tickwire/tickwire/internal/shareddata"
)

func loadComplex30000(tb testing.TB) (*Templates, [][]byte, int) {
	tb.Helper()
	ts, err := LoadTemplatesFile(shareddata.Path(tb, "fast-vectors", "mfast_perf", "example.xml"))
	if err != nil {
		tb.Fatal(err)
	}
	data, err := os.ReadFile(shareddata.Path(tb, "fast-vectors", "mfast_perf", "complex30000.dat"))
	if err != nil {
		tb.Fatal(err)
	}
	recs := readLen32LE(tb, data)
	size := 0
	for _, r := range recs {
		size += len(r)
	}
	return ts, recs, size
}

// BenchmarkDecodeComplex30000 decodes mFAST's benchmark file with the
// generic decoder; one op is one message.
func BenchmarkDecodeComplex30000(b *testing.B) {
	ts, recs, size := loadComplex30000(b)
	d, err := NewDecoder(ts, nil)
	if err != nil {
		b.Fatal(err)
	}
	var m Message
	b.SetBytes(int64(size / len(recs)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := i % len(recs)
		if k == 0 {
			d.Reset()
		}
		if _, err := d.Decode(recs[k], &m); err != nil {
			b.Fatal(err)
		}
	}
}

func TestDecodeComplex30000DoesNotAllocate(t *testing.T) {
	ts, recs, _ := loadComplex30000(t)
	d, err := NewDecoder(ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	var m Message
	for _, r := range recs { // warm up: grow the message and dictionary storage
		if _, err := d.Decode(r, &m); err != nil {
			t.Fatal(err)
		}
	}
	d.Reset()
	i := 0
	allocs := testing.AllocsPerRun(len(recs)-1, func() {
		if _, err := d.Decode(recs[i], &m); err != nil {
			t.Fatal(err)
		}
		i++
	})
	if allocs != 0 {
		t.Errorf("generic decode allocates %v times per message", allocs)
	}
}
