//go:build linux

package dmaring

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// notifier is an eventfd read through the runtime poller (non-blocking
// descriptor), so a Wait parks the goroutine, not a thread, and Close wakes
// it.
type notifier struct {
	f    *os.File
	one  [8]byte
	rbuf [8]byte
}

func newNotifier() (notifier, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return notifier{}, fmt.Errorf("dmaring: eventfd: %w", err)
	}
	n := notifier{f: os.NewFile(uintptr(fd), "eventfd")}
	n.one[0] = 1 // host byte order: little-endian on every target here
	if isBigEndian() {
		n.one[0], n.one[7] = 0, 1
	}
	return n, nil
}

func (n *notifier) notify() { n.f.Write(n.one[:]) }

func (n *notifier) wait() error {
	_, err := n.f.Read(n.rbuf[:])
	if errors.Is(err, os.ErrClosed) {
		return ErrClosed
	}
	return err
}

func (n *notifier) close() error { return n.f.Close() }
