// Package frame defines the one small interface that every frame source in
// tickwire implements: a batch of link-layer frames, each with its capture
// timestamp, read into buffers that the caller owns.
//
// The pcap and pcapng file reader (link/pcap) and live AF_PACKET capture
// (link/afpacket) implement Source, so the same reader serves both data
// paths: the active stack (tickwire, through pcap.Replayer) and the passive
// reassembler (mirror).
//
// A typical loop allocates its batch once and reuses it:
//
//	batch := frame.NewBatch(64, 2048)
//	for {
//		n, err := src.ReadFrames(batch)
//		for _, f := range batch[:n] {
//			handle(f.Data(), f.Time)
//		}
//		if err != nil {
//			break // io.EOF at the end of a file
//		}
//	}
//
// The package example runs this loop over a Source that serves frames from
// memory.
//
// This package has no dependency on the netstack.
package frame

// Frame is one slot of a batch. The caller owns Buf; a Source fills it.
type Frame struct {
	// Buf is caller-owned storage. A Source writes a frame into Buf[:N] and
	// never reslices or replaces Buf. Its length is the largest frame the
	// slot can hold: a longer frame is truncated to len(Buf) and WireLen
	// tells how long it was.
	Buf []byte
	// N is the number of bytes of Buf that hold the frame.
	N int
	// WireLen is the frame's length on the wire; it is larger than N when
	// the capture or the slot truncated the frame.
	WireLen int
	// Time is the capture timestamp in nanoseconds since the Unix epoch,
	// 0 when the source does not know it.
	Time int64
}

// Data returns the frame's bytes, Buf[:N]. They are valid until the next
// call to ReadFrames with the same batch.
func (f *Frame) Data() []byte { return f.Buf[:f.N] }

// Truncated reports whether the frame was cut short by the capture or the slot.
func (f *Frame) Truncated() bool { return f.WireLen > f.N }

// Source reads link-layer frames in batches.
//
// ReadFrames fills frames[0:n] and returns n. It returns n > 0 with a nil
// error while frames remain; at the end of a finite source it returns the
// frames it has (possibly 0) with io.EOF. A Source never allocates packet
// memory: it copies each frame into the caller's Buf. Implementations
// document whether ReadFrames may be called from several goroutines; by
// default it may not.
type Source interface {
	ReadFrames(frames []Frame) (n int, err error)
	Close() error
}

// NewBatch returns n frames, each with a Buf of size bytes carved from one
// allocation, for use with Source.ReadFrames.
func NewBatch(n, size int) []Frame {
	mem := make([]byte, n*size)
	batch := make([]Frame, n)
	for i := range batch {
		batch[i].Buf = mem[i*size : (i+1)*size : (i+1)*size]
	}
	return batch
}
