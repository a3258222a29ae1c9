//go:build !linux || !(amd64 || arm64)

package afxdp

import (
	"io"
	"net"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/internal/linkbase"
)

// Endpoint is a stack.LinkEndpoint on AF_XDP sockets. It exists only on
// linux/amd64 and linux/arm64; elsewhere New returns ErrNotSupported.
type Endpoint struct {
	linkbase.Endpoint
}

var _ stack.LinkEndpoint = (*Endpoint)(nil)

// New returns ErrNotSupported off linux/amd64 and linux/arm64.
func New(iface string, cfg Config) (*Endpoint, error) {
	if err := cfg.validateEndpoint(); err != nil {
		return nil, &Error{Op: "open", Interface: iface, Err: err}
	}
	return nil, &Error{Op: "open", Interface: iface, Err: ErrNotSupported}
}

// MAC returns the stack's Ethernet address.
func (e *Endpoint) MAC() net.HardwareAddr { return nil }

// Interface returns the interface name.
func (e *Endpoint) Interface() string { return "" }

// ZeroCopy reports whether every socket runs in zero-copy mode.
func (e *Endpoint) ZeroCopy() bool { return false }

// AttachMode returns the mode the XDP program was attached in.
func (e *Endpoint) AttachMode() AttachMode { return AttachAuto }

// Stats returns the endpoint's counters.
func (e *Endpoint) Stats() Stats { return Stats{} }

// Queues returns 0.
func (e *Endpoint) Queues() int { return 0 }

// QueueStats returns zero Stats.
func (e *Endpoint) QueueStats(int) Stats { return Stats{} }

// SetBusyPoll implements link.BusyPoller.
func (e *Endpoint) SetBusyPoll(d time.Duration) {}

// WritePackets implements stack.LinkEndpoint.WritePackets.
func (e *Endpoint) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	return 0, &tcpip.ErrClosedForSend{}
}

// Source is a live capture over AF_XDP sockets. It exists only on
// linux/amd64 and linux/arm64; elsewhere NewSource returns ErrNotSupported.
type Source struct{}

// NewSource returns ErrNotSupported off linux/amd64 and linux/arm64.
func NewSource(iface string, cfg Config) (*Source, error) {
	if err := cfg.validateSource(); err != nil {
		return nil, &Error{Op: "open", Interface: iface, Err: err}
	}
	return nil, &Error{Op: "open", Interface: iface, Err: ErrNotSupported}
}

// ReadFrames implements frame.Source.ReadFrames.
func (s *Source) ReadFrames(frames []frame.Frame) (int, error) { return 0, io.EOF }

// Close implements frame.Source.Close.
func (s *Source) Close() error { return nil }

// ZeroCopy reports whether every socket runs in zero-copy mode.
func (s *Source) ZeroCopy() bool { return false }

// AttachMode returns the mode the XDP program was attached in.
func (s *Source) AttachMode() AttachMode { return AttachAuto }

// Stats returns the counters.
func (s *Source) Stats() Stats { return Stats{} }

// Queues returns 0.
func (s *Source) Queues() int { return 0 }

// QueueStats returns zero Stats.
func (s *Source) QueueStats(int) Stats { return Stats{} }

// SetBusyPoll makes ReadFrames spin before it blocks.
func (s *Source) SetBusyPoll(d time.Duration) {}
