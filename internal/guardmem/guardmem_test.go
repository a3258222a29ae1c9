package guardmem_test

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
	"unsafe"

	"github.com/tickwire/tickwire/internal/guardmem"
)

// TestGuardFaults checks, in a child process, that reading one byte past a
// guarded buffer (or one before it) crashes.
func TestGuardFaults(t *testing.T) {
	if side := os.Getenv("GUARDMEM_CHILD"); side != "" {
		b := guardmem.Bytes(t, 10, side == "end")
		p := unsafe.Pointer(&b[0])
		if side == "end" {
			p = unsafe.Add(p, len(b))
		} else {
			p = unsafe.Add(p, -1)
		}
		sink = *(*byte)(p)
		t.Fatal("the guard page was read")
	}
	for _, side := range []string{"end", "start"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestGuardFaults$")
		cmd.Env = append(os.Environ(), "GUARDMEM_CHILD="+side)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("reading past the %s: no fault\n%s", side, out)
		} else if !bytes.Contains(out, []byte("fault")) {
			t.Errorf("reading past the %s: %v, not a fault\n%s", side, err, out)
		}
	}
}

// TestBytes checks the buffer is writable and as long as asked.
func TestBytes(t *testing.T) {
	for _, atEnd := range []bool{true, false} {
		b := guardmem.Bytes(t, 100, atEnd)
		if len(b) != 100 || cap(b) != 100 {
			t.Fatalf("len %d cap %d, want 100", len(b), cap(b))
		}
		for i := range b {
			b[i] = byte(i)
		}
	}
}

// sink keeps the read of the guard page from being optimised away.
var sink byte

// TestBytesLong checks a buffer of several pages, at both ends.
func TestBytesLong(t *testing.T) {
	for _, atEnd := range []bool{true, false} {
		b := guardmem.Bytes(t, 3*guardmem.MaxLen+5, atEnd)
		for i := range b {
			b[i] = byte(i)
		}
	}
}
