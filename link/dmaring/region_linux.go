//go:build linux

package dmaring

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// newFileRegion creates a region of l.Size bytes in a memfd (path "") or a
// new file at path (under /dev/shm), maps it and writes nothing yet.
func newFileRegion(l Layout, path string) (*Region, error) {
	var f *os.File
	own := &regionOwner{}
	if path == "" {
		fd, err := unix.MemfdCreate("tickwire-dmaring", unix.MFD_CLOEXEC)
		if err != nil {
			return nil, fmt.Errorf("dmaring: memfd_create: %w", err)
		}
		f = os.NewFile(uintptr(fd), "memfd:tickwire-dmaring")
	} else {
		var err error
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("dmaring: create region: %w", err)
		}
		own.path = path
	}
	if err := f.Truncate(int64(l.Size)); err != nil {
		f.Close()
		own.remove()
		return nil, fmt.Errorf("dmaring: size region: %w", err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, l.Size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		own.remove()
		return nil, fmt.Errorf("dmaring: mmap region: %w", err)
	}
	r := &Region{mem: mem, layout: l, file: f, own: own}
	r.unmap = func() error {
		err := unix.Munmap(mem)
		f.Close()
		own.remove()
		return err
	}
	return r, nil
}

func (o *regionOwner) remove() {
	if o.path != "" {
		os.Remove(o.path)
		o.path = ""
	}
}

// mapFile maps the region in f and reads its layout. With adopt the
// mapping owns f (closes it); otherwise it maps a duplicate.
func mapFile(f *os.File, adopt bool) (*Region, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("dmaring: stat region: %w", err)
	}
	size := st.Size()
	if size < PageSize || size > MaxRegionSize {
		return nil, fmt.Errorf("%w: %d bytes (%s)", ErrBadRegion, size, ErrRegionSmall)
	}
	if !adopt {
		fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("dmaring: dup region: %w", err)
		}
		f = os.NewFile(uintptr(fd), f.Name())
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("dmaring: mmap region: %w", err)
	}
	l, err := ReadLayout(mem, int(size))
	if err != nil {
		unix.Munmap(mem)
		f.Close()
		return nil, err
	}
	r := &Region{mem: mem, layout: l, file: f, own: &regionOwner{}}
	r.unmap = func() error {
		err := unix.Munmap(mem)
		f.Close()
		return err
	}
	return r, nil
}
