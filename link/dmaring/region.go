package dmaring

import (
	"fmt"
	"net"
	"os"

	"github.com/tickwire/tickwire/internal/shm"
)

// Region is one mapping of a shared memory region: host and device each map
// it (Map), read and write the plain fields (descriptors, completion and
// event bodies, frame bytes) through Bytes, and the shared words through
// Load32, Store32 and CompareAndSwap32 (sequentially consistent atomics:
// a Store32 publishes every write before it to a side whose Load32 reads
// the stored value).
//
// A region lives in a memfd or a file under /dev/shm (Linux), or in Go
// memory (InMemory, every system; both sides then share one mapping). The
// words written with atomics are in host byte order, little-endian on every
// platform tickwire is built for, and so the same as mqnic's.
type Region struct {
	m      *shm.Region // the mapping: files, Go memory and the atomics
	mem    []byte      // m.Bytes(), read on every ring access
	layout Layout
}

// Bytes returns the whole mapping. It is valid until Close.
func (r *Region) Bytes() []byte { return r.mem }

// Layout returns where everything is in the region.
func (r *Region) Layout() Layout { return r.layout }

// File returns the region's file (a memfd or a /dev/shm file), nil for an
// in-memory region. Pass it (or its descriptor) to a device in another
// process.
func (r *Region) File() *os.File { return r.m.File() }

// Map maps the region a second time: the view a device takes. For an
// in-memory region it returns a view of the same memory. Close the result
// when done; it does not close r.
func (r *Region) Map() (*Region, error) {
	m, err := r.m.Map()
	if err != nil {
		return nil, fmt.Errorf("dmaring: map region: %w", err)
	}
	if m.File() == nil {
		return &Region{m: m, mem: m.Bytes(), layout: r.layout}, nil
	}
	return checkMapping(m)
}

// checkMapping reads the layout of a file mapping; on error it closes m.
func checkMapping(m *shm.Region) (*Region, error) {
	l, err := ReadLayout(m.Bytes(), m.Len())
	if err != nil {
		m.Close()
		return nil, err
	}
	return &Region{m: m, mem: m.Bytes(), layout: l}, nil
}

// OpenRegion maps a region another process created, from its file, and
// checks its header. The file stays open until Close.
func OpenRegion(f *os.File) (*Region, error) { return openFile(f) }

// HostMAC returns the Ethernet address the host's Endpoint wrote in the
// header, for a device in another process whose wire needs it (a TAP
// device addressed to the host).
func (r *Region) HostMAC() net.HardwareAddr {
	return append(net.HardwareAddr(nil), r.mem[HdrMAC:HdrMAC+6]...)
}

// Close unmaps the region (the creator's Close also removes a /dev/shm
// file it created). Nothing read from Bytes may be used after it.
func (r *Region) Close() error { return r.m.Close() }

// newMemRegion allocates an in-memory region of l.Size bytes, 8-byte
// aligned for the atomics.
func newMemRegion(l Layout) *Region {
	m, err := shm.New(l.Size)
	if err != nil {
		panic(err) // a Layout's size is always in shm's range
	}
	return &Region{m: m, mem: m.Bytes(), layout: l}
}

// Load32 atomically loads the word at byte offset off.
func (r *Region) Load32(off int) uint32 { return r.m.Load32(off) }

// Store32 atomically stores v into the word at off.
func (r *Region) Store32(off int, v uint32) { r.m.Store32(off, v) }

// CompareAndSwap32 is atomic.CompareAndSwapUint32 on the word at off.
func (r *Region) CompareAndSwap32(off int, old, v uint32) bool {
	return r.m.CompareAndSwap32(off, old, v)
}

// Add32 atomically adds d to the word at off and returns the new value.
func (r *Region) Add32(off int, d uint32) uint32 { return r.m.Add32(off, d) }
