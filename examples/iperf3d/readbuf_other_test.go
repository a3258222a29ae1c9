//go:build !linux

package main

import (
	"errors"
	"net"
	"testing"
)

// forceReadBuffer fails: only Linux can set a receive buffer past the
// system's cap.
func forceReadBuffer(*testing.T, *net.UDPConn, int) error { return errors.ErrUnsupported }
