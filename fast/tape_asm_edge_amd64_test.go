//go:build !purego

package fast

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestAsmLoopSharedKeyDelta decodes uInt32 deltas whose base a uInt64
// field of the same key left above 2^32: the sum carries past 2^64, or the
// difference stays above 2^32. Both are out of the uInt32 range (R4),
// whatever the loops.
func TestAsmLoopSharedKeyDelta(t *testing.T) {
	const xml = `<templates xmlns="http://www.fixprotocol.org/ns/fast/td/1.1">
<template name="S" id="1">
 <uInt64 name="A"><copy key="k"/></uInt64>
 <uInt32 name="B"><delta key="k"/></uInt32>
</template></templates>`
	ts, err := ParseTemplates([]byte(xml))
	if err != nil {
		t.Fatal(err)
	}
	msg := func(a uint64, delta int64) []byte {
		return AppendInt64(AppendUint64([]byte{0xe0, 0x81}, a), delta)
	}
	for _, c := range []struct {
		name string
		msg  []byte
		want uint64 // B, when in range
	}{
		// A = 2^64-1 (10 bytes: Go reads it), B = A + 1.
		{"carry", msg(math.MaxUint64, 1), 0},
		// A = 2^33 (5 bytes), B = A - 1.
		{"above", msg(1<<33, -1), 0},
		// A = 2^33, B = A - 2^33 + 1.
		{"in range", msg(1<<33, -(1<<33 - 1)), 1},
	} {
		for _, mode := range []int{loopDiff, loopPortable, loopAsm} {
			t.Run(fmt.Sprint(c.name, mode), func(t *testing.T) {
				useLoop(t, mode)
				diffStream(t, rand.New(rand.NewPCG(1, 2)), ts, nil, c.msg)
				d := mustNew(t, ts)
				var m Message
				n, err := d.Decode(c.msg, &m)
				if c.want != 0 {
					if err != nil || n != len(c.msg) || m.Values[1].U != c.want {
						t.Fatalf("%d bytes, %v, values %+v", n, err, m.Values)
					}
					return
				}
				if Code(err) != "R4" {
					t.Fatalf("%d bytes, values %+v, error %v; want R4", n, m.Values, err)
				}
			})
		}
	}
}
