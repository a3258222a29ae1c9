package fast

import (
	"errors"
	"strconv"
	"strings"
)

// Errors an Encoder wraps in an *EncodeError when a Message does not follow
// its template. ErrRange (a value that does not fit its field's type),
// ErrExponent, ErrNotEncodable, ErrUnknownTemplate and ErrLimit are wrapped
// the same way.
var (
	// ErrWrongKind means a value is not of the kind its field takes:
	// AddBytes for an integer field, AddUint for a string, AddDecimal for
	// an integer, AddGroup for a sequence, and so on.
	ErrWrongKind = errors.New("fast: value of the wrong kind for its field")
	// ErrMissingValue means a field has no value: the Message ends before
	// the template does, or a mandatory field is absent.
	ErrMissingValue = errors.New("fast: value missing")
	// ErrMissingElement means a sequence has fewer elements (AddElement)
	// than the length AddSequence gave it.
	ErrMissingElement = errors.New("fast: sequence has fewer elements than its length")
	// ErrExtraValue means the Message holds values past its template's
	// last field.
	ErrExtraValue = errors.New("fast: values past the template's last field")
)

// EncodeError is an encoding failure with its context: the message's
// template, the field and, where they apply, what the field takes and what
// the Message holds.
type EncodeError struct {
	// TemplateID and Template are the id and name of the message's
	// template (Template is "" when the id is unknown).
	TemplateID uint32
	Template   string
	// Field is the field's path from the message: names joined by dots, a
	// sequence element's number (from 0) in brackets, a dynamic
	// templateRef as templateRef(Name): "Legs[1].Px". It is "" for the
	// message as a whole.
	Field string
	// Want says what the field takes ("uInt32 (AddUint or AddInt)", or for
	// ErrRange the type, "uInt32"), Got what the Message holds there
	// (`bytes "7" (AddBytes)`, "4294967296", "end of message"). Either may
	// be "".
	Want, Got string
	// Err is the cause: ErrWrongKind, ErrMissingValue, ErrMissingElement,
	// ErrExtraValue, ErrRange, ErrExponent, ErrNotEncodable,
	// ErrUnknownTemplate or ErrLimit.
	Err error
}

func (e *EncodeError) Error() string {
	var b strings.Builder
	b.WriteString("fast: template ")
	if e.Template != "" {
		b.WriteString(e.Template)
		b.WriteString(" (id ")
		b.WriteString(strconv.FormatUint(uint64(e.TemplateID), 10))
		b.WriteString(")")
	} else {
		b.WriteString("id ")
		b.WriteString(strconv.FormatUint(uint64(e.TemplateID), 10))
	}
	if e.Field != "" {
		b.WriteString(", field ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	switch {
	case (e.Err == ErrRange || e.Err == ErrExponent) && e.Got != "" && e.Want != "":
		b.WriteString(e.Got)
		b.WriteString(" out of range for ")
		b.WriteString(e.Want)
	case e.Err == ErrExtraValue && e.Got != "":
		b.WriteString(e.Got)
		b.WriteString(" past the template's last field")
	default:
		b.WriteString(causeText(e.Err))
		if e.Want != "" {
			b.WriteString(": want ")
			b.WriteString(e.Want)
		}
		if e.Got != "" {
			if e.Want != "" {
				b.WriteString(", got ")
			} else {
				b.WriteString(": got ")
			}
			b.WriteString(e.Got)
		}
	}
	return b.String()
}

func (e *EncodeError) Unwrap() error { return e.Err }

// causeText is err's message without this package's "fast: " prefix, for
// errors that wrap it after their own.
func causeText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return strings.TrimPrefix(err.Error(), "fast: ")
}

// valueSrc is the Add method that built a Value.
type valueSrc uint8

const (
	srcDecoded valueSrc = iota // written by a Decoder, or by hand
	srcUint
	srcInt
	srcDecimal
	srcBytes
	srcAbsent
	srcSequence
	srcElement
	srcGroup
	srcTemplateRef
)

