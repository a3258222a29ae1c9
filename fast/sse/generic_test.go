package sse

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/tickwire/tickwire/fast"
	"github.com/tickwire/tickwire/fast/internal/generictest"
)

// The generated (typed) decoder and package fast's interpreting decoder must
// agree on every input, as mFAST tests its two decoders against each other.

// canonical renders a typed record as "Name=value ..." with absent optional
// fields left out and strings without their NUL padding.
func canonical(tid uint32, rec any) string {
	v := reflect.ValueOf(rec).Elem()
	ty := v.Type()
	var parts []string
	for i := range ty.NumField() {
		name := ty.Field(i).Name
		if strings.HasPrefix(name, "Has") {
			continue
		}
		if h := v.FieldByName("Has" + name); h.IsValid() && !h.Bool() {
			continue
		}
		f := v.Field(i)
		var s string
		switch f.Kind() {
		case reflect.Array:
			b := make([]byte, f.Len())
			reflect.Copy(reflect.ValueOf(b), f)
			s = string(bytes.TrimRight(b, "\x00"))
		case reflect.Uint8:
			s = strings.TrimRight(string([]byte{byte(f.Uint())}), "\x00")
		case reflect.Int32, reflect.Int64:
			s = fmt.Sprint(f.Int())
		default:
			s = fmt.Sprint(f.Uint())
		}
		if k := wireKinds[name]; f.Kind() == reflect.Int64 && (k == fast.KindUint32 || k == fast.KindUint64) {
			s = fmt.Sprint(uint64(f.Int())) // e.g. Balance: uInt64 on the wire, Qty in Go
		}
		parts = append(parts, name+"="+s)
	}
	return fmt.Sprintf("%d{%s}", tid, strings.Join(parts, " "))
}

// wireKinds maps the SSE field names to their FAST types.
var wireKinds = func() map[string]fast.Kind {
	ts, err := fast.ParseTemplates(TemplatesXML)
	if err != nil {
		panic(err)
	}
	m := map[string]fast.Kind{}
	for _, t := range ts.List {
		for _, f := range t.Fields {
			m[f.Name] = f.Kind
		}
	}
	return m
}()

type canonCollector struct{ out []string }

func (c *canonCollector) OnTrade(t *Trade) { c.out = append(c.out, canonical(TradeTemplateID, t)) }
func (c *canonCollector) OnOrder(o *Order) { c.out = append(c.out, canonical(OrderTemplateID, o)) }

// decodeBoth decodes payload as one STEP message's records (fresh
// dictionaries) with both decoders and reports a disagreement.
func decodeBoth(t testing.TB, gd *fast.Decoder, payload []byte) {
	t.Helper()
	var typed canonCollector
	var dec Decoder
	var typedErr error
	failAt := len(payload)
	for off := 0; off < len(payload); {
		next, err := dec.DecodeRecord(payload, off, &typed)
		if err != nil {
			typedErr, failAt = err, next
			break
		}
		off = next
	}

	// DecodeRecords (the token path where stopbit has a kernel) must agree
	// with DecodeRecord record by record, the failing record's offset too.
	var batch canonCollector
	var bdec Decoder
	reached, batchErr := bdec.DecodeRecords(payload, &batch)
	if fmt.Sprint(batch.out) != fmt.Sprint(typed.out) || fmt.Sprint(batchErr) != fmt.Sprint(typedErr) || reached != failAt {
		t.Fatalf("DecodeRecords differs from DecodeRecord on % x\nbatch  %v (err %v, offset %d)\nsingle %v (err %v, offset %d)", payload, batch.out, batchErr, reached, typed.out, typedErr, failAt)
	}

	generic, genericErr := generictest.Records(gd, payload)

	// The typed structs hold strings in fixed arrays and some integers in
	// narrower Go types: a longer string is a limit error, a value out of
	// the Go type's range a range error, in the typed decoder only. Compare
	// the records before that one (the generic decoder may fail later in
	// the same record, or not at all).
	if errors.Is(typedErr, fast.ErrLimit) || errors.Is(typedErr, fast.ErrRange) {
		if len(generic) < len(typed.out) {
			t.Fatalf("typed decoded %d records before its limit error, generic only %d (%v)", len(typed.out), len(generic), genericErr)
		}
		generic = generic[:len(typed.out)]
		genericErr = typedErr
	}
	if fmt.Sprint(typed.out) != fmt.Sprint(generic) {
		t.Fatalf("records differ on % x\ntyped   %v (err %v)\ngeneric %v (err %v)", payload, typed.out, typedErr, generic, genericErr)
	}
	if (typedErr == nil) != (genericErr == nil) || fast.Code(typedErr) != fast.Code(genericErr) {
		t.Fatalf("errors differ on % x\ntyped   %v\ngeneric %v", payload, typedErr, genericErr)
	}
}

