package capgen

import (
	"io"

	"github.com/tickwire/tickwire/link/frame"
)

// Source returns the feed's frames as a frame.Source, for benchmarks and
// tests that want the reader loop of a capture without a file. Like a file
// reader it copies each frame into the caller's buffers (truncating to
// len(Buf)) and returns io.EOF after the last one.
func (f *Feed) Source() frame.Source { return &memSource{frames: f.Frames} }

type memSource struct {
	frames []Frame
	next   int
}

func (s *memSource) ReadFrames(frames []frame.Frame) (int, error) {
	n := 0
	for n < len(frames) && s.next < len(s.frames) {
		src := &s.frames[s.next]
		dst := &frames[n]
		dst.N = copy(dst.Buf, src.Data)
		dst.WireLen = len(src.Data)
		dst.Time = src.Time
		dst.LinkType, dst.ChecksumVerified = frame.LinkTypeEthernet, false
		s.next++
		n++
	}
	if s.next == len(s.frames) {
		return n, io.EOF
	}
	return n, nil
}

func (s *memSource) Close() error {
	s.next = len(s.frames)
	return nil
}
