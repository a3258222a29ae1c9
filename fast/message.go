package fast

import (
	"strconv"
	"unicode/utf8"
)

// Message is a decoded FAST message, laid out flat so that a reused Message
// allocates nothing once its slices have grown: Values holds every field in
// template order, depth first. A sequence value is followed by its elements,
// each element by its fields; a group value by its fields. Composite values
// (sequence, element, group, dynamic templateRef) record in End the index
// just past their subtree, so a reader can skip them.
//
// The decoder owns nothing in a Message: the caller owns it and passes it to
// every Decode call. Its contents, including byte slices, are valid until the
// next call to Decode (or Reset) with the same Message.
type Message struct {
	// Template is the message's template; nil for a reset message (template
	// id 120) that the template file does not declare.
	Template *Template
	// TemplateID is the template id of the message.
	TemplateID uint32
	// Values are the fields, depth first; see the type doc.
	Values []Value
	// arena holds the bytes of strings and byte vectors decoded from the
	// wire or copied from the dictionary.
	arena []byte
}

// Value is one field of a Message.
type Value struct {
	// Field is the template field; for a sequence element it is the
	// sequence's field and Elem is true.
	Field *Field
	// Kind is Field.Kind (KindGroup for a sequence element).
	Kind Kind
	// Present is false for an absent optional field.
	Present bool
	// Elem marks a sequence element.
	Elem bool
	// Exp is the exponent of a decimal.
	Exp int32
	// U holds an integer: the value of an unsigned kind, the two's-complement
	// bits of a signed kind (see Int), the mantissa bits of a decimal, the
	// template id of a dynamic templateRef, the length of a sequence.
	U uint64
	// B holds the value of a string or byte vector. It aliases storage owned
	// by the Message or the decoder's templates: do not modify it.
	B []byte
	// End is the index in Message.Values just past this value's subtree; for
	// scalars it is the next index.
	End int32
}

// Int returns the value of a signed integer field, or the mantissa of a
// decimal.
func (v *Value) Int() int64 { return int64(v.U) }

// Uint returns the value of an unsigned integer field.
func (v *Value) Uint() uint64 { return v.U }

// Decimal returns the mantissa and exponent of a decimal field: the value is
// mantissa * 10^exponent.
func (v *Value) Decimal() (mantissa int64, exponent int32) { return int64(v.U), v.Exp }

// Len returns the number of elements of a sequence.
func (v *Value) Len() int { return int(v.U) }

// String returns a string field's value. It allocates; use B on hot paths.
func (v *Value) String() string { return string(v.B) }

// Reset empties m, keeping its storage.
func (m *Message) Reset() {
	m.Template = nil
	m.TemplateID = 0
	m.Values = m.Values[:0]
	m.arena = m.arena[:0]
}

// Get returns the first top-level value with the given field name (a static
// templateRef's fields count as top level), or nil.
func (m *Message) Get(name string) *Value {
	for i := 0; i < len(m.Values); i = int(m.Values[i].End) {
		if m.Values[i].Field != nil && m.Values[i].Field.Name == name {
			return &m.Values[i]
		}
	}
	return nil
}

// Children returns the index range [first, end) of the direct children of the
// composite value at index i. Step through them with j = Values[j].End.
func (m *Message) Children(i int) (first, end int) {
	return i + 1, int(m.Values[i].End)
}

