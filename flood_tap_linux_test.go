//go:build linux && !race

package tickwire_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/internal/kerneltest"
)

// TestFlood is issue 12's flood with the Linux kernel as the attacker and
// the client: hping3 in the namespace floods the stack's echo port with
// SYNs or ACKs at full speed, from the kernel side's address, while a
// client from the same address opens a connection (and echoes a byte on
// it) every half second and echoes a byte every 100 ms on a connection it
// opened before the flood. Before the stack bounded its endpoints' queues
// a 10 s SYN flood took the heap past 200 MB and most of the client's
// connections failed.
//
// It asserts the memory bound (heap objects at most 96 MiB at any time)
// and the client's success rates with a margin below issue 12's goals
// (90% of connections, 95% of echoes; 96% and 99% measured here), since
// CI's machine may be busy with more than the flood. A connection may take
// 4 s, three SYNs (at 0, 1 and 3 s): the kernel drops a third of what
// hping3 sends at the TAP device, which the stack cannot read as fast, and
// a real client's first SYN may be among them (a program's connect
// timeout is usually longer: Linux's own is two minutes).
// TICKWIRE_FLOOD_DURATION and TICKWIRE_FLOOD_CONNECT_TIMEOUT change the
// flood's length and the connect timeout, e.g. to issue 12's 20 s and 2 s. The race detector slows the stack several times, so that it
// could not read what one hping3 sends; the test is built without it, and
// .ci/run runs it on its own.
func TestFlood(t *testing.T) {
	kerneltest.RequireRoot(t)
	kerneltest.RequireTool(t, "hping3")
	for _, tc := range []struct {
		name, flag string
		latency    bool
	}{
		{"syn", "-S", false},
		{"ack", "-A", false},
		{"syn-latency", "-S", true},
		{"ack-latency", "-A", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ns, stackIP := tapPeer(t, tickwire.Config{Latency: tc.latency})
			ln, err := s.ListenTCP(7)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			echoServer(ln)
			server := netip.AddrPortFrom(stackIP, 7).String()
			dial := func(timeout time.Duration) (c net.Conn, err error) {
				err = ns.Do(func() (err error) {
					c, err = net.DialTimeout("tcp", server, timeout)
					return err
				})
				return c, err
			}
			echo := func(c net.Conn, timeout time.Duration) error {
				c.SetDeadline(time.Now().Add(timeout))
				b := []byte{'x'}
				if _, err := c.Write(b); err != nil {
					return err
				}
				_, err := io.ReadFull(c, b)
				return err
			}
			kept, err := dial(5 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer kept.Close()

			flood, connectTimeout := envDuration(t, "TICKWIRE_FLOOD_DURATION", 10*time.Second), envDuration(t, "TICKWIRE_FLOOD_CONNECT_TIMEOUT", 4*time.Second)
			ctx, cancel := context.WithTimeout(context.Background(), flood)
			defer cancel()
			hping := ns.Command(ctx, "hping3", tc.flag, "--flood", "-p", "7", stackIP.String())
			if err := hping.Start(); err != nil {
				t.Fatal(err)
			}
			defer hping.Wait()
			start := time.Now()

			var peak atomic.Uint64
			sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
			var conns, connsOK atomic.Int64
			var wg sync.WaitGroup
			var failures sync.Map // error text -> count, for the log
			fail := func(err error) {
				v, _ := failures.LoadOrStore(err.Error(), new(atomic.Int64))
				v.(*atomic.Int64).Add(1)
			}
			echoes, echoesOK := 0, 0
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for i := 0; time.Since(start) < flood; i++ {
				<-tick.C
				metrics.Read(sample)
				if v := sample[0].Value.Uint64(); v > peak.Load() {
					peak.Store(v)
				}
				if i%5 == 0 {
					conns.Add(1)
					wg.Add(1)
					go func() {
						defer wg.Done()
						c, err := dial(connectTimeout)
						if err == nil {
							err = echo(c, 2*time.Second)
							c.Close()
						}
						if err != nil {
							fail(err)
							return
						}
						connsOK.Add(1)
					}()
				}
				echoes++
				if err := echo(kept, time.Second); err != nil {
					fail(err)
					if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
						t.Fatalf("the kept connection failed: %v", err)
					}
					continue
				}
				echoesOK++
			}
			cancel()
			wg.Wait()
			st := s.Stats()
			failures.Range(func(k, v any) bool {
				t.Logf("failure %dx: %v", v.(*atomic.Int64).Load(), k)
				return true
			})
			t.Logf("%s flood %v, connect timeout %v: connections %d/%d, echoes %d/%d, heap objects peak %.1f MiB; DropTCPQueueFull %d, TCPQueueRetries %d, SYN cookies sent %d, TCP frames in %d",
				tc.flag, flood, connectTimeout, connsOK.Load(), conns.Load(), echoesOK, echoes, float64(peak.Load())/(1<<20),
				st.DropTCPQueueFull, st.TCPQueueRetries, st.TCPSYNCookiesTx, st.TCPRxPackets)
			if p := peak.Load(); p > 96<<20 {
				t.Errorf("heap objects reached %.1f MiB during the flood, want at most 96 MiB", float64(p)/(1<<20))
			}
			if st.DropTCPQueueFull == 0 {
				t.Error("DropTCPQueueFull is 0: the flood never found a queue full (did hping3 run?)")
			}
			if ok, n := connsOK.Load(), conns.Load(); ok*100 < n*75 {
				t.Errorf("%d of %d connections succeeded, want at least 75%%", ok, n)
			}
			if echoesOK*100 < echoes*85 {
				t.Errorf("%d of %d echoes on the kept connection succeeded, want at least 85%%", echoesOK, echoes)
			}
		})
	}
}

// envDuration returns the duration in environment variable name, def when
// it is not set.
func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}