func newGeneric(t testing.TB) *fast.Decoder {
	ts, err := fast.ParseTemplates(TemplatesXML)
	if err != nil {
		t.Fatal(err)
	}
	gd, err := fast.NewDecoder(ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	return gd
}

func TestTypedMatchesGeneric(t *testing.T) {
	gd := newGeneric(t)
	r := rand.New(rand.NewPCG(11, 12))
	var enc Encoder
	mk := newMarket(5)
	for range 500 {
		enc.Reset()
		var payload []byte
		for range 1 + r.IntN(10) {
			var err error
			switch r.IntN(4) {
			case 0:
				tr := edgeTrade(r)
				payload, err = enc.AppendTrade(payload, &tr)
			case 1:
				o := edgeOrder(r)
				payload, err = enc.AppendOrder(payload, &o)
			case 2:
				tr := mk.trade()
				payload, err = enc.AppendTrade(payload, &tr)
			default:
				o := mk.order()
				payload, err = enc.AppendOrder(payload, &o)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		decodeBoth(t, gd, payload)
		// Damaged copies: both decoders must still agree.
		for range 3 {
			bad := bytes.Clone(payload)
			bad[r.IntN(len(bad))] ^= byte(1 << r.IntN(8))
			decodeBoth(t, gd, bad[:r.IntN(len(bad)+1)])
		}
	}
	// A reset record (template id 120) between records.
	tr := mk.trade()
	enc.Reset()
	p, _ := enc.AppendTrade(nil, &tr)
	p = append(p, 0xc0, 0x80|120)
	enc.Reset()
	p, _ = enc.AppendTrade(p, &tr)
	decodeBoth(t, gd, p)
}

// FuzzDecode decodes arbitrary payloads with the generated decoder and with
// package fast's generic decoder: no panic, and the same records and error
// codes from both.
func FuzzDecode(f *testing.F) {
	mk := newMarket(9)
	var enc Encoder
	tr, o := mk.trade(), mk.order()
	p, _ := enc.AppendTrade(nil, &tr)
	p, _ = enc.AppendOrder(p, &o)
	f.Add(p)
	f.Add([]byte{0xc0, 0x19, 0x82})
	gd := newGeneric(f)
	f.Fuzz(func(t *testing.T, payload []byte) {
		decodeBoth(t, gd, payload)
	})
}

// TestOverlongNull pins spec behaviour the typed path inherits from package
// fast's wire primitives: overlong encodings are accepted (FAST 1.1 R-class,
// not fatal), so 00 80 in a nullable field is NULL, i.e. absent.
func TestOverlongNull(t *testing.T) {
	// pmap: TID, TradeIndex, SecurityID, TradeBuyNo | BizIndex.
	wire := []byte{0x54, 0x92, 0x19, 0x81, 0x81, '6', '0', '0', '0', '0', '0' | 0x80,
		0x00, 0x80, // TradeBuyNo: overlong NULL
		0x81}
	c := &collect{}
	var dec Decoder
	if _, err := dec.DecodeRecord(wire, 0, c); err != nil {
		t.Fatal(err)
	}
	if c.trades[0].HasTradeBuyNo {
		t.Fatalf("overlong NULL decoded as TradeBuyNo=%d; fast.ReadNullableUint64 must return absent when the value read is 0", c.trades[0].TradeBuyNo)
	}
	decodeBoth(t, newGeneric(t), wire) // the typed and generic decoders agree
}
