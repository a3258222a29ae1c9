// Package fast is a FAST 1.1 (FIX Adapted for STreaming) codec: template XML
// loading, a generic streaming decoder that allocates nothing in steady
// state, an encoder with minimal presence maps, and the wire primitives
// (stop-bit integers, strings, byte vectors, presence maps) that generated
// decoders such as fast/sse call directly.
//
// The package knows nothing about networking: it takes bytes.
//
// Wire primitives decode the value starting at b[off] and return the offset
// just past it; strings and byte vectors alias b:
//
//	v, next, err := fast.ReadUint32(b, off)
//	if errors.Is(err, fast.ErrShort) {
//		// wait for more bytes, then decode the message again from its start
//	}
package fast
