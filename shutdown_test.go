package tickwire_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// pattern returns n bytes that tell where they are.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}

// TestShutdownDrains: bytes written before Shutdown, on an open connection
// and on one the program closed, reach a client that reads them only after
// Shutdown began, then EOF; Shutdown returns nil once they are
// acknowledged, and the stack is closed.
func TestShutdownDrains(t *testing.T) {
	p := newPair(t, nil)
	open, openSrv := p.connPair(t)
	closed, closedSrv := p.connPair(t)
	// 48 KiB: more than the client's 32 KiB window, so some of it is still
	// in the server's send buffer when Shutdown begins.
	data := pattern(48 << 10)
	for _, c := range []*tickwire.TCPConn{openSrv, closedSrv} {
		if _, err := c.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	closedSrv.Close()

	done := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() { done <- p.b.Shutdown(ctx) }()
	for i, c := range []*tickwire.TCPConn{open, closed} {
		if i == 1 {
			// The closed connection's bytes are not all acknowledged:
			// Shutdown must still wait for them.
			select {
			case err := <-done:
				t.Fatalf("Shutdown returned (%v) before the closed connection drained", err)
			case <-time.After(200 * time.Millisecond):
			}
		}
		c.SetReadDeadline(time.Now().Add(time.Minute))
		got, err := io.ReadAll(c) // up to EOF
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("client read %d of %d bytes (equal: %v), then %v; want all, then EOF", len(got), len(data), bytes.Equal(got, data), err)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Shutdown still waiting a minute after the client read everything")
	}
	if _, err := p.b.ListenTCP(7); !errors.Is(err, net.ErrClosed) {
		t.Errorf("ListenTCP after Shutdown: %v, want net.ErrClosed", err)
	}
	if _, err := openSrv.Write([]byte("late")); err == nil {
		t.Error("Write after Shutdown succeeded")
	}
}

// TestShutdownStopsAccepting: Shutdown closes listeners and refuses new
// ones and dials at once, while it waits.
func TestShutdownStopsAccepting(t *testing.T) {
	p := newPair(t, nil)
	ln, err := p.b.ListenTCP(7)
	if err != nil {
		t.Fatal(err)
	}
	_, stuck := p.connPair(t) // its peer never reads: it cannot drain
	if _, err := stuck.Write(pattern(48 << 10)); err != nil {
		t.Fatal(err)
	}
	accepted := make(chan error, 1)
	go func() {
		_, err := ln.Accept()
		accepted <- err
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.b.Shutdown(ctx) }()
	if err := <-accepted; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept during Shutdown: %v, want net.ErrClosed", err)
	}
	if _, err := p.b.ListenTCP(8); !errors.Is(err, net.ErrClosed) {
		t.Errorf("ListenTCP during Shutdown: %v, want net.ErrClosed", err)
	}
	if _, err := p.b.DialTCP(ctxTimeout(t, 10*time.Second), addrPort(addrA, 9)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("DialTCP during Shutdown: %v, want net.ErrClosed", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown: %v, want context.Canceled", err)
	}
}

// TestShutdownAborts: a connection whose peer does not read cannot drain;
// when ctx ends, Shutdown resets it and reports ctx's error.
func TestShutdownAborts(t *testing.T) {
	p := newPair(t, nil)
	c, s := p.connPair(t)
	if _, err := s.Write(pattern(48 << 10)); err != nil {
		t.Fatal(err)
	}
	start := time.Now() // before the context: its deadline counts from its making
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := p.b.Shutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown: %v, want context.DeadlineExceeded", err)
	}
	if el := time.Since(start); el < 200*time.Millisecond {
		t.Errorf("Shutdown returned after %v, before its deadline", el)
	}
	c.SetReadDeadline(time.Now().Add(time.Minute))
	got, err := io.ReadAll(c)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("client read %d bytes, then %v; want ECONNRESET", len(got), err)
	}
	if got := p.b.Shutdown(context.Background()); got != nil {
		t.Errorf("second Shutdown: %v", got)
	}
}

// TestLingerZero: after SetLinger(0), Close resets the connection.
func TestLingerZero(t *testing.T) {
	p := newPair(t, nil)
	for _, linger := range []int{-1, 0} {
		c, s := p.connPair(t)
		var frames capture
		p.pb.SetSniffer(frames.record)
		if err := s.SetLinger(linger); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write([]byte("last words")); err != nil {
			t.Fatal(err)
		}
		s.Close()
		c.SetReadDeadline(time.Now().Add(time.Minute))
		_, err := io.ReadAll(c)
		p.pb.SetSniffer(nil)
		rst := 0
		for _, f := range frames.snapshot() {
			if seg, _, ok := tcpSegment(f); ok && seg.SourcePort() == port(s) && seg.Flags()&header.TCPFlagRst != 0 {
				rst++
			}
		}
		switch {
		case linger == 0 && (rst == 0 || !errors.Is(err, syscall.ECONNRESET)):
			t.Errorf("SetLinger(0), Close: %d RSTs sent, client read ended with %v; want a RST and ECONNRESET", rst, err)
		case linger < 0 && (rst != 0 || err != nil):
			t.Errorf("SetLinger(-1), Close: %d RSTs sent, client read ended with %v; want none and EOF", rst, err)
		}
	}
}

// TestLingerWait: after SetLinger(sec > 0), Close waits for the peer to
// acknowledge everything; when it does not in time, Close resets.
func TestLingerWait(t *testing.T) {
	p := newPair(t, nil)
	data := pattern(48 << 10)

	// The peer reads after 100 ms: Close returns once it has.
	c, s := p.connPair(t)
	s.SetLinger(30)
	if _, err := s.Write(data); err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		c.SetReadDeadline(time.Now().Add(time.Minute))
		got, err := io.ReadAll(c)
		if err == nil && !bytes.Equal(got, data) {
			err = errors.New("wrong bytes")
		}
		read <- err
	}()
	start := time.Now()
	s.Close()
	el := time.Since(start)
	if err := <-read; err != nil {
		t.Errorf("client read: %v, want all and EOF", err)
	}
	if el < 100*time.Millisecond || el > 25*time.Second {
		t.Errorf("Close with linger 30 s took %v, want about 100 ms (until the peer read)", el)
	}

	// The peer never reads: Close gives up after a second and resets.
	c, s = p.connPair(t)
	s.SetLinger(1)
	if _, err := s.Write(data); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	s.Close()
	if el := time.Since(start); el < time.Second {
		t.Errorf("Close with linger 1 s returned after %v", el)
	}
	c.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := io.ReadAll(c); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("client read after the linger ran out: %v, want ECONNRESET", err)
	}
}
