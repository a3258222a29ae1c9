// Package fast is a FAST 1.1 (FIX Adapted for STreaming) codec: template XML
// loading, a generic streaming decoder that allocates nothing in steady
// state, an encoder with minimal presence maps, and the wire primitives
// (stop-bit integers, strings, byte vectors, presence maps) that generated
// decoders such as fast/sse call directly. The package knows nothing about
// networking: it takes bytes.
//
// # Decoding
//
//	ts, err := fast.LoadTemplatesFile("templates.xml")
//	dec, err := fast.NewDecoder(ts, nil)
//	var m fast.Message // reused: its storage grows once, then stays
//	for len(buf) > 0 {
//		n, err := dec.Decode(buf, &m)
//		if errors.Is(err, fast.ErrShort) {
//			break // read more bytes, then decode the same message again
//		}
//		if err != nil {
//			return err // a *fast.DecodeError with code and offset
//		}
//		use(&m) // valid until the next Decode into m
//		buf = buf[n:]
//	}
//
// A Message is a flat, pointer-free list of values in template order (see
// Message). Message.Elements iterates over a sequence's elements, and
// Message.GetIn finds a group's or an element's field by name;
// Message.AppendJSON renders a message as a JSON line.
//
// # Dictionaries and resets
//
// Dictionary entries are shared by (dictionary, key): the global dictionary
// by key (the field name by default) across all templates and nesting
// levels; "template" per template (the template that defines the field, also
// for fields reached through a static templateRef); "type" per application
// type (the nearest typeRef, else the template's); any other name is a named
// dictionary. The individual operators of a decimal use the keys
// "Name/exponent" and "Name/mantissa". Fields of different value classes
// (integer, decimal, string or bytes) never share an entry: the spec makes
// that sharing error D4, and keeping them apart lets a file that reuses a
// name with another type decode. The previous template id is kept apart
// from the dictionaries.
//
// Reset policies: never (the default), per message
// (DecoderOptions.ResetEachMessage), or per block or packet (call
// Decoder.Reset at each boundary; the SSE feed resets per STEP message). A
// template with reset="Y" resets before its message is decoded; a message
// with template id 120 (ResetTemplateID) resets whether or not the template
// file declares it.
//
// # Errors and limits
//
// A message cut short by the end of the buffer returns an error wrapping
// ErrShort and leaves every dictionary as it was (changes are undone), so
// the caller retries once more bytes arrive. Other errors are
// *DecodeError{Code, TemplateID, Field, Offset, Err} with the spec's code
// (D2, D5, D6, D7, D9, R1, R4) or LIMIT; they are sticky until Reset.
// Overlong integers and presence maps (R-class) are accepted. Every length
// read from the wire is bounded by Limits, so no input makes the decoder
// allocate without limit.
//
// The Encoder checks each value against its field: a value of the wrong kind
// (AddBytes for an integer field), an integer out of range for the field's
// type, a missing or extra value or sequence element, or a value the
// operator cannot express is an *EncodeError{TemplateID, Template, Field,
// Want, Got, Err} naming the field's path, what it takes and what it was
// given.
//
// # Choices where implementations differ
//
//   - tail with an empty previous value and its bit clear is absent, even
//     with an initial value (spec 6.3.8; rs-fastlib returns the initial
//     value).
//   - A string longer than one byte that starts with NUL is returned as
//     received; the Encoder refuses to produce one (10.6.3 gives 00 80 the
//     meaning "\x00").
//   - byteVector initial values are hex, as the spec says; a value that is
//     not hex (QuickFAST's test files) is taken as raw text.
//   - Decimal initial values are normalised ("12000" is 12e3); decoded
//     values keep the transmitted mantissa and exponent.
//
// # How the decoder runs
//
// NewDecoder flattens each template into an instruction tape: one small
// struct per field with its operator, presence, kind and dictionary slot
// resolved, plus instructions that open and close groups, sequence elements
// and dynamic templateRefs. A template without dynamic templateRefs also
// gets a packed copy of its tape, which Decode runs first: a loop that makes
// no calls decodes the common cases (integers of up to 8 bytes in one load,
// one-character strings, assigned or initial previous values, absent
// defaults, sequence elements and groups with short presence maps) and
// stops at anything else, which the general per-operator functions then
// decode. Where a message could fail, that loop gives up on it instead:
// Decode undoes its dictionary writes and decodes the message again with
// the plain tape, whose errors carry the exact offsets and fields, so an
// invalid message costs two decodes. Undo for ErrShort costs one record the
// first time a message writes an entry.
//
// On amd64 CPUs with BMI2 that loop is written in assembly, each
// instruction jumping to the next one's code with the decoder's state in
// registers, where the Go loop stores part of it to the stack at every
// field; it decodes a message in far fewer instructions and less time (the
// measurements, and what else was tried, are in the package's DESIGN.md).
// The purego build tag leaves it out, and so do CPUs whose PEXT is
// microcoded (AMD before Zen 3), where the Go loop is faster.
//
// Absent string and byte-vector values have no bytes (Message.Bytes returns
// an empty slice).
//
// Decoders and Encoders are not safe for concurrent use: use one per stream.
// Templates are read-only once built and may be shared.
package fast
