package fast

import (
	"iter"
	"strconv"
	"unicode/utf8"
)

// Message is a decoded FAST message, laid out flat so that a reused Message
// allocates nothing once its slices have grown: Values holds every field in
// template order, depth first. A sequence value is followed by its elements,
// each element by its fields; a group value by its fields. Composite values
// (sequence, element, group, dynamic templateRef) record in End the index
// just past their subtree, so a reader can skip them:
//
//	for i := 0; i < len(m.Values); i = int(m.Values[i].End) {
//		fmt.Println(m.Field(i).Name, m.Values[i].Present)
//	}
//
// Elements and Members walk a sequence's elements and a group's members
// that way, and IndexIn and GetIn find a member by name.
//
// Values hold no pointers (the garbage collector never scans them and
// appending them needs no write barrier); Field and Bytes resolve a value's
// field and bytes.
//
// The caller owns a Message and passes it to every Decode call. Its
// contents, including the slices Bytes returns, are valid until the next call
// to Decode (or Reset) with the same Message.
type Message struct {
	// Template is the message's template; nil for a reset message (template
	// id 120) that the template file does not declare.
	Template *Template
	// TemplateID is the template id of the message.
	TemplateID uint32
	// Values are the fields, depth first; see the type doc.
	Values []Value
	// arena holds the bytes of strings and byte vectors.
	arena []byte
	// fields resolves Value.field.
	fields []*Field
	// pool holds the templates' constant and initial byte values, shared
	// and read-only.
	pool []byte
}

// Value is one field of a Message.
type Value struct {
	// U holds an integer: the value of an unsigned kind, the two's-complement
	// bits of a signed kind (see Int), the mantissa bits of a decimal, the
	// template id of a dynamic templateRef, the length of a sequence.
	U uint64
	// Exp is the exponent of a decimal.
	Exp int32
	// End is the index in Message.Values just past this value's subtree; for
	// scalars it is the next index.
	End int32
	// off and n locate a string or byte vector in the message's arena (or,
	// with poolBit set in off, in the constant pool).
	off, n uint32
	// field indexes the template field in Message.fields.
	field int32
	// Kind is the field's kind (KindGroup for a sequence element).
	Kind Kind
	// Present is false for an absent optional field.
	Present bool
	// Elem marks a sequence element.
	Elem bool
	// src records the Add method that built the value (srcDecoded for the
	// values a Decoder writes), so that Encode can refuse a value of the
	// wrong kind. It fills the word's last byte, which setValue clears.
	src valueSrc
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

// Field returns the template field of Values[i] (for a sequence element,
// the sequence's field).
func (m *Message) Field(i int) *Field { return m.fields[m.Values[i].field] }

// Bytes returns the value of the string or byte-vector field Values[i]. It
// is valid until the next call to Decode with m; do not modify it.
func (m *Message) Bytes(i int) []byte {
	v := &m.Values[i]
	if v.off&poolBit != 0 {
		off := v.off &^ poolBit
		return m.pool[off : off+v.n : off+v.n]
	}
	return m.arena[v.off : v.off+v.n : v.off+v.n]
}

// valueBytes is Bytes with bounds checks, for values a caller built.
func (m *Message) valueBytes(v *Value) ([]byte, bool) {
	buf, off := m.arena, uint64(v.off)
	if v.off&poolBit != 0 {
		buf, off = m.pool, uint64(v.off&^poolBit)
	}
	if off+uint64(v.n) > uint64(len(buf)) {
		return nil, false
	}
	return buf[off : off+uint64(v.n)], true
}

// appendByte appends a one-byte value to the arena.
func (m *Message) appendByte(c byte) span {
	m.arena = append(m.arena, c)
	return span{len(m.arena) - 1, len(m.arena)}
}

// appendBytes appends v to the arena.
func (m *Message) appendBytes(v []byte) span {
	m.arena = append(m.arena, v...)
	return span{len(m.arena) - len(v), len(m.arena)}
}

// Reset empties m, keeping its storage.
func (m *Message) Reset() {
	m.Template = nil
	m.TemplateID = 0
	m.Values = m.Values[:0]
	m.arena = m.arena[:0]
}

// Index returns the index in Values of the first top-level value with the
// given field name (a static templateRef's fields count as top level), or -1.
func (m *Message) Index(name string) int {
	for i := 0; i < len(m.Values); i = m.end(i) {
		if m.Values[i].Kind != KindTemplateRef && m.Field(i).Name == name {
			return i
		}
	}
	return -1
}

// Get returns the first top-level value with the given field name, or nil.
func (m *Message) Get(name string) *Value {
	if i := m.Index(name); i >= 0 {
		return &m.Values[i]
	}
	return nil
}

// end returns Values[i].End, or i+1 when End does not point past i (values
// a caller built by hand), so walks always move forward and stay in range.
func (m *Message) end(i int) int {
	e := int(m.Values[i].End)
	if e <= i || e > len(m.Values) {
		return i + 1
	}
	return e
}

// Children returns the index range [first, end) of the direct children of the
// composite value at index i. Step through them with j = Values[j].End.
func (m *Message) Children(i int) (first, end int) {
	return i + 1, m.end(i)
}

// Elements returns an iterator over the elements of the sequence at
// Values[i]: it yields each element's number, from 0, and its index in
// Values, where IndexIn and GetIn find the element's fields by name. It
// yields nothing when Values[i] is not a present sequence, or when i is out
// of range (such as the -1 Index returns for a missing field). m must be a
// decoded message or one Encode has completed.
//
//	for _, e := range m.Elements(m.Index("MDEntries")) {
//		px := m.GetIn(e, "MDEntryPx")
//	}
func (m *Message) Elements(i int) iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		if i < 0 || i >= len(m.Values) || m.Values[i].Kind != KindSequence || !m.Values[i].Present {
			return
		}
		for j, k, end := i+1, 0, m.end(i); j < end; j, k = m.end(j), k+1 {
			if !yield(k, j) {
				return
			}
		}
	}
}

