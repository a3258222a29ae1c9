//go:build linux

package tickwire_test

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/internal/kerneltest"
	"github.com/tickwire/tickwire/link/tap"
)

var (
	udpTAPKernel = netip.MustParseAddr("10.206.0.1")
	udpTAPStack  = netip.MustParseAddr("10.206.0.2")
)

// udpTAPPeer is a stack on a TAP device whose kernel side (udpTAPKernel)
// lives in a namespace the test creates.
func udpTAPPeer(tb testing.TB, cfg tickwire.Config) (*tickwire.Stack, *kerneltest.Netns) {
	tb.Helper()
	kerneltest.RequireRoot(tb)
	ns := kerneltest.NewNetns(tb, "twu")
	ns.DisableIPv6(tb)
	var ep *tap.Endpoint
	if err := ns.Do(func() (err error) {
		ep, err = tap.New(tap.Config{Name: kerneltest.Name("twu"), Host: netip.PrefixFrom(udpTAPKernel, 24)})
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	cfg.Link, cfg.MAC, cfg.Addr = ep, ep.MAC(), netip.PrefixFrom(udpTAPStack, 24)
	s, err := newStack(cfg)
	if err != nil {
		ep.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s, ns
}

// kernelUDP opens a kernel UDP socket in ns connected to the stack's port.
func kernelUDP(tb testing.TB, ns *kerneltest.Netns, port uint16) *net.UDPConn {
	tb.Helper()
	var c *net.UDPConn
	if err := ns.Do(func() (err error) {
		c, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(udpTAPStack, port)))
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// TestUDPKernelTAP has the Linux kernel talk to a ServeUDP echo handler over
// TAP, in stock and latency mode: datagrams of every size (a 4000-byte one
// arrives in fragments, which the wire reassembles and passes to the
// handler, and its echo leaves in fragments, which the kernel reassembles),
// a subnet broadcast, and a datagram to a closed port, which the kernel sees
// refused (ICMP port unreachable).
func TestUDPKernelTAP(t *testing.T) {
	for _, latency := range []bool{false, true} {
		name := "stock"
		if latency {
			name = "latency"
		}
		t.Run(name, func(t *testing.T) {
			s, ns := udpTAPPeer(t, tickwire.Config{Latency: latency})
			var rx atomic.Int64 // the handler's RxTime
			srv, err := s.ServeUDP(7, func(c *tickwire.UDPConn, payload []byte, from netip.AddrPort) {
				rx.Store(c.RxTime().UnixNano())
				c.WriteToUDPAddrPort(payload, from)
			})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			c := kernelUDP(t, ns, 7)
			c.SetDeadline(time.Now().Add(10 * time.Second))
			buf := make([]byte, 8192)
			for i, size := range []int{0, 1, 64, 1472, 4000} {
				msg := randomBytes(size, uint64(i))
				before := time.Now()
				if _, err := c.Write(msg); err != nil {
					t.Fatal(err)
				}
				n, err := c.Read(buf)
				if err != nil || !bytes.Equal(buf[:n], msg) {
					t.Fatalf("echo of %d bytes: %d bytes, %v", size, n, err)
				}
				// The TAP device's read stamped the datagram's frame.
				if got := time.Unix(0, rx.Load()); got.Before(before) || got.After(time.Now()) {
					t.Errorf("echo of %d bytes: the handler's RxTime %v is not between the write (%v) and the echo", size, got, before)
				}
			}
			if got := s.Stats().IPv4Reassembled; got != 1 {
				t.Errorf("IPv4Reassembled = %d, want 1 (the 4000-byte datagram)", got)
			}

			// A subnet broadcast from the kernel reaches a listening socket.
			pc, err := s.ListenUDP(9100)
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close()
			var bc *net.UDPConn
			if err := ns.Do(func() (err error) {
				bc, err = net.ListenUDP("udp", &net.UDPAddr{IP: udpTAPKernel.AsSlice()})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer bc.Close()
			raw, err := bc.SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			raw.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_BROADCAST, 1) })
			if _, err := bc.WriteToUDPAddrPort([]byte("everyone"), netip.MustParseAddrPort("10.206.0.255:9100")); err != nil {
				t.Fatal(err)
			}
			pc.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, from, err := pc.ReadFrom(buf)
			if err != nil || string(buf[:n]) != "everyone" || from.(*net.UDPAddr).IP.String() != udpTAPKernel.String() {
				t.Fatalf("broadcast: %q from %v, %v", buf[:n], from, err)
			}

			// A closed port: ICMP port unreachable, which the kernel turns
			// into ECONNREFUSED on its connected socket.
			closed := kernelUDP(t, ns, 9101)
			closed.SetDeadline(time.Now().Add(5 * time.Second))
			closed.Write([]byte("anyone?"))
			if _, err := closed.Read(buf); !errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatalf("read after writing to a closed port: %v, want ECONNREFUSED", err)
			}
			// netstack counts the ICMP message after writing it, which may be
			// after the kernel has woken the reader.
			for deadline := time.Now().Add(5 * time.Second); s.Stats().ICMPUnreachableTx == 0 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			if st := s.Stats(); st.DropUDPNoListener != 1 || st.ICMPUnreachableTx != 1 {
				t.Errorf("DropUDPNoListener %d, ICMPUnreachableTx %d; want 1, 1", st.DropUDPNoListener, st.ICMPUnreachableTx)
			}
		})
	}
}

// BenchmarkUDPTAPRoundTrip measures a 64-byte datagram from a kernel client
// (in the namespace) and its echo by a ServeUDP handler on the TAP device,
// with the kernel's own loopback in the same namespace as baseline; it
// reports p50-ns and p99-ns besides the mean.
func BenchmarkUDPTAPRoundTrip(b *testing.B) {
	for _, mode := range []string{"stock", "latency", "kernel-loopback"} {
		b.Run(mode, func(b *testing.B) {
			s, ns := udpTAPPeer(b, tickwire.Config{Latency: mode == "latency"})
			srv, err := s.ServeUDP(7, func(c *tickwire.UDPConn, payload []byte, from netip.AddrPort) {
				c.WriteToUDPAddrPort(payload, from)
			})
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			var c *net.UDPConn
			if mode == "kernel-loopback" {
				var ks *net.UDPConn
				if err := ns.Do(func() (err error) {
					if ks, err = net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
						return err
					}
					c, err = net.DialUDP("udp", nil, ks.LocalAddr().(*net.UDPAddr))
					return err
				}); err != nil {
					b.Fatal(err)
				}
				defer ks.Close()
				go func() {
					buf := make([]byte, 2048)
					for {
						n, from, err := ks.ReadFromUDPAddrPort(buf)
						if err != nil {
							return
						}
						ks.WriteToUDPAddrPort(buf[:n], from)
					}
				}()
				defer c.Close()
			} else {
				c = kernelUDP(b, ns, 7)
			}
			c.SetDeadline(time.Now().Add(10 * time.Minute))
			msg, buf := make([]byte, 64), make([]byte, 2048)
			c.Write(msg) // ARP
			c.Read(buf)
			lat := make([]time.Duration, 0, max(b.N, 1))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				t0 := time.Now()
				if _, err := c.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := c.Read(buf); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			if len(lat) > 0 {
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
				b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
			}
		})
	}
}
