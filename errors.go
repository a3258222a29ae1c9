package tickwire

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"gvisor.dev/gvisor/pkg/tcpip"
)

// ErrTooManyConnections is the cause (inside a *net.OpError) of a DialTCP
// that would exceed Config.MaxConnections.
var ErrTooManyConnections = errors.New("tickwire: too many connections")

// ErrIdleTimeout is the cause of a Read or Write (and of an OnReceive
// handler's last call) on a connection that was reset because nothing was
// read or written on it for Config.IdleTimeout.
var ErrIdleTimeout = errors.New("tickwire: connection idle for too long")

// ErrHandlerSet is the cause of a Read, or of a second OnReceive, on a
// connection that has an OnReceive handler.
var ErrHandlerSet = errors.New("tickwire: connection has a receive handler")

// ErrSendBufferFull is the cause of a Write, called while the connection's
// OnReceive handler runs, that found the send buffer full: such a Write
// writes what fits and returns instead of waiting, since the handler may be
// running on the goroutine that would deliver the ACKs it waits for.
var ErrSendBufferFull = errors.New("tickwire: send buffer full")

// ConfigError reports an invalid Config field.
type ConfigError struct {
	Field  string // the Config field, e.g. "MSS" or "StaticARP[10.0.0.9]"
	Reason string // what is wrong with it
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("tickwire: Config.%s: %s", e.Field, e.Reason)
}

func configErrorf(field, format string, args ...any) error {
	return &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// stackError is a netstack error converted at the API boundary. It unwraps to
// the matching errno, so errors.Is(err, syscall.EHOSTUNREACH) works, and its
// message keeps netstack's wording.
type stackError struct {
	errno syscall.Errno // 0 when no errno fits
	msg   string
}

func (e *stackError) Error() string { return "tickwire: " + e.msg }

func (e *stackError) Unwrap() error {
	if e.errno == 0 {
		return nil
	}
	return e.errno
}

// Timeout reports whether the error is a timeout, for net.Error users.
func (e *stackError) Timeout() bool { return e.errno == syscall.ETIMEDOUT }

// Temporary is required by the deprecated half of net.Error.
func (e *stackError) Temporary() bool { return e.Timeout() }

// convertError turns a tcpip.Error into an error that keeps its cause
// inspectable with errors.Is against syscall errnos.
func convertError(err tcpip.Error) error {
	if err == nil {
		return nil
	}
	var errno syscall.Errno
	switch err.(type) {
	case *tcpip.ErrHostUnreachable:
		errno = syscall.EHOSTUNREACH
	case *tcpip.ErrNetworkUnreachable, *tcpip.ErrHostDown:
		errno = syscall.ENETUNREACH
	case *tcpip.ErrNoNet:
		errno = errnoNoNet
	case *tcpip.ErrNoPortAvailable:
		errno = syscall.EAGAIN
	case *tcpip.ErrConnectionRefused:
		errno = syscall.ECONNREFUSED
	case *tcpip.ErrConnectionReset:
		errno = syscall.ECONNRESET
	case *tcpip.ErrConnectionAborted, *tcpip.ErrAborted:
		errno = syscall.ECONNABORTED
	case *tcpip.ErrTimeout:
		errno = syscall.ETIMEDOUT
	case *tcpip.ErrPortInUse:
		errno = syscall.EADDRINUSE
	case *tcpip.ErrBadLocalAddress:
		errno = syscall.EADDRNOTAVAIL
	case *tcpip.ErrClosedForSend:
		errno = syscall.EPIPE
	case *tcpip.ErrMessageTooLong:
		errno = syscall.EMSGSIZE
	case *tcpip.ErrInvalidEndpointState, *tcpip.ErrNotConnected:
		errno = syscall.ENOTCONN
	case *tcpip.ErrAlreadyConnected:
		errno = syscall.EISCONN
	case *tcpip.ErrNoBufferSpace:
		errno = syscall.ENOBUFS
	case *tcpip.ErrBadAddress:
		errno = syscall.EFAULT
	case *tcpip.ErrInvalidOptionValue:
		errno = syscall.EINVAL
	}
	return &stackError{errno: errno, msg: err.String()}
}

// opError builds the *net.OpError every public method returns.
func opError(op, network string, source, addr net.Addr, err error) error {
	return &net.OpError{Op: op, Net: network, Source: source, Addr: addr, Err: err}
}
