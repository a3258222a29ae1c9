package frame_test

import (
	"fmt"
	"io"

	"github.com/tickwire/tickwire/link/frame"
)

// memSource is a frame.Source that serves frames held in memory. Like a
// capture file reader it copies each frame into the caller's Buf, truncating
// it to len(Buf), and returns io.EOF with the last frames.
type memSource struct {
	frames [][]byte
	times  []int64
	next   int
}

// ReadFrames implements frame.Source.ReadFrames.
func (s *memSource) ReadFrames(batch []frame.Frame) (int, error) {
	n := 0
	for n < len(batch) && s.next < len(s.frames) {
		f := &batch[n]
		f.N = copy(f.Buf, s.frames[s.next])
		f.WireLen = len(s.frames[s.next])
		f.Time = s.times[s.next]
		f.LinkType = frame.LinkTypeEthernet
		s.next++
		n++
	}
	if s.next == len(s.frames) {
		return n, io.EOF
	}
	return n, nil
}

// Close implements frame.Source.Close.
func (s *memSource) Close() error {
	s.next = len(s.frames)
	return nil
}

func newMemSource() *memSource {
	return &memSource{
		frames: [][]byte{
			[]byte("first"),
			[]byte("second frame"),
			[]byte("a third frame, longer than a slot"),
		},
		times: []int64{1_700_000_000_000_000_001, 1_700_000_000_000_000_002, 1_700_000_000_000_000_003},
	}
}

// The read loop of the package doc: one batch allocated before the loop and
// reused for every call, the frames of each call handled before the error is
// looked at (a Source returns its last frames together with io.EOF).
func Example() {
	var src frame.Source = newMemSource()
	defer src.Close()

	batch := frame.NewBatch(2, 16) // 2 slots of 16 bytes
	for {
		n, err := src.ReadFrames(batch)
		fmt.Println("read", n, err)
		for _, f := range batch[:n] {
			fmt.Printf("  %d %q wire %d truncated %v\n", f.Time, f.Data(), f.WireLen, f.Truncated())
		}
		if err != nil {
			break // io.EOF at the end of the source
		}
	}
	// Output:
	// read 2 <nil>
	//   1700000000000000001 "first" wire 5 truncated false
	//   1700000000000000002 "second frame" wire 12 truncated false
	// read 1 EOF
	//   1700000000000000003 "a third frame, l" wire 33 truncated true
}

// NewBatch carves every slot from one allocation. Each slot's capacity ends
// where the next slot begins, so appending to a Buf cannot spill into its
// neighbour.
func ExampleNewBatch() {
	batch := frame.NewBatch(3, 2048)
	fmt.Println(len(batch), len(batch[0].Buf), cap(batch[0].Buf), batch[0].N)
	// Output:
	// 3 2048 2048 0
}

// A Source fills the slots it returns and leaves the others alone; at the
// end it keeps returning 0 frames with io.EOF.
func ExampleSource() {
	src := newMemSource()
	batch := frame.NewBatch(8, 64)
	n, err := src.ReadFrames(batch)
	fmt.Println(n, err)
	n, err = src.ReadFrames(batch)
	fmt.Println(n, err == io.EOF)
	// Output:
	// 3 EOF
	// 0 true
}

// A frame longer than its slot keeps the bytes that fit; WireLen says how
// long it was.
func ExampleFrame_Truncated() {
	f := frame.Frame{Buf: make([]byte, 4)}
	wire := []byte("abcdefgh")
	f.N, f.WireLen = copy(f.Buf, wire), len(wire)
	fmt.Printf("%q %d %v\n", f.Data(), f.WireLen, f.Truncated())
	// Output:
	// "abcd" 8 true
}
