//go:build linux

package tickwire_test

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/internal/kerneltest"
)

// TestVanishedHostLockOut is issue 12's lock-out with the Linux kernel as
// both hosts: the kernel side of the stack's TAP device has the stack's
// usual peer address, 10.205.0.1, and a second one, 10.205.0.3. The first
// opens MaxConnections echo connections, then vanishes (iptables drops
// everything to and from it); a client from the second must get in.
//
//   - default Config: the per-source limit kept half the slots free, so the
//     other host connects at once;
//   - per-source limit off: the vanished host holds every slot, the other
//     host is reset, and keepalive (1 s idle, 3 probes 200 ms apart) frees
//     the slots: the other host connects within 1.6 s and a margin.
func TestVanishedHostLockOut(t *testing.T) {
	kerneltest.RequireRoot(t)
	kerneltest.RequireTool(t, "iptables")
	for _, tc := range []struct {
		name string
		cfg  tickwire.Config
	}{
		{"default", tickwire.Config{}},
		{"keepalive", tickwire.Config{
			MaxConnectionsPerSource: tickwire.DefaultMaxConnections,
			KeepaliveIdle:           time.Second, KeepaliveInterval: 200 * time.Millisecond, KeepaliveCount: 3,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ns, stackIP := tapPeer(t, tc.cfg)
			ln, err := s.ListenTCP(7)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			echoServer(ln)
			cfg := s.Config()
			server := netip.AddrPortFrom(stackIP, 7).String()
			vanishing, other := netip.MustParseAddr("10.205.0.1"), netip.MustParseAddr("10.205.0.3")
			// "3: twq0123abcd    inet 10.205.0.1/24 ...": the TAP device.
			dev := strings.Fields(string(ns.MustRun(t, "ip", "-o", "-4", "addr", "show", "to", vanishing.String())))
			if len(dev) < 2 {
				t.Fatalf("no device with %v in the namespace", vanishing)
			}
			ns.MustRun(t, "ip", "addr", "add", other.String()+"/24", "dev", dev[1])

			// dial connects from a kernel address and checks an echo; it
			// reports a reset (the stack refused the connection) as false.
			dial := func(from netip.Addr) (net.Conn, bool) {
				t.Helper()
				var c net.Conn
				if err := ns.Do(func() (err error) {
					d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(from, 0)), Timeout: 5 * time.Second}
					c, err = d.Dial("tcp", server)
					return err
				}); errors.Is(err, syscall.ECONNRESET) {
					return nil, false // the reset came before connect returned
				} else if err != nil {
					t.Fatalf("dial from %v: %v", from, err)
				}
				c.SetDeadline(time.Now().Add(5 * time.Second))
				buf := []byte("echo")
				_, err := c.Write(buf)
				if err == nil {
					_, err = io.ReadFull(c, buf)
				}
				c.SetDeadline(time.Time{})
				if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE) {
					c.Close()
					return nil, false
				}
				if err != nil {
					t.Fatalf("echo from %v: %v", from, err)
				}
				return c, true
			}

			accepted := 0
			first := time.Now() // before the first connection's last segment
			for range cfg.MaxConnections {
				if c, ok := dial(vanishing); ok {
					defer c.Close()
					accepted++
				}
			}
			if want := cfg.MaxConnectionsPerSource; accepted != want {
				t.Fatalf("%d of %d connections from one host accepted, want %d", accepted, cfg.MaxConnections, want)
			}
			ns.MustRun(t, "iptables", "-I", "INPUT", "-d", vanishing.String(), "-j", "DROP")
			ns.MustRun(t, "iptables", "-I", "OUTPUT", "-s", vanishing.String(), "-j", "DROP")
			vanished := time.Now()

			if cfg.MaxConnectionsPerSource < cfg.MaxConnections {
				c, ok := dial(other)
				if !ok {
					t.Fatal("the other host was reset with half the slots free")
				}
				c.Close()
				if st := s.Stats(); st.ConnsRefusedPerSource != uint64(cfg.MaxConnections-accepted) || st.ConnsRefused != 0 {
					t.Errorf("refused per source %d, refused %d; want %d, 0", st.ConnsRefusedPerSource, st.ConnsRefused, cfg.MaxConnections-accepted)
				}
				return
			}

			if c, ok := dial(other); ok {
				c.Close()
				t.Fatal("the other host got in while the vanished host held every slot")
			}
			limit := cfg.KeepaliveIdle + time.Duration(cfg.KeepaliveCount)*cfg.KeepaliveInterval
			var attempts int
			for {
				attempts++
				if c, ok := dial(other); ok {
					c.Close()
					break
				}
				if time.Since(vanished) > limit+10*time.Second {
					t.Fatalf("the other host is still locked out %v after the vanishing (%d attempts)", time.Since(vanished), attempts)
				}
				time.Sleep(100 * time.Millisecond)
			}
			took := time.Since(vanished)
			t.Logf("the other host got in %v after the vanishing, keepalive limit %v, %d attempts", took, limit, attempts)
			// The first connection's keepalive started with its echo.
			if earliest := limit - vanished.Sub(first); took < earliest {
				t.Errorf("the other host got in after %v, before keepalive could find the vanished host (%v)", took, earliest)
			}
			// The other connections go as their keepalive runs out, the last
			// about as long after the vanishing as the dials took.
			if !waitFor(vanished.Sub(first)+5*time.Second, func() bool { return s.Stats().TCPPeerTimeouts == uint64(accepted) }) {
				t.Errorf("%d of the vanished host's %d connections timed out", s.Stats().TCPPeerTimeouts, accepted)
			}
			if !waitFor(5*time.Second, func() bool { return s.Stats().ConnsOpen == 0 }) {
				t.Errorf("%d connections open after every client left", s.Stats().ConnsOpen)
			}
			if st := s.Stats(); st.ConnsRefused == 0 {
				t.Error("ConnsRefused is 0: the other host was never refused")
			}
		})
	}
}
