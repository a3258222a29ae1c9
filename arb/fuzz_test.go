package arb_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/tickwire/tickwire/arb"
)

// FuzzMold checks that Validate never panics, that a valid packet's
// messages tile it exactly, that every invalid one fails with a
// *MoldError, and that an arbiter fed the packet on either line stays
// consistent.
func FuzzMold(f *testing.F) {
	f.Add(arb.AppendMold(nil, "SESSION001", 1, 0, []byte("hello"), []byte("world")))
	f.Add(arb.AppendMold(nil, "S", 7, 0))
	f.Add(arb.AppendMold(nil, "S", 7, arb.MoldEndOfSession))
	f.Add(arb.AppendMold(nil, "S", 1<<64-1, 0, []byte("x")))
	f.Add([]byte("short"))
	f.Fuzz(func(t *testing.T, p []byte) {
		m := arb.Mold(p)
		err := m.Validate()
		if err != nil {
			var me *arb.MoldError
			if !errors.As(err, &me) || me.Offset < 0 || me.Offset > len(p) {
				t.Fatalf("error %v is not a *MoldError within the packet", err)
			}
		} else {
			n := int(m.Count())
			if n == arb.MoldEndOfSession {
				n = 0
			}
			off := arb.MoldHeaderLen
			for i := 0; i < n; i++ {
				msg, next := m.NextMessage(off)
				if len(msg) != int(binary.BigEndian.Uint16(p[off:])) {
					t.Fatalf("message %d: length %d", i, len(msg))
				}
				off = next
			}
			if off != len(p) {
				t.Fatalf("messages end at %d of %d", off, len(p))
			}
		}
		h := &nopHandler{}
		a, _ := arb.New(arb.Config{Window: 8, SlotSize: 16}, h)
		for i := 0; i < 2; i++ {
			if got := a.Datagram(i, p, int64(i)); (got == nil) != (err == nil) {
				t.Fatalf("Datagram: %v, Validate: %v", got, err)
			}
		}
		a.End(3)
		if st := a.Stats(); st.Pending != 0 {
			t.Fatalf("pending after End: %+v", st)
		}
	})
}
