//go:build linux

package tickwire_test

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/internal/kerneltest"
	"github.com/tickwire/tickwire/link/tap"
)

// tapPeer is a stack on a TAP device in a namespace the test creates; the
// kernel side of the device is kernelIP.
func tapPeer(tb testing.TB, cfg tickwire.Config) (*tickwire.Stack, *kerneltest.Netns, netip.Addr) {
	tb.Helper()
	kerneltest.RequireRoot(tb)
	ns := kerneltest.NewNetns(tb, "twq")
	ns.DisableIPv6(tb)
	dev := kerneltest.Name("twq")
	kernelIP, stackIP := netip.MustParseAddr("10.205.0.1"), netip.MustParseAddr("10.205.0.2")
	var ep *tap.Endpoint
	if err := ns.Do(func() (err error) {
		ep, err = tap.New(tap.Config{Name: dev, Host: netip.PrefixFrom(kernelIP, 24)})
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	cfg.Link, cfg.MAC, cfg.Addr = ep, ep.MAC(), netip.PrefixFrom(stackIP, 24)
	s, err := newStack(cfg)
	if err != nil {
		ep.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s, ns, stackIP
}

// BenchmarkTAPRoundTrip measures a 64-byte request from a kernel TCP client
// (in the namespace) and its echo by the stack on the TAP device: stock
// mode with a net.Conn echo goroutine, latency mode with the same, and
// latency mode with a ServeTCP handler.
func BenchmarkTAPRoundTrip(b *testing.B) {
	for _, mode := range []struct {
		name             string
		latency, handler bool
	}{{"stock", false, false}, {"latency", true, false}, {"latency-handler", true, true}} {
		b.Run(mode.name, func(b *testing.B) {
			s, ns, stackIP := tapPeer(b, tickwire.Config{Latency: mode.latency})
			if mode.handler {
				ln, err := s.ServeTCP(7, echoHandler)
				if err != nil {
					b.Fatal(err)
				}
				defer ln.Close()
			} else {
				ln, err := s.ListenTCP(7)
				if err != nil {
					b.Fatal(err)
				}
				defer ln.Close()
				echoServer(ln)
			}
			var c net.Conn
			if err := ns.Do(func() (err error) {
				c, err = net.DialTimeout("tcp", netip.AddrPortFrom(stackIP, 7).String(), 5*time.Second)
				return err
			}); err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			msg, buf := make([]byte, 64), make([]byte, 64)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestLatencyModeOverTAP runs latency mode against the Linux kernel: a TAP
// device in a namespace the test creates, kernel TCP clients talking to a
// ServeTCP echo handler (lock-step 8 KiB chunks) and to a net.Conn echo
// (full duplex), and kernel pings; 1 MiB each way, byte-exact, with the
// segments processed on the TAP reader's goroutine, which busy-polls the
// device (Config.BusyPoll reaches link/tap's SetBusyPoll).
func TestLatencyModeOverTAP(t *testing.T) {
	s, ns, stackIP := tapPeer(t, tickwire.Config{Latency: true, BusyPoll: 20 * time.Microsecond})

	hln, err := s.ServeTCP(7, echoHandler)
	if err != nil {
		t.Fatal(err)
	}
	defer hln.Close()
	cln, err := s.ListenTCP(8)
	if err != nil {
		t.Fatal(err)
	}
	echoServer(cln)

	dial := func(port int) net.Conn {
		var c net.Conn
		if err := ns.Do(func() (err error) {
			c, err = net.DialTimeout("tcp", netip.AddrPortFrom(stackIP, uint16(port)).String(), 5*time.Second)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(30 * time.Second))
		return c
	}
	msg := make([]byte, 1<<20)
	rand.Read(msg)

	got := make([]byte, len(msg))
	hc := dial(7)
	const chunk = 8 << 10
	for off := 0; off < len(msg); off += chunk {
		if _, err := hc.Write(msg[off : off+chunk]); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(hc, got[off:off+chunk]); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("handler echo differs from what was sent")
	}

	cc := dial(8)
	done := make(chan error, 1)
	got2 := make([]byte, len(msg))
	go func() {
		_, err := io.ReadFull(cc, got2)
		done <- err
	}()
	if _, err := cc.Write(msg); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got2, msg) {
		t.Fatal("net.Conn echo differs from what was sent")
	}

	if out, err := ns.Run("ping", "-c", "3", "-i", "0.2", "-W", "2", stackIP.String()); err != nil {
		t.Errorf("kernel ping: %v\n%s", err, out)
	}
	st := s.Stats()
	if st.LatencySyncRuns == 0 || st.LatencyInlineRuns == 0 {
		t.Errorf("sync runs %d, inline handler runs %d: want both > 0", st.LatencySyncRuns, st.LatencyInlineRuns)
	}
}
