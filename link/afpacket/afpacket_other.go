//go:build !linux

package afpacket

import (
	"io"

	"github.com/tickwire/tickwire/link/frame"
)

// Source is a live capture from one interface. It exists only on Linux;
// elsewhere New returns ErrUnsupported.
type Source struct{}

// New returns ErrUnsupported: AF_PACKET is Linux only.
func New(iface string, cfg Config) (*Source, error) {
	return nil, &Error{Op: "open", Interface: iface, Err: ErrUnsupported}
}

// ReadFrames implements frame.Source.ReadFrames.
func (s *Source) ReadFrames(frames []frame.Frame) (int, error) { return 0, io.EOF }

// Close implements frame.Source.Close.
func (s *Source) Close() error { return nil }

// Stats returns the counters.
func (s *Source) Stats() Stats { return Stats{} }
