// Package generictest is what the tests of generated decoders (fast/sse and
// fastgen's feature templates) share to compare them with package fast's
// generic decoder: one canonical text per decoded record.
package generictest

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/tickwire/tickwire/fast"
)

// Canonical renders a message decoded by the generic decoder as
// "templateID{Name=value ...}": present fields in template order, strings
// without trailing NULs, signed integers as signed. A mandatory constant
// is left out (it is not on the wire); an optional one that is present
// reads "Name=present". The typed tests render their records the same way.
func Canonical(m *fast.Message) string {
	var parts []string
	for i := range m.Values {
		v := &m.Values[i]
		f := m.Field(i)
		if !v.Present || (f.Op.Kind == fast.OpConstant && !f.Optional) {
			continue
		}
		if f.Op.Kind == fast.OpConstant {
			parts = append(parts, f.Name+"=present")
			continue
		}
		var s string
		switch v.Kind {
		case fast.KindASCII:
			s = string(bytes.TrimRight(m.Bytes(i), "\x00"))
		case fast.KindInt32, fast.KindInt64:
			s = fmt.Sprint(v.Int())
		default:
			s = fmt.Sprint(v.Uint())
		}
		parts = append(parts, f.Name+"="+s)
	}
	return fmt.Sprintf("%d{%s}", m.TemplateID, strings.Join(parts, " "))
}

// Records decodes b from a fresh dictionary with d and returns the
// canonical text of every record before the first error (reset templates
// are not records), and that error.
func Records(d *fast.Decoder, b []byte) ([]string, error) {
	d.Reset()
	var out []string
	var m fast.Message
	for off := 0; off < len(b); {
		n, err := d.Decode(b[off:], &m)
		if err != nil {
			return out, err
		}
		if m.TemplateID != fast.ResetTemplateID {
			out = append(out, Canonical(&m))
		}
		off += n
	}
	return out, nil
}
