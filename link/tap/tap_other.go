//go:build !linux

package tap

import (
	"net"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Endpoint is a stack.LinkEndpoint on a TAP device; on this system New
// always fails with ErrNotSupported.
type Endpoint struct {
	stack.LinkEndpoint
}

// New returns ErrNotSupported: TAP devices are Linux-only in tickwire.
func New(cfg Config) (*Endpoint, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return nil, ErrNotSupported
}

// Name returns the device name.
func (e *Endpoint) Name() string { return "" }

// MAC returns the stack side's Ethernet address.
func (e *Endpoint) MAC() net.HardwareAddr { return nil }

// Created reports whether New created the device.
func (e *Endpoint) Created() bool { return false }

// SetBusyPoll does nothing on this system.
func (e *Endpoint) SetBusyPoll(time.Duration) {}

// SetLockOSThread does nothing on this system.
func (e *Endpoint) SetLockOSThread(bool) {}

// Stats returns the endpoint's counters.
func (e *Endpoint) Stats() Stats { return Stats{} }

// RxChecksumDrops returns zeros on this system.
func (e *Endpoint) RxChecksumDrops() (ipv4, tcp, udp, icmp uint64) { return 0, 0, 0, 0 }