// srcTakes holds, per field kind, the Add methods whose values the field
// takes, as bits 1<<valueSrc. Integers of either sign go to any integer
// field if their value fits its type. AddAbsent is accepted here and refused
// later for a mandatory field, with ErrMissingValue. Indexed by a Kind, a
// byte, it needs no bounds check.
var srcTakes = [256]uint16{
	KindUint32:      1<<srcUint | 1<<srcInt | 1<<srcAbsent,
	KindInt32:       1<<srcUint | 1<<srcInt | 1<<srcAbsent,
	KindUint64:      1<<srcUint | 1<<srcInt | 1<<srcAbsent,
	KindInt64:       1<<srcUint | 1<<srcInt | 1<<srcAbsent,
	KindDecimal:     1<<srcDecimal | 1<<srcAbsent,
	KindASCII:       1<<srcBytes | 1<<srcAbsent,
	KindUnicode:     1<<srcBytes | 1<<srcAbsent,
	KindByteVector:  1<<srcBytes | 1<<srcAbsent,
	KindSequence:    1<<srcSequence | 1<<srcAbsent,
	KindGroup:       1<<srcGroup | 1<<srcAbsent,
	KindTemplateRef: 1 << srcTemplateRef,
}

// takes reports whether a field of kind k takes v. A value the Decoder
// wrote for a field of kind k passes with one comparison; a value built by
// hand (no Add method) passes when its Kind is k or unset.
func takes(k Kind, v *Value) bool {
	t := kindTag(v) &^ 0xff00 // Kind, Elem<<16, src<<24
	if t == uint32(k) {
		return true
	}
	if src := t >> 24; src != 0 {
		return srcTakes[k]>>(src&15)&1 != 0
	}
	return t == 0
}

// isElement reports whether v starts a sequence element.
func isElement(v *Value) bool {
	if v.src == srcDecoded {
		return v.Elem
	}
	return v.src == srcElement
}

// signedValue reports whether v's integer is signed: built by AddInt, or
// written for a signed field of kind k.
func signedValue(k Kind, v *Value) bool {
	return v.src == srcInt || v.src == srcDecoded && (k == KindInt32 || k == KindInt64)
}

// kindName is the name of a field kind in an error: the XML element name,
// with the charset for strings.
func kindName(k Kind) string {
	switch k {
	case KindASCII:
		return "ascii string"
	case KindUnicode:
		return "unicode string"
	}
	return k.String()
}

// want says what the field of in takes, with the Add methods that build it.
func want(in *instr) string {
	s := kindName(in.kind)
	if in.optional {
		s = "optional " + s
	}
	var adds string
	switch in.kind {
	case KindUint32, KindInt32, KindUint64, KindInt64:
		adds = "AddUint or AddInt"
		if in.optional {
			adds = "AddUint, AddInt or AddAbsent"
		}
	case KindDecimal:
		adds = "AddDecimal"
	case KindASCII, KindUnicode, KindByteVector:
		adds = "AddBytes"
	case KindSequence:
		adds = "AddSequence"
	case KindGroup:
		adds = "AddGroup"
	case KindTemplateRef:
		return s + " (AddTemplateRef)"
	}
	if in.optional && !in.kind.IsInteger() {
		adds += " or AddAbsent"
	}
	return s + " (" + adds + ")"
}

// describe says what v holds, for an error's Got.
func (m *Message) describe(v *Value) string {
	if v == nil {
		return "end of message"
	}
	switch v.src {
	case srcUint:
		return strconv.FormatUint(v.U, 10) + " (AddUint)"
	case srcInt:
		return strconv.FormatInt(int64(v.U), 10) + " (AddInt)"
	case srcDecimal:
		return "decimal " + decimalText(v) + " (AddDecimal)"
	case srcBytes:
		return "bytes " + m.quoteBytes(v) + " (AddBytes)"
	case srcAbsent:
		return "absent (AddAbsent)"
	case srcSequence:
		return "sequence of " + strconv.FormatInt(int64(v.U), 10) + " (AddSequence)"
	case srcElement:
		return "sequence element (AddElement)"
	case srcGroup:
		return "group (AddGroup)"
	case srcTemplateRef:
		return "templateRef to template " + strconv.FormatUint(v.U, 10) + " (AddTemplateRef)"
	}
	switch {
	case v.Elem:
		return "sequence element"
	case !v.Present && v.Kind != 0:
		return "absent " + kindName(v.Kind)
	case !v.Present:
		return "absent value"
	}
	switch v.Kind {
	case KindUint32, KindUint64:
		return kindName(v.Kind) + " " + strconv.FormatUint(v.U, 10)
	case KindInt32, KindInt64:
		return kindName(v.Kind) + " " + strconv.FormatInt(int64(v.U), 10)
	case KindDecimal:
		return "decimal " + decimalText(v)
	case KindASCII, KindUnicode, KindByteVector:
		return kindName(v.Kind) + " " + m.quoteBytes(v)
	case KindSequence:
		return "sequence of " + strconv.FormatUint(v.U, 10)
	case KindGroup, KindTemplateRef:
		return kindName(v.Kind)
	}
	return "value " + strconv.FormatUint(v.U, 10)
}

