package dmaring

import (
	"net"
	"os"
	"sync"
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
	mem    []byte
	layout Layout
	file   *os.File // nil for an in-memory region
	own    *regionOwner

	closeOnce sync.Once
	unmap     func() error
}

// regionOwner is shared by every mapping of one region; the creator's Close
// removes what it created.
type regionOwner struct {
	path string // /dev/shm file to remove, "" for none
}

// Bytes returns the whole mapping. It is valid until Close.
func (r *Region) Bytes() []byte { return r.mem }

// Layout returns where everything is in the region.
func (r *Region) Layout() Layout { return r.layout }

// File returns the region's file (a memfd or a /dev/shm file), nil for an
// in-memory region. Pass it (or its descriptor) to a device in another
// process.
func (r *Region) File() *os.File { return r.file }

// Map maps the region a second time: the view a device takes. For an
// in-memory region it returns a view of the same memory. Close the result
// when done; it does not close r.
func (r *Region) Map() (*Region, error) {
	if r.file == nil {
		return &Region{mem: r.mem, layout: r.layout, own: r.own, unmap: func() error { return nil }}, nil
	}
	return mapFile(r.file, false)
}

// OpenRegion maps a region another process created, from its file, and
// checks its header. The file stays open until Close.
func OpenRegion(f *os.File) (*Region, error) { return mapFile(f, true) }

// HostMAC returns the Ethernet address the host's Endpoint wrote in the
// header, for a device in another process whose wire needs it (a TAP
// device addressed to the host).
func (r *Region) HostMAC() net.HardwareAddr {
	return append(net.HardwareAddr(nil), r.mem[HdrMAC:HdrMAC+6]...)
}

// Close unmaps the region (the creator's Close also removes a /dev/shm
// file it created). Nothing read from Bytes may be used after it.
func (r *Region) Close() error {
	var err error
	r.closeOnce.Do(func() {
		err = r.unmap()
	})
	return err
}

// newMemRegion allocates an in-memory region of l.Size bytes, 8-byte
// aligned (it is carved from a []uint64) for the atomics.
func newMemRegion(l Layout) *Region {
	return &Region{mem: alignedBytes(l.Size), layout: l, own: &regionOwner{}, unmap: func() error { return nil }}
}
