// Package shm maps shared-memory regions and gives atomic access to the words
// in them, for the rings that a host and a device (or a software model of
// one, in another goroutine or another process) share: hwoffload's register
// window and result rings, and link/dmaring's queues.
//
// A Region is one mapping. It lives in a file mapped MAP_SHARED (Create, a new
// file such as /dev/shm/NAME; CreateMemfd, an anonymous memfd on Linux; Open
// and OpenFile, a file another process made), or in Go memory (New, on every
// system; both sides then use the same mapping or its Map). Mapping files
// works on Linux and macOS; elsewhere Create, CreateMemfd, Open and OpenFile
// return an error wrapping ErrNotSupported and New still works.
//
//	r, err := shm.Create("/dev/shm/u50", 1<<20) // removed again by r.Close
//	r.Store64(0x100, cycles)                    // publish
//	peer, err := shm.Open("/dev/shm/u50")       // in the other process
//	v := peer.Load64(0x100)
//
// The shared words are read and written with the sequentially consistent
// atomics of sync/atomic at byte offsets (Load32, Store32, CompareAndSwap32,
// Add32 and their 64-bit forms): a Store publishes every write made before it
// (plain writes through Bytes included) to a side whose Load returns the
// stored value. Words are in host byte order, little-endian on every platform
// tickwire is built for. A 32-bit word's offset must be a multiple of 4 and a
// 64-bit word's a multiple of 8; a region's first byte is 8-byte aligned (a
// mapping is page aligned, Go memory is carved from []uint64), which 64-bit
// atomics need on 386 and 32-bit ARM. An offset out of range or misaligned is
// a programmer error and panics: compute offsets from a checked layout, never
// from bytes the other side wrote without checking them first (InRange).
//
// Regions are safe for concurrent use: the atomics from any goroutine, Close
// once everything reading Bytes is done.
//
// The package knows no layout: a user keeps its own on top (hwoffload's
// register window and rings; link/dmaring's Region, whose Layout it checks
// after OpenFile and Map).
package shm

import (
	"errors"
	"fmt"
	"os"
	"sync"
)

// MaxSize bounds a region's size: 1 TiB on 64-bit systems, 1 GiB on 32-bit
// ones. A file larger than this is refused by Open.
const MaxSize = int(1<<30) * int(1+(^uint(0)>>63)*1023)

var (
	// ErrNotSupported is returned where this system cannot map files.
	ErrNotSupported = errors.New("shm: shared-memory files not supported on this system")
	// ErrSize is wrapped by errors for a size that is not from 8 to MaxSize
	// bytes.
	ErrSize = errors.New("shm: region size out of range")
)

// Region is one mapping of a shared-memory region.
type Region struct {
	mem  []byte
	file *os.File // nil for Go memory
	path string   // the file to remove on Close, "" for none

	closeOnce sync.Once
	closeErr  error
	unmap     func() error // nil for Go memory
}

func checkSize(size int64) error {
	if size < 8 || size > int64(MaxSize) {
		return fmt.Errorf("%w: %d bytes (from 8 to %d)", ErrSize, size, MaxSize)
	}
	return nil
}

// New returns a region of size bytes, zeroed, in Go memory, 8-byte aligned. Its
// Map returns views of the same memory; it has no File.
func New(size int) (*Region, error) {
	if err := checkSize(int64(size)); err != nil {
		return nil, err
	}
	return &Region{mem: alignedBytes(size)}, nil
}

// Create makes a new file of size bytes, zeroed, at path (it must not exist;
// under /dev/shm on Linux it lives in memory), maps it and returns the
// mapping. Its Close unmaps it and removes the file.
func Create(path string, size int) (*Region, error) {
	if err := checkSize(int64(size)); err != nil {
		return nil, err
	}
	return createFile(path, size)
}

// CreateMemfd makes an anonymous shared-memory file (memfd_create, Linux
// only) of size bytes, zeroed, named name (for /proc/PID/fd only) and maps it.
// Hand File to another process to share it.
func CreateMemfd(name string, size int) (*Region, error) {
	if err := checkSize(int64(size)); err != nil {
		return nil, err
	}
	return createMemfd(name, size)
}

// Open maps the whole of the existing file at path, read-write. Its Close
// unmaps it and leaves the file.
func Open(path string) (*Region, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: open region: %w", err)
	}
	r, err := OpenFile(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

// OpenFile maps the whole of f, which must be open read-write. On success
// the Region takes ownership of f (its Close closes f); on error the caller
// keeps it.
func OpenFile(f *os.File) (*Region, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("shm: stat region: %w", err)
	}
	if err := checkSize(st.Size()); err != nil {
		return nil, err
	}
	return mapFile(f, int(st.Size()))
}

// Map maps the region a second time, as another user of it would: a file
// region is mapped again from a duplicate of its descriptor, a Go-memory
// region returns a view of the same memory. Closing either mapping leaves
// the other usable (except that the creator's Close removes the file's name).
func (r *Region) Map() (*Region, error) {
	if r.file == nil {
		return &Region{mem: r.mem}, nil
	}
	f, err := dupFile(r.file)
	if err != nil {
		return nil, err
	}
	m, err := mapFile(f, len(r.mem))
	if err != nil {
		f.Close()
		return nil, err
	}
	return m, nil
}

// Bytes returns the whole mapping, valid until Close. Use it for the plain
// (non-atomic) parts: record bodies, frame bytes.
func (r *Region) Bytes() []byte { return r.mem }

// Len returns the region's size in bytes.
func (r *Region) Len() int { return len(r.mem) }

// File returns the region's file, nil for Go memory. It is owned by the
// Region and closed by Close.
func (r *Region) File() *os.File { return r.file }

// InRange reports whether [off, off+n) lies inside the region, for offsets
// that the other side of the region wrote.
func (r *Region) InRange(off, n uint64) bool {
	return off <= uint64(len(r.mem)) && n <= uint64(len(r.mem))-off
}

// Close unmaps the region, closes its file and, for the Region Create
// returned, removes the file. Nothing read from Bytes may be used after it.
// Later calls return the first one's result.
func (r *Region) Close() error {
	r.closeOnce.Do(func() {
		if r.unmap != nil {
			r.closeErr = r.unmap()
		}
		if r.file != nil {
			if err := r.file.Close(); r.closeErr == nil {
				r.closeErr = err
			}
		}
		if r.path != "" {
			if err := os.Remove(r.path); err != nil && r.closeErr == nil {
				r.closeErr = err
			}
		}
	})
	return r.closeErr
}
