package mirror

import (
	"testing"
	"unsafe"
)

// TestFlowLayout: flows fill whole cache lines and the fields of the
// in-order path and of a lookup share the first one.
func TestFlowLayout(t *testing.T) {
	var f flow
	if n := unsafe.Sizeof(f); n%64 != 0 {
		t.Errorf("flow is %d bytes (%d of them padding), not whole cache lines", n, flowPad)
	}
	if end := unsafe.Offsetof(f.pending) + 1; end > 64 {
		t.Errorf("hot fields end at byte %d, beyond the first cache line", end)
	}
}
