package fast

import (
	"os"
	"testing"

	"github.com/tickwire/tickwire/internal/cputime"
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
	cpu := cputime.Process()
	for i := 0; i < b.N; i++ {
		k := i % len(recs)
		if k == 0 {
			d.Reset()
		}
		if _, err := d.Decode(recs[k], &m); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
}

// reportCPU adds CPU nanoseconds per op: on a machine shared with other
// work, wall-clock ns/op includes time spent waiting for a core, CPU time
// does not.
func reportCPU(b *testing.B, start int64) {
	if start > 0 {
		b.ReportMetric(float64(cputime.Process()-start)/float64(b.N), "cpu-ns/op")
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

// BenchmarkEncodeComplex30000 re-encodes the messages of mFAST's benchmark
// file; one op is one message.
func BenchmarkEncodeComplex30000(b *testing.B) {
	benchmarkEncodeComplex30000(b, false)
}

// BenchmarkEncodeComplex30000Built encodes the messages of mFAST's
// benchmark file rebuilt with the Add methods, as a producer builds them;
// one op is one message.
func BenchmarkEncodeComplex30000Built(b *testing.B) {
	benchmarkEncodeComplex30000(b, true)
}

// benchmarkEncodeComplex30000 encodes the decoded messages of mFAST's
// benchmark file, or, with built, the same rebuilt with the Add methods.
func benchmarkEncodeComplex30000(b *testing.B, built bool) {
	ts, recs, size := loadComplex30000(b)
	d, err := NewDecoder(ts, nil)
	if err != nil {
		b.Fatal(err)
	}
	msgs := make([]Message, len(recs))
	var dm Message
	for i, r := range recs {
		m := &msgs[i]
		if built {
			m = &dm
		}
		if _, err := d.Decode(r, m); err != nil {
			b.Fatal(err)
		}
		if built {
			rebuild(&msgs[i], &dm)
		}
	}
	enc, err := NewEncoder(ts, nil)
	if err != nil {
		b.Fatal(err)
	}
	out := make([]byte, 0, 4096)
	b.SetBytes(int64(size / len(recs)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cputime.Process()
	for i := 0; i < b.N; i++ {
		k := i % len(msgs)
		if k == 0 {
			enc.Reset()
		}
		if out, err = enc.Encode(out[:0], &msgs[k]); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
}

// rebuild fills m with the values of the decoded message dm, appended with
// the Add methods.
func rebuild(m, dm *Message) {
	m.SetTemplate(dm.Template)
	for i := range dm.Values {
		v := &dm.Values[i]
		switch {
		case v.Elem:
			m.AddElement()
		case !v.Present:
			m.AddAbsent()
		case v.Kind == KindGroup:
			m.AddGroup()
		case v.Kind == KindSequence:
			m.AddSequence(v.Len())
		case v.Kind == KindTemplateRef:
			m.AddTemplateRef(uint32(v.U))
		case v.Kind == KindDecimal:
			m.AddDecimal(v.Decimal())
		case v.Kind == KindInt32 || v.Kind == KindInt64:
			m.AddInt(v.Int())
		case v.Kind.IsBytes():
			m.AddBytes(dm.Bytes(i))
		default:
			m.AddUint(v.Uint())
		}
	}
}

// TestEncodeComplex30000 re-encodes every message of mFAST's file: the
// encoder's minimal presence maps and operator choices reproduce the
// original bytes exactly, and encoding allocates nothing.
func TestEncodeComplex30000(t *testing.T) {
	ts, recs, _ := loadComplex30000(t)
	d, err := NewDecoder(ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := NewEncoder(ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	var m Message
	var out []byte
	same := 0
	for i, r := range recs {
		if _, err := d.Decode(r, &m); err != nil {
			t.Fatal(err)
		}
		if out, err = enc.Encode(out[:0], &m); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if string(out) == string(r) {
			same++
		}
	}
	if same != len(recs) {
		t.Errorf("%d of %d records re-encode to the same bytes", same, len(recs))
	}
	allocs := testing.AllocsPerRun(100, func() {
		out, _ = enc.Encode(out[:0], &m)
	})
	if allocs != 0 {
		t.Errorf("Encode allocates %v times per message", allocs)
	}
}

// BenchmarkReadUint32 measures the primitive that most fields end in: three
// values of 1, 2 and 3 bytes per op. Its figure calibrates the others on a
// given machine.
func BenchmarkReadUint32(b *testing.B) {
	buf := AppendUint32(AppendUint32(AppendUint32(nil, 5), 300), 40000)
	var sum uint32
	b.ReportAllocs()
	cpu := cputime.Process()
	for i := 0; i < b.N; i++ {
		v1, off, _ := ReadUint32(buf, 0)
		v2, off, _ := ReadUint32(buf, off)
		v3, _, _ := ReadUint32(buf, off)
		sum += v1 + v2 + v3
	}
	reportCPU(b, cpu)
	if sum == 1 {
		b.Log(sum)
	}
}
