package dmaring

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestRegionMappings writes through one mapping of a region and reads
// through another: a memfd, a /dev/shm file (removed on Close), and Go
// memory.
func TestRegionMappings(t *testing.T) {
	l, err := NewLayout(2, 4, 256)
	if err != nil {
		t.Fatal(err)
	}
	shm := filepath.Join(os.TempDir(), "tickwire-dmaring-test-region")
	if _, err := os.Stat("/dev/shm"); err == nil {
		shm = "/dev/shm/tickwire-dmaring-test-region"
	}
	os.Remove(shm)
	for _, c := range []struct {
		name     string
		path     string
		inMemory bool
	}{{"memfd", "", false}, {"file", shm, false}, {"memory", "", true}} {
		t.Run(c.name, func(t *testing.T) {
			var r *Region
			if c.inMemory {
				r = newMemRegion(l)
			} else {
				r, err = newFileRegion(l, c.path)
				if runtime.GOOS != "linux" {
					if !errors.Is(err, ErrNotSupported) {
						t.Fatalf("err %v, want ErrNotSupported", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			l.writeHeader(r.mem, FeatureRxCsum)
			dev, err := r.Map()
			if err != nil {
				t.Fatal(err)
			}
			if dev.Layout() != l {
				t.Fatalf("device reads layout %+v", dev.Layout())
			}
			q := r.Regs(KindTX, 1)
			q.Store(RegHostPtr, 0x1234)
			if got := dev.Regs(KindTX, 1).Load(RegHostPtr); got != 0x1234 {
				t.Fatalf("device reads %#x", got)
			}
			dev.Bytes()[l.BufArea] = 0xAB
			if r.Bytes()[l.BufArea] != 0xAB {
				t.Fatal("host does not see the device's write")
			}
			if err := dev.Close(); err != nil {
				t.Fatal(err)
			}
			if c.path != "" {
				if _, err := os.Stat(c.path); err != nil {
					t.Fatalf("file gone after the device's Close: %v", err)
				}
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if c.path != "" {
				if _, err := os.Stat(c.path); !os.IsNotExist(err) {
					t.Fatalf("file left behind: %v", err)
				}
			}
		})
	}
}

func TestOpenRegionRejectsSmallFile(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("file regions need Linux")
	}
	f, err := os.CreateTemp("", "dmaring-small")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	f.Truncate(100)
	if _, err := OpenRegion(f); !errors.Is(err, ErrBadRegion) {
		t.Fatalf("err %v, want ErrBadRegion", err)
	}
}

func TestWakeups(t *testing.T) {
	w, err := newWakeups(3)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.EQ) != 3 || w.Device == nil {
		t.Fatalf("wakeups %+v", w)
	}
	w.EQ[2].Notify()
	if err := w.EQ[2].Wait(); err != nil {
		t.Fatal(err)
	}
	w.close()
	if err := w.Device.Wait(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait after close: %v", err)
	}
}
