package main

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// forceReadBuffer sets c's receive buffer to size past net.core.rmem_max
// (SO_RCVBUFFORCE), which needs CAP_NET_ADMIN.
func forceReadBuffer(t *testing.T, c *net.UDPConn, size int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var forceErr error
	if err := rc.Control(func(fd uintptr) {
		forceErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, size)
	}); err != nil {
		t.Fatal(err)
	}
	return forceErr
}
