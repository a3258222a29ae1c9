package shm_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/tickwire/tickwire/internal/shm"
)

// mapsFiles reports whether this system maps files.
func mapsFiles() bool { return runtime.GOOS == "linux" || runtime.GOOS == "darwin" }

// pair returns two mappings of one region of the kind named.
func pair(t *testing.T, kind string, size int) (a, b *shm.Region) {
	t.Helper()
	var err error
	switch kind {
	case "mem":
		a, err = shm.New(size)
	case "file":
		if !mapsFiles() {
			t.Skip("no file mapping on " + runtime.GOOS)
		}
		path := filepath.Join(t.TempDir(), "region")
		a, err = shm.Create(path, size)
		if err == nil {
			b, err = shm.Open(path)
			if err != nil {
				a.Close()
			}
		}
	case "memfd":
		if runtime.GOOS != "linux" {
			t.Skip("memfd is Linux only")
		}
		a, err = shm.CreateMemfd("shm-test", size)
	}
	if err != nil {
		t.Fatal(err)
	}
	if b == nil {
		if b, err = a.Map(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
		if err := a.Close(); err != nil {
			t.Error(err)
		}
	})
	return a, b
}

func TestSharedWords(t *testing.T) {
	for _, kind := range []string{"mem", "file", "memfd"} {
		t.Run(kind, func(t *testing.T) {
			a, b := pair(t, kind, 4096)
			if a.Len() != 4096 || b.Len() != 4096 {
				t.Fatalf("Len = %d, %d, want 4096", a.Len(), b.Len())
			}
			a.Store32(4, 0xdeadbeef)
			a.Store64(8, 0x0123456789abcdef)
			if v := b.Load32(4); v != 0xdeadbeef {
				t.Errorf("Load32 = %#x", v)
			}
			if v := b.Load64(8); v != 0x0123456789abcdef {
				t.Errorf("Load64 = %#x", v)
			}
			if b.Bytes()[4] != 0xef || b.Bytes()[8] != 0xef {
				t.Errorf("words are not little-endian in Bytes: % x", b.Bytes()[:16])
			}
			if b.CompareAndSwap32(4, 1, 2) || !b.CompareAndSwap32(4, 0xdeadbeef, 7) || a.Load32(4) != 7 {
				t.Error("CompareAndSwap32")
			}
			if b.CompareAndSwap64(8, 1, 2) || !b.CompareAndSwap64(8, 0x0123456789abcdef, 9) || a.Load64(8) != 9 {
				t.Error("CompareAndSwap64")
			}
			if v := b.Add32(4, 3); v != 10 {
				t.Errorf("Add32 = %d", v)
			}
			if v := b.Add64(4088, 5); v != 5 || a.Load64(4088) != 5 {
				t.Errorf("Add64 = %d", v)
			}
		})
	}
}

// TestConcurrentAdd has two mappings add to the same words at once: no
// increment may be lost.
func TestConcurrentAdd(t *testing.T) {
	for _, kind := range []string{"mem", "file"} {
		t.Run(kind, func(t *testing.T) {
			a, b := pair(t, kind, 64)
			const n = 10000
			var wg sync.WaitGroup
			for _, r := range []*shm.Region{a, b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range n {
						r.Add32(0, 1)
						for {
							old := r.Load64(8)
							if r.CompareAndSwap64(8, old, old+1) {
								break
							}
						}
					}
				}()
			}
			wg.Wait()
			if a.Load32(0) != 2*n || a.Load64(8) != 2*n {
				t.Errorf("got %d, %d, want %d", a.Load32(0), a.Load64(8), 2*n)
			}
		})
	}
}

func TestBadOffsetsPanic(t *testing.T) {
	r, err := shm.New(64)
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(){
		"load32 unaligned":  func() { r.Load32(2) },
		"load32 past end":   func() { r.Load32(64) },
		"load32 negative":   func() { r.Load32(-4) },
		"store64 unaligned": func() { r.Store64(4, 1) },
		"load64 past end":   func() { r.Load64(64) },
		"cas64 last word+1": func() { r.CompareAndSwap64(60, 0, 1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
	r.Load32(60) // the last words are fine
	r.Load64(56)
}

func TestInRange(t *testing.T) {
	r, _ := shm.New(64)
	for _, c := range []struct {
		off, n uint64
		want   bool
	}{{0, 64, true}, {64, 0, true}, {60, 4, true}, {60, 8, false}, {65, 0, false}, {8, ^uint64(0), false}, {^uint64(0), 2, false}} {
		if got := r.InRange(c.off, c.n); got != c.want {
			t.Errorf("InRange(%d, %d) = %v", c.off, c.n, got)
		}
	}
}

func TestSizes(t *testing.T) {
	for _, size := range []int{-1, 0, 7} {
		if _, err := shm.New(size); !errors.Is(err, shm.ErrSize) {
			t.Errorf("New(%d): %v, want ErrSize", size, err)
		}
	}
	if !mapsFiles() {
		_, err := shm.Create(filepath.Join(t.TempDir(), "r"), 4096)
		if !errors.Is(err, shm.ErrNotSupported) {
			t.Errorf("Create on %s: %v, want ErrNotSupported", runtime.GOOS, err)
		}
		return
	}
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := shm.Open(empty); !errors.Is(err, shm.ErrSize) {
		t.Errorf("Open of an empty file: %v, want ErrSize", err)
	}
	if _, err := shm.Open(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open of a missing file: %v", err)
	}
}

func TestCreateRemoves(t *testing.T) {
	if !mapsFiles() {
		t.Skip("no file mapping on " + runtime.GOOS)
	}
	path := filepath.Join(t.TempDir(), "region")
	r, err := shm.Create(path, 8192)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shm.Create(path, 8192); !errors.Is(err, os.ErrExist) {
		t.Errorf("second Create: %v, want ErrExist", err)
	}
	o, err := shm.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() != 8192 {
		t.Fatalf("file: %v, %v", st, err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("Close of an Open region removed the file: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Close of the created region left the file: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
