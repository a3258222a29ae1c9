//go:build linux

package dmaring

import (
	"fmt"
	"os"

	"github.com/tickwire/tickwire/internal/shm"
)

// newFileRegion creates a region of l.Size bytes in a memfd (path "") or a
// new file at path (under /dev/shm), maps it and writes nothing yet.
func newFileRegion(l Layout, path string) (*Region, error) {
	var m *shm.Region
	var err error
	if path == "" {
		m, err = shm.CreateMemfd("tickwire-dmaring", l.Size)
	} else {
		m, err = shm.Create(path, l.Size)
	}
	if err != nil {
		return nil, fmt.Errorf("dmaring: %w", err)
	}
	return &Region{m: m, mem: m.Bytes(), layout: l}, nil
}

// openFile maps the region in f and reads its layout. Once the size is
// checked, the mapping owns f: it is closed on a later error too.
func openFile(f *os.File) (*Region, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("dmaring: stat region: %w", err)
	}
	if size := st.Size(); size < PageSize || size > MaxRegionSize {
		return nil, fmt.Errorf("%w: %d bytes (%s)", ErrBadRegion, size, ErrRegionSmall)
	}
	m, err := shm.OpenFile(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("dmaring: %w", err)
	}
	return checkMapping(m)
}
