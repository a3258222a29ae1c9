//go:build linux

package tickwire_test

import (
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
)

// TestReceiveBufferGrowsTAP streams from a kernel TCP client in a
// namespace to the stack on a TAP device there, the program reading with
// net.Conn, and checks receive-buffer auto-tuning: the window starts at
// Config.ReceiveBuffer and, with ReceiveBufferMax above it, grows (a
// reader that keeps up with a local kernel sender reads more than its
// window per round trip) but never past the bound; with growth off it
// stays. How far it grows depends on how fast the reader keeps up (on an
// idle machine it reaches the 1 MiB default; under the race detector and
// load, 150-900 KiB were seen), so only growth is asserted.
func TestReceiveBufferGrowsTAP(t *testing.T) {
	for _, tc := range []struct {
		name  string
		max   int
		bound int // the largest window allowed
	}{
		{"default", 0, tickwire.DefaultReceiveBufferMax},
		{"256KiB", 256 << 10, 256 << 10},
		{"off", -1, tickwire.DefaultReceiveBuffer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ns, stackIP := tapPeer(t, tickwire.Config{ReceiveBufferMax: tc.max})
			ln, err := s.ListenTCP(9)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			var kc net.Conn
			if err := ns.Do(func() (err error) {
				kc, err = net.DialTimeout("tcp", netip.AddrPortFrom(stackIP, 9).String(), 5*time.Second)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer kc.Close()
			sent := make(chan error, 1)
			go func() {
				buf := make([]byte, 64<<10)
				for {
					if _, err := kc.Write(buf); err != nil {
						sent <- err
						return
					}
				}
			}()
			a, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			c := a.(*tickwire.TCPConn)
			if got := c.Info().ReceiveBuffer; got != tickwire.DefaultReceiveBuffer {
				t.Errorf("ReceiveBuffer before reading = %d, want %d", got, tickwire.DefaultReceiveBuffer)
			}
			// Read 64 MiB: tens of milliseconds at the kernel's speed, a few
			// seconds on a loaded machine under the race detector; growth
			// needs a few round trips of reading faster than the window,
			// and the window never shrinks.
			c.SetReadDeadline(time.Now().Add(60 * time.Second))
			if _, err := io.CopyN(io.Discard, c, 64<<20); err != nil {
				t.Fatal(err)
			}
			checkGrowth(t, "ReceiveBuffer", c.Info().ReceiveBuffer, tickwire.DefaultReceiveBuffer, tc.bound)
			kc.Close()
			c.Close()
			<-sent
		})
	}
}

// TestSendBufferGrowsTAP streams from the stack on a TAP device to a kernel
// TCP reader in the namespace and checks send-buffer auto-tuning: the
// buffer starts at Config.SendBuffer and, with SendBufferMax above it,
// grows with the congestion window but never past the bound; with growth
// off, or after SetWriteBuffer, it stays.
func TestSendBufferGrowsTAP(t *testing.T) {
	for _, tc := range sendBufferCases {
		t.Run(tc.name, func(t *testing.T) {
			s, ns, _ := tapPeer(t, tickwire.Config{SendBufferMax: tc.max})
			var kln net.Listener
			if err := ns.Do(func() (err error) {
				kln, err = net.Listen("tcp", "10.205.0.1:0") // tapPeer's kernel side
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer kln.Close()
			go func() {
				kc, err := kln.Accept()
				if err != nil {
					return
				}
				io.Copy(io.Discard, kc)
				kc.Close()
			}()
			c, err := s.DialTCP(ctxTimeout(t, 5*time.Second), netip.MustParseAddrPort(kln.Addr().String()))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			checkSendBufferGrowth(t, c, tc)
		})
	}
}
