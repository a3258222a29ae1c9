package fast

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/tickwire/tickwire/internal/shareddata"
)

// refFields converts the values [i, end) into the shape of the vectors'
// decoded.json files: integers as json.Number, decimals as [mantissa,
// exponent], strings as strings, sequences as arrays, groups as objects.
func refFields(m *Message, i, end int) map[string]any {
	out := map[string]any{}
	for ; i < end; i = int(m.Values[i].End) {
		v := &m.Values[i]
		if !v.Present {
			continue
		}
		if v.Kind == KindTemplateRef {
			for k, x := range refFields(m, i+1, int(v.End)) {
				out[k] = x
			}
			continue
		}
		out[m.Field(i).Name] = refValue(m, i)
	}
	return out
}

func refValue(m *Message, i int) any {
	v := &m.Values[i]
	switch v.Kind {
	case KindUint32, KindUint64:
		return json.Number(strconv.FormatUint(v.U, 10))
	case KindInt32, KindInt64:
		return json.Number(strconv.FormatInt(int64(v.U), 10))
	case KindDecimal:
		return []any{json.Number(strconv.FormatInt(int64(v.U), 10)), json.Number(strconv.Itoa(int(v.Exp)))}
	case KindASCII, KindUnicode:
		return string(m.Bytes(i))
	case KindByteVector:
		return hex.EncodeToString(m.Bytes(i))
	case KindGroup:
		return refFields(m, i+1, int(v.End))
	case KindSequence:
		elems := []any{}
		for j := i + 1; j < int(v.End); j = int(m.Values[j].End) {
			elems = append(elems, refFields(m, j+1, int(m.Values[j].End)))
		}
		return elems
	}
	return nil
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func loadShared(t *testing.T, elem ...string) *Templates {
	t.Helper()
	ts, err := LoadTemplatesFile(shareddata.Path(t, elem...))
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

type refMessage struct {
	Offset   int            `json:"offset"`
	Len      int            `json:"len"`
	Template string         `json:"template"`
	Fields   map[string]any `json:"fields"`
}

// checkRawVector decodes concatenated messages and compares each with the
// reference decoding.
func checkRawVector(t *testing.T, dir, templates, messages string) {
	ts := loadShared(t, "fast-vectors", dir, templates)
	data, err := os.ReadFile(shareddata.Path(t, "fast-vectors", dir, messages))
	if err != nil {
		t.Fatal(err)
	}
	var want []refMessage
	readJSON(t, shareddata.Path(t, "fast-vectors", dir, "decoded.json"), &want)
	d, err := NewDecoder(ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	var m Message
	off := 0
	for i, w := range want {
		n, err := d.Decode(data[off:], &m)
		if err != nil {
			t.Fatalf("message %d at %d: %v", i, off, err)
		}
		if off != w.Offset || n != w.Len || m.Template.Name != w.Template {
			t.Errorf("message %d: offset %d len %d template %s; want %d %d %s", i, off, n, m.Template.Name, w.Offset, w.Len, w.Template)
		}
		if got := refFields(&m, 0, len(m.Values)); !reflect.DeepEqual(got, w.Fields) {
			t.Errorf("message %d:\n got %v\nwant %v", i, got, w.Fields)
		}
		off += n
	}
	if off != len(data) {
		t.Errorf("consumed %d of %d bytes", off, len(data))
	}
}

func TestVectorFPLSpecExample(t *testing.T) {
	checkRawVector(t, "openfast_fpl", "FASTTestTemplate.xml", "messages.fast")
}

func TestVectorCME(t *testing.T) {
	checkRawVector(t, "openfast_cme", "templates.xml", "messages.fast")
	// The upstream assertion, checked directly.
	ts := loadShared(t, "fast-vectors", "openfast_cme", "templates.xml")
	data, _ := os.ReadFile(shareddata.Path(t, "fast-vectors", "openfast_cme", "messages.fast"))
	d, _ := NewDecoder(ts, nil)
	var m Message
	if _, err := d.Decode(data, &m); err != nil {
		t.Fatal(err)
	}
	first, _ := m.Children(m.Index("MDEntries")) // the first element
	for j := first + 1; j < int(m.Values[first].End); j = int(m.Values[j].End) {
		if v := &m.Values[j]; m.Field(j).Name == "NetChgPrevDay" {
			if mant, exp := v.Decimal(); mant != -5025 || exp != 0 {
				t.Errorf("NetChgPrevDay = %d e%d, want -5025", mant, exp)
			}
			return
		}
	}
	t.Error("NetChgPrevDay not found")
}

func TestVectorFastfixBench(t *testing.T) {
	checkRawVector(t, "fastfix_bench", "templates.xml", "increfresh.bin")
}

type specCase struct {
	Name string `json:"name"`
	Msgs []struct {
		Template string          `json:"template"`
		Raw      string          `json:"raw"`
		Want     json.RawMessage `json:"fastref_decoded"`
		RsValue  string          `json:"value"`
	} `json:"msgs"`
}

// TestVectorRsFastlibSpec runs the FAST specification's appendix examples
// and per-operator cases; each case is one stream with its own dictionary.
func TestVectorRsFastlibSpec(t *testing.T) {
	var cases []specCase
	readJSON(t, shareddata.Path(t, "fast-vectors", "rs-fastlib", "spec_vectors.json"), &cases)
	var sets []*Templates
	for _, f := range []string{"src_tests_templates_spec.xml", "src_tests_templates_spec2.xml"} {
		sets = append(sets, loadShared(t, "fast-vectors", "rs-fastlib", f))
	}
	msgs := 0
	for _, c := range cases {
		var ts *Templates
		for _, s := range sets {
			if _, ok := s.ByName(c.Msgs[0].Template); ok {
				ts = s
			}
		}
		if ts == nil {
			t.Errorf("%s: template %s not found", c.Name, c.Msgs[0].Template)
			continue
		}
		d, err := NewDecoder(ts, nil)
		if err != nil {
			t.Fatal(err)
		}
		var m Message
		for i, msg := range c.Msgs {
			raw, _ := hex.DecodeString(strings.ReplaceAll(msg.Raw, " ", ""))
			n, err := d.Decode(raw, &m)
			if err != nil || n != len(raw) || m.Template.Name != msg.Template {
				t.Errorf("%s #%d: n=%d err=%v template=%v", c.Name, i, n, err, m.Template)
				continue
			}
			var want any
			dec := json.NewDecoder(bytes.NewReader(msg.Want))
			dec.UseNumber()
			dec.Decode(&want)
			got := any("ABSENT")
			if i := m.Index("Value"); i >= 0 && m.Values[i].Present {
				got = refValue(&m, i)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s #%d (%s): got %v, want %v", c.Name, i, msg.Raw, got, want)
			}
			msgs++
		}
	}
	if msgs != 61 {
		t.Errorf("checked %d messages, want 61", msgs)
	}
}

// readLen32LE splits mFAST's benchmark file format: records of a 4-byte
// little-endian length and one message.
func readLen32LE(t testing.TB, data []byte) [][]byte {
	var recs [][]byte
	for off := 0; off < len(data); {
		if len(data)-off < 4 {
			t.Fatalf("truncated length at %d", off)
		}
		n := int(binary.LittleEndian.Uint32(data[off:]))
		off += 4
		if n > len(data)-off {
			t.Fatalf("record at %d runs past the end", off)
		}
		recs = append(recs, data[off:off+n])
		off += n
	}
	return recs
}

type mfastSummary struct {
	Messages    int            `json:"messages"`
	Bytes       int            `json:"bytes"`
	PerTemplate map[string]int `json:"per_template"`
	First       []struct {
		N        int            `json:"n"`
		Len      int            `json:"len"`
		Template string         `json:"template"`
		Fields   map[string]any `json:"fields"`
	} `json:"first"`
}

func TestVectorMFastComplex30000(t *testing.T) {
	ts := loadShared(t, "fast-vectors", "mfast_perf", "example.xml")
	data, err := os.ReadFile(shareddata.Path(t, "fast-vectors", "mfast_perf", "complex30000.dat"))
	if err != nil {
		t.Fatal(err)
	}
	var sum mfastSummary
	readJSON(t, shareddata.Path(t, "fast-vectors", "mfast_perf", "decoded_summary.json"), &sum)
	recs := readLen32LE(t, data)
	if len(recs) != sum.Messages || len(data) != sum.Bytes {
		t.Fatalf("%d records in %d bytes; want %d in %d", len(recs), len(data), sum.Messages, sum.Bytes)
	}
	d, err := NewDecoder(ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	var m Message
	counts := map[string]int{}
	for i, rec := range recs {
		n, err := d.Decode(rec, &m)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if n != len(rec) {
			t.Fatalf("record %d: consumed %d of %d bytes", i, n, len(rec))
		}
		counts[m.Template.Name]++
		if i < len(sum.First) {
			w := sum.First[i]
			if w.Len != len(rec) || w.Template != m.Template.Name {
				t.Errorf("record %d: len %d template %s; want %d %s", i, len(rec), m.Template.Name, w.Len, w.Template)
			}
			if got := refFields(&m, 0, len(m.Values)); !reflect.DeepEqual(got, w.Fields) {
				t.Errorf("record %d:\n got %v\nwant %v", i, got, w.Fields)
			}
		}
	}
	if !reflect.DeepEqual(counts, sum.PerTemplate) {
		t.Errorf("per template %v, want %v", counts, sum.PerTemplate)
	}
}

// TestVectorGoFAST decodes the MOEX-style capture of goFAST: each message
// follows a 4-byte sequence number. There are no expected values beyond
// "every message decodes and the file is consumed exactly".
func TestVectorGoFAST(t *testing.T) {
	ts := loadShared(t, "fast-vectors", "goFAST", "test.xml")
	data, err := os.ReadFile(shareddata.Path(t, "fast-vectors", "goFAST", "data.dat"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDecoder(ts, &DecoderOptions{ResetEachMessage: true})
	if err != nil {
		t.Fatal(err)
	}
	var m Message
	count, checked := 0, 0
	for off := 0; off < len(data); count++ {
		seq := binary.LittleEndian.Uint32(data[off:])
		off += 4
		n, err := d.Decode(data[off:], &m)
		if err != nil {
			t.Fatalf("message %d at %d: %v", count, off, err)
		}
		// MOEX puts the message's MsgSeqNum in the packet header: an
		// independent check of every decoded message.
		if v := m.Get("MsgSeqNum"); v != nil {
			if v.U != uint64(seq) {
				t.Fatalf("message %d: MsgSeqNum %d, packet header says %d", count, v.U, seq)
			}
			checked++
		}
		off += n
	}
	if count == 0 || checked == 0 {
		t.Fatalf("%d messages, %d with MsgSeqNum", count, checked)
	}
	t.Logf("%d messages, %d MsgSeqNum checked against the packet header", count, checked)
}

func TestVectorQuickFASTTemplatesCompile(t *testing.T) {
	dir := shareddata.Path(t, "fast-vectors", "quickfast")
	files, _ := filepath.Glob(filepath.Join(dir, "*.xml"))
	for _, f := range files {
		ts, err := LoadTemplatesFile(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if _, err := NewDecoder(ts, nil); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestVectorsReEncode decodes each shared stream, encodes the messages again
// and decodes that: the values must survive (the bytes may differ where the
// original encoder chose differently).
func TestVectorsReEncode(t *testing.T) {
	for _, v := range []struct{ dir, templates, messages string }{
		{"openfast_fpl", "FASTTestTemplate.xml", "messages.fast"},
		{"openfast_cme", "templates.xml", "messages.fast"},
		{"fastfix_bench", "templates.xml", "increfresh.bin"},
	} {
		ts := loadShared(t, "fast-vectors", v.dir, v.templates)
		data, err := os.ReadFile(shareddata.Path(t, "fast-vectors", v.dir, v.messages))
		if err != nil {
			t.Fatal(err)
		}
		d, _ := NewDecoder(ts, nil)
		enc, _ := NewEncoder(ts, nil)
		var m Message
		var out []byte
		var want []string
		for off := 0; off < len(data); {
			n, err := d.Decode(data[off:], &m)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, string(m.AppendJSON(nil)))
			if out, err = enc.Encode(out, &m); err != nil {
				t.Fatalf("%s: encode: %v", v.dir, err)
			}
			off += n
		}
		d2, _ := NewDecoder(ts, nil)
		for i, off := 0, 0; off < len(out); i++ {
			n, err := d2.Decode(out[off:], &m)
			if err != nil {
				t.Fatalf("%s: re-encoded message %d: %v", v.dir, i, err)
			}
			if got := string(m.AppendJSON(nil)); got != want[i] {
				t.Errorf("%s: message %d:\n got %s\nwant %s", v.dir, i, got, want[i])
			}
			off += n
		}
		t.Logf("%s: %d bytes, re-encoded %d", v.dir, len(data), len(out))
	}
}

// TestSharedTemplatesRoundTrip encodes random messages with every shared
// template file (QuickFAST's edge-value templates, rs-fastlib's CQG
// templates, MOEX, CME...) and decodes them back.
func TestSharedTemplatesRoundTrip(t *testing.T) {
	dir := shareddata.Path(t, "fast-vectors")
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.xml"))
	r := rand.New(rand.NewPCG(11, 12))
	for _, f := range files {
		if strings.HasSuffix(f, "data.xml") {
			continue
		}
		ts, err := LoadTemplatesFile(f)
		if err != nil {
			t.Fatal(err)
		}
		tails := map[*Field]int{}
		var walk func(fs []*Field)
		walk = func(fs []*Field) {
			for _, fd := range fs {
				if fd.Op.Kind == OpTail {
					n := 8
					if in, err := parseInitial(fd.Kind, fd.Op.Value); err == nil && len(in.b) > n {
						n = len(in.b)
					}
					tails[fd] = n
				}
				walk(fd.Fields)
			}
		}
		var ids []*Template
		for _, tm := range ts.List {
			walk(tm.Fields)
			if tm.HasID && !hasDynamicRef(tm.Fields) {
				ids = append(ids, tm)
			}
		}
		enc, err := NewEncoder(ts, nil)
		if err != nil {
			t.Fatal(err)
		}
		dec, _ := NewDecoder(ts, nil)
		clear(lastInt)
		clear(lastBytes)
		clear(lastDec)
		var in, out Message
		skipped := 0
		for k := 0; k < 200 && len(ids) > 0; k++ {
			genMessage(r, ts, ids[r.IntN(len(ids))], &in, tails)
			b, err := enc.Encode(nil, &in)
			if errors.Is(err, ErrNotEncodable) {
				// Shared keys can make a value unencodable (a delta
				// on an entry another template left empty: D6 for a
				// decoder): start both sides afresh.
				skipped++
				enc.Reset()
				dec.Reset()
				continue
			}
			if err != nil {
				t.Fatalf("%s: %s: encode: %v", f, in.Template.Name, err)
			}
			if n, err := dec.Decode(b, &out); err != nil || n != len(b) {
				t.Fatalf("%s: %s: decode: %d of %d, %v", f, in.Template.Name, n, len(b), err)
			}
			if !sameValues(t, &in, &out) {
				t.Fatalf("%s: %s differs", f, in.Template.Name)
			}
		}
		if skipped > 20 {
			t.Errorf("%s: %d of 200 messages not encodable", f, skipped)
		}
	}
}

func hasDynamicRef(fs []*Field) bool {
	for _, f := range fs {
		if (f.Kind == KindTemplateRef && f.Ref == "") || hasDynamicRef(f.Fields) {
			return true
		}
	}
	return false
}
