package tickwire

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// TCPListener is a TCP listener from ListenTCP or ServeTCP. It implements
// net.Listener; AcceptTCP returns the concrete *TCPConn, AcceptContext
// takes a context and SetDeadline bounds every Accept, as
// net.TCPListener's does. All methods are safe for concurrent use.
type TCPListener struct {
	s    *Stack
	ep   tcpip.Endpoint
	wq   *waiter.Queue
	addr *net.TCPAddr
	dl   deadline // SetDeadline's

	closeOnce sync.Once
	done      chan struct{}
}

var _ net.Listener = (*TCPListener)(nil)

// Accept implements net.Listener.Accept: AcceptTCP, with the connection as
// a net.Conn.
func (l *TCPListener) Accept() (net.Conn, error) {
	c, err := l.AcceptTCP()
	if err != nil {
		return nil, err // not a nil *TCPConn in a non-nil net.Conn
	}
	return c, nil
}

// AcceptTCP waits for the next connection. A connection beyond
// Config.MaxConnectionsPerSource from its peer's address, or beyond
// Config.MaxConnections, is reset and counted, and AcceptTCP keeps waiting.
// After Close it returns an error wrapping net.ErrClosed; past the
// deadline (SetDeadline), one wrapping os.ErrDeadlineExceeded, whose
// Timeout method reports true.
func (l *TCPListener) AcceptTCP() (*TCPConn, error) {
	return l.accept(context.Background(), true)
}

// AcceptContext is AcceptTCP until ctx ends: then it returns an error
// wrapping ctx's error (a *net.OpError whose Timeout method reports true
// for context.DeadlineExceeded). A connection that completes its
// handshake meanwhile stays in the accept queue for the next Accept.
func (l *TCPListener) AcceptContext(ctx context.Context) (*TCPConn, error) {
	if err := ctx.Err(); err != nil {
		return nil, opError("accept", "tcp", nil, l.addr, err)
	}
	return l.accept(ctx, true)
}

// SetDeadline sets the deadline of pending and future Accepts, as
// net.TCPListener.SetDeadline does; the zero t means none. ServeTCP's own
// accepting ignores it. It always returns nil.
func (l *TCPListener) SetDeadline(t time.Time) error {
	l.dl.set(t)
	return nil
}

// accept is AcceptContext without the first check of ctx, and without the
// deadline unless withDeadline.
func (l *TCPListener) accept(ctx context.Context, withDeadline bool) (*TCPConn, error) {
	cancel := ctx.Done()        // nil for context.Background()
	var expired <-chan struct{} // nil: never
	if withDeadline {
		expired = l.dl.expired()
	}
	we := registerChanEntry(l.wq, waiter.ReadableEvents)
	defer we.unregister(l.wq)
	for {
		select {
		case <-expired:
			return nil, opError("accept", "tcp", nil, l.addr, os.ErrDeadlineExceeded)
		default:
		}
		n, wq, err := l.ep.Accept(nil) // a peer address here would escape: one allocation a call
		if _, ok := err.(*tcpip.ErrWouldBlock); ok {
			select {
			case <-we.ch:
				continue
			case <-expired:
				return nil, opError("accept", "tcp", nil, l.addr, os.ErrDeadlineExceeded)
			case <-cancel:
				return nil, opError("accept", "tcp", nil, l.addr, ctx.Err())
			case <-l.done:
				return nil, opError("accept", "tcp", nil, l.addr, net.ErrClosed)
			}
		}
		if err != nil {
			if l.isClosed() || l.s.closed.Load() {
				return nil, opError("accept", "tcp", nil, l.addr, net.ErrClosed)
			}
			return nil, opError("accept", "tcp", nil, l.addr, convertError(err))
		}
		peer, _ := n.GetRemoteAddress()
		if !l.s.conns.acquire() {
			n.Abort() // sends a RST; the established connections are untouched
			l.refused(peer, "MaxConnections")
			continue
		}
		if !l.s.sources.acquire(peer.Addr) {
			l.s.conns.release()
			n.Abort()
			l.refused(peer, "MaxConnectionsPerSource")
			continue
		}
		l.s.conns.accepted.Add(1)
		c := l.s.newTCPConn(wq, n)
		c.src, c.sourced = peer.Addr, true
		return c, nil
	}
}

// refused logs an accept reset by the limit named.
func (l *TCPListener) refused(peer tcpip.FullAddress, limit string) {
	if l.s.log == nil {
		return
	}
	l.s.log.log(slog.LevelWarn, "tickwire: connection reset",
		slog.String("peer", fmt.Sprintf("%v:%d", peer.Addr, peer.Port)),
		slog.String("limit", limit), slog.Int("port", l.addr.Port))
}

func (l *TCPListener) isClosed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// Close stops listening; connections in the accept queue are reset.
func (l *TCPListener) Close() error {
	l.closeOnce.Do(func() {
		l.s.open.removeListener(l)
		l.dl.stop()
		close(l.done)
		if tep, ok := l.ep.(*tcp.Endpoint); ok && l.s.tcp != nil {
			l.s.tcp.removeListener(tep)
		}
		l.ep.Close()
	})
	return nil
}

// Addr returns the listening address.
func (l *TCPListener) Addr() net.Addr { return l.addr }