// AppendJSON appends m as one JSON object:
//
//	{"template":3201,"name":"Trade","fields":{"Name":value,...}}
//
// Absent optional fields are omitted; integers are JSON numbers (uint64
// exact); decimals are strings holding the exact value ("123.45");
// ascii and unicode strings are JSON strings; byte vectors are lowercase hex
// strings; sequences are arrays of objects; groups are objects; the fields of
// static and dynamic templateRefs are inlined; sequence length fields are not
// printed.
func (m *Message) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"template":`...)
	dst = strconv.AppendUint(dst, uint64(m.TemplateID), 10)
	dst = append(dst, `,"name":`...)
	name := ""
	if m.Template != nil {
		name = m.Template.Name
	} else if m.TemplateID == ResetTemplateID {
		name = "Reset"
	}
	dst = appendJSONString(dst, []byte(name))
	dst = append(dst, `,"fields":{`...)
	dst, _ = m.appendJSONFields(dst, 0, len(m.Values), true)
	return append(dst, "}}"...)
}

// appendJSONFields appends the members of Values[i:end] (without braces).
func (m *Message) appendJSONFields(dst []byte, i, end int, first bool) ([]byte, bool) {
	for ; i < end; i = int(m.Values[i].End) {
		v := &m.Values[i]
		if !v.Present {
			continue
		}
		if v.Kind == KindTemplateRef {
			dst, first = m.appendJSONFields(dst, i+1, int(v.End), first)
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendJSONString(dst, []byte(v.Field.Name))
		dst = append(dst, ':')
		dst = m.appendJSONValue(dst, i)
	}
	return dst, first
}

func (m *Message) appendJSONValue(dst []byte, i int) []byte {
	v := &m.Values[i]
	switch v.Kind {
	case KindUint32, KindUint64:
		return strconv.AppendUint(dst, v.U, 10)
	case KindInt32, KindInt64:
		return strconv.AppendInt(dst, int64(v.U), 10)
	case KindDecimal:
		dst = append(dst, '"')
		dst = AppendDecimal(dst, int64(v.U), v.Exp)
		return append(dst, '"')
	case KindASCII, KindUnicode:
		return appendJSONString(dst, v.B)
	case KindByteVector:
		const hexDigits = "0123456789abcdef"
		dst = append(dst, '"')
		for _, c := range v.B {
			dst = append(dst, hexDigits[c>>4], hexDigits[c&15])
		}
		return append(dst, '"')
	case KindGroup:
		dst = append(dst, '{')
		dst, _ = m.appendJSONFields(dst, i+1, int(v.End), true)
		return append(dst, '}')
	case KindSequence:
		dst = append(dst, '[')
		for j, k := i+1, 0; j < int(v.End); j, k = int(m.Values[j].End), k+1 {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = m.appendJSONValue(dst, j)
		}
		return append(dst, ']')
	}
	return append(dst, "null"...)
}

// AppendDecimal appends mantissa * 10^exponent in plain decimal notation,
// exactly: AppendDecimal(nil, 12345, -2) is "123.45", (12, 3) is "12000".
func AppendDecimal(dst []byte, mantissa int64, exponent int32) []byte {
	var digits [24]byte
	neg := mantissa < 0
	u := uint64(mantissa)
	if neg {
		u = -u
		dst = append(dst, '-')
	}
	ds := strconv.AppendUint(digits[:0], u, 10)
	switch {
	case exponent >= 0:
		dst = append(dst, ds...)
		if u != 0 {
			for i := int32(0); i < exponent; i++ {
				dst = append(dst, '0')
			}
		}
	case int(-exponent) < len(ds):
		point := len(ds) + int(exponent)
		dst = append(dst, ds[:point]...)
		dst = append(dst, '.')
		dst = append(dst, ds[point:]...)
	default:
		dst = append(dst, '0', '.')
		for i := len(ds); i < int(-exponent); i++ {
			dst = append(dst, '0')
		}
		dst = append(dst, ds...)
	}
	return dst
}

func appendJSONString(dst []byte, s []byte) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20 || c == 0x7f:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
		case c < 0x80:
			dst = append(dst, c)
		default:
			// Keep valid UTF-8 as is; escape invalid bytes as U+FFFD so
			// the output stays valid JSON.
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, `\ufffd`...)
			} else {
				dst = append(dst, s[i:i+size]...)
			}
			i += size
			continue
		}
		i++
	}
	return append(dst, '"')
}
