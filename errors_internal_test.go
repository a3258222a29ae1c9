package tickwire

import (
	"errors"
	"net"
	"syscall"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip"
)

// TestConvertError checks that every netstack error convertError maps
// unwraps to its errno on the platform the test runs on, and that the
// message keeps netstack's wording.
func TestConvertError(t *testing.T) {
	for _, tt := range []struct {
		err   tcpip.Error
		errno syscall.Errno
	}{
		{&tcpip.ErrHostUnreachable{}, syscall.EHOSTUNREACH},
		{&tcpip.ErrNetworkUnreachable{}, syscall.ENETUNREACH},
		{&tcpip.ErrHostDown{}, syscall.ENETUNREACH},
		{&tcpip.ErrNoNet{}, errnoNoNet},
		{&tcpip.ErrNoPortAvailable{}, syscall.EAGAIN},
		{&tcpip.ErrConnectionRefused{}, syscall.ECONNREFUSED},
		{&tcpip.ErrConnectionReset{}, syscall.ECONNRESET},
		{&tcpip.ErrConnectionAborted{}, syscall.ECONNABORTED},
		{&tcpip.ErrAborted{}, syscall.ECONNABORTED},
		{&tcpip.ErrTimeout{}, syscall.ETIMEDOUT},
		{&tcpip.ErrPortInUse{}, syscall.EADDRINUSE},
		{&tcpip.ErrBadLocalAddress{}, syscall.EADDRNOTAVAIL},
		{&tcpip.ErrClosedForSend{}, syscall.EPIPE},
		{&tcpip.ErrMessageTooLong{}, syscall.EMSGSIZE},
		{&tcpip.ErrInvalidEndpointState{}, syscall.ENOTCONN},
		{&tcpip.ErrNotConnected{}, syscall.ENOTCONN},
		{&tcpip.ErrAlreadyConnected{}, syscall.EISCONN},
		{&tcpip.ErrNoBufferSpace{}, syscall.ENOBUFS},
		{&tcpip.ErrBadAddress{}, syscall.EFAULT},
		{&tcpip.ErrInvalidOptionValue{}, syscall.EINVAL},
		{&tcpip.ErrWouldBlock{}, 0},
	} {
		err := convertError(tt.err)
		if want := "tickwire: " + tt.err.String(); err.Error() != want {
			t.Errorf("convertError(%T) = %q, want %q", tt.err, err, want)
		}
		if tt.errno == 0 {
			if errors.Unwrap(err) != nil {
				t.Errorf("convertError(%T) unwraps to %v, want nothing", tt.err, errors.Unwrap(err))
			}
			continue
		}
		if !errors.Is(err, tt.errno) {
			t.Errorf("convertError(%T) = %v, not errors.Is %v", tt.err, err, tt.errno)
		}
		var ne net.Error
		if !errors.As(err, &ne) || ne.Timeout() != (tt.errno == syscall.ETIMEDOUT) {
			t.Errorf("convertError(%T): net.Error Timeout wrong", tt.err)
		}
	}
	if convertError(nil) != nil {
		t.Error("convertError(nil) != nil")
	}
}
