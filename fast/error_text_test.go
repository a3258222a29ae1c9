package fast_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tickwire/tickwire/fast"
)

// TestErrorTextsOnePrefix checks that errors wrapping this package's
// errors carry its "fast:" prefix once.
func TestErrorTextsOnePrefix(t *testing.T) {
	_, terr := fast.ParseTemplates([]byte(`<templates><template name="T" id="1"><decimal name="D"><copy value="1x"/></decimal></template></templates>`))
	ts, _ := fast.ParseTemplates([]byte(`<templates><template name="T" id="1"><uInt32 name="U"/></template></templates>`))
	dec, _ := fast.NewDecoder(ts, nil)
	var m fast.Message
	_, derr := dec.Decode([]byte{0xc0, 0x81, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x80}, &m)
	for _, err := range []error{terr, derr} {
		if err == nil || strings.Count(err.Error(), "fast:") != 1 {
			t.Errorf("%v: want one \"fast:\"", err)
		}
	}
	if !errors.Is(derr, fast.ErrOverflow) {
		t.Errorf("%v does not wrap ErrOverflow", derr)
	}
}