// decimalText writes a decimal as mantissa and exponent ("12345e-2"), which
// stays short whatever the exponent.
func decimalText(v *Value) string {
	return strconv.FormatInt(int64(v.U), 10) + "e" + strconv.FormatInt(int64(v.Exp), 10)
}

// quoteBytes quotes the bytes of v, at most 32 of them.
func (m *Message) quoteBytes(v *Value) string {
	b, ok := m.valueBytes(v)
	if !ok {
		return "(outside the message's bytes)"
	}
	if len(b) > 32 {
		return strconv.Quote(string(b[:32])) + "..."
	}
	return strconv.Quote(string(b))
}

// numberText is the integer of v as its sign says, for a range error.
func numberText(k Kind, v *Value) string {
	if signedValue(k, v) {
		return strconv.FormatInt(int64(v.U), 10)
	}
	return strconv.FormatUint(v.U, 10)
}

// fieldError wraps err, returned for the scalar field of in holding v (nil
// past the end of the message), with what the field takes and what v holds.
func (m *Message) fieldError(in *instr, v *Value, err error) *EncodeError {
	ee := &EncodeError{Field: fieldName(in), Err: err, Got: m.describe(v)}
	switch err {
	case ErrWrongKind, ErrMissingValue:
		ee.Want = want(in)
	case ErrRange:
		ee.Want = kindName(in.kind)
		if in.kind == KindSequence {
			ee.Want, ee.Got = "its length, a uInt32", "length "+strconv.FormatInt(int64(v.U), 10)
		} else if in.kind.IsInteger() {
			ee.Got = numberText(in.kind, v)
		} else if in.kind == KindASCII {
			ee.Want = "ascii string (7-bit characters)"
			ee.Got = m.quoteBytes(v)
		}
	case ErrExponent:
		ee.Want, ee.Got = "decimal exponent (-63..63)", strconv.FormatInt(int64(v.Exp), 10)
	case ErrNotEncodable:
		if in.kind == KindSequence {
			ee.Want = "length " + operatorText(in.length)
		} else {
			ee.Want = operatorText(in)
		}
	}
	return ee
}

// missingElement is the error for a sequence of length v.U whose element k
// (from 0) is el, which does not start an element (nil past the end).
func (m *Message) missingElement(in *instr, v, el *Value, k uint64) *EncodeError {
	return &EncodeError{Field: fieldName(in), Err: ErrMissingElement, Got: m.describe(el),
		Want: "element " + strconv.FormatUint(k+1, 10) + " of " + strconv.FormatUint(v.U, 10) + " (AddElement)"}
}

// depthError is the error for a composite field nested deeper than max.
func depthError(in *instr, max int) *EncodeError {
	return &EncodeError{Field: fieldName(in), Err: ErrLimit,
		Want: "at most " + strconv.Itoa(max) + " levels of nesting (EncoderOptions.MaxDepth)"}
}

// fieldName names the field of in in an EncodeError's path: a dynamic
// templateRef has no name of its own.
func fieldName(in *instr) string {
	if in.f.Name == "" && in.kind == KindTemplateRef {
		return "templateRef"
	}
	return in.f.Name
}

// operatorText describes the field's type and operator, for
// ErrNotEncodable.
func operatorText(in *instr) string {
	if in.exp != nil {
		return "decimal with exponent " + in.exp.op.String() + " and mantissa " + in.mant.op.String()
	}
	s := kindName(in.kind) + " with operator " + in.op.String()
	if in.hasInit && in.op != OpNone {
		s += " " + strconv.Quote(in.f.Op.Value)
	}
	return s
}

// prefixElement puts the path of element k of the sequence of in in front
// of the field of err.
func prefixElement(err error, in *instr, k uint64) error {
	return prefixField(err, fieldName(in)+"["+strconv.FormatUint(k, 10)+"]")
}

// prefixRef puts the path of a dynamic templateRef to t in front of the
// field of err.
func prefixRef(err error, t *Template) error {
	return prefixField(err, "templateRef("+t.Name+")")
}

// prefixField puts the path of the composite field holding err's field in
// front of it.
func prefixField(err error, path string) error {
	var ee *EncodeError
	if errors.As(err, &ee) {
		if ee.Field == "" {
			ee.Field = path
		} else {
			ee.Field = path + "." + ee.Field
		}
	}
	return err
}