// Members returns an iterator over the indexes in Values of the direct
// members of the group, sequence element or dynamic templateRef at
// Values[i], in template order (the fields of a static templateRef are
// members of the group that holds it). It yields nothing when i is out of
// range or Values[i] is absent or not one of those.
func (m *Message) Members(i int) iter.Seq[int] {
	return func(yield func(int) bool) {
		if i < 0 || i >= len(m.Values) || !m.Values[i].Present {
			return
		}
		switch m.Values[i].Kind {
		case KindGroup, KindTemplateRef:
		default:
			return
		}
		for j, end := i+1, m.end(i); j < end; j = m.end(j) {
			if !yield(j) {
				return
			}
		}
	}
}

// IndexIn returns the index in Values of the member with the given field
// name of the group, sequence element or dynamic templateRef at Values[i]
// (see Members), or -1. Like Index, it does not look inside the member
// dynamic templateRefs.
func (m *Message) IndexIn(i int, name string) int {
	for j := range m.Members(i) {
		if m.Values[j].Kind != KindTemplateRef && m.Field(j).Name == name {
			return j
		}
	}
	return -1
}

// GetIn returns the member with the given field name of the group, sequence
// element or dynamic templateRef at Values[i] (see IndexIn), or nil.
func (m *Message) GetIn(i int, name string) *Value {
	if j := m.IndexIn(i, name); j >= 0 {
		return &m.Values[j]
	}
	return nil
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
	for ; i < end; i = m.end(i) {
		v := &m.Values[i]
		if !v.Present {
			continue
		}
		if v.Kind == KindTemplateRef {
			dst, first = m.appendJSONFields(dst, i+1, m.end(i), first)
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendJSONString(dst, []byte(m.Field(i).Name))
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
		return appendJSONString(dst, m.Bytes(i))
	case KindByteVector:
		const hexDigits = "0123456789abcdef"
		dst = append(dst, '"')
		for _, c := range m.Bytes(i) {
			dst = append(dst, hexDigits[c>>4], hexDigits[c&15])
		}
		return append(dst, '"')
	case KindGroup:
		dst = append(dst, '{')
		dst, _ = m.appendJSONFields(dst, i+1, m.end(i), true)
		return append(dst, '}')
	case KindSequence:
		dst = append(dst, '[')
		for j, k := i+1, 0; j < m.end(i); j, k = m.end(j), k+1 {
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

// The last word of a Value in setValue: field, Kind, Present and Elem.
const (
	presentTag = 1 << 40
	elemTag    = 1 << 48
)

// valueTag returns the last word of a Value of the field fid and kind k,
// absent and not a sequence element (or in presentTag and elemTag).
func valueTag(fid int32, k Kind) uint64 { return uint64(uint32(fid)) | uint64(k)<<32 }
