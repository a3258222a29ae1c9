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

// TestLatencyModeOverTAP runs latency mode against the Linux kernel: a TAP
// device in a namespace the test creates, kernel TCP clients talking to a
// ServeTCP echo handler (lock-step 8 KiB chunks) and to a net.Conn echo
// (full duplex), and kernel pings; 1 MiB each way, byte-exact, with the
// segments processed on the TAP reader's goroutine, which busy-polls the
// device (Config.BusyPoll reaches link/tap's SetBusyPoll).
func TestLatencyModeOverTAP(t *testing.T) {
	kerneltest.RequireRoot(t)
	ns := kerneltest.NewNetns(t, "twq")
	ns.DisableIPv6(t)
	dev := kerneltest.Name("twq")
	kernelIP, stackIP := netip.MustParseAddr("10.205.0.1"), netip.MustParseAddr("10.205.0.2")
	var ep *tap.Endpoint
	if err := ns.Do(func() (err error) {
		ep, err = tap.New(tap.Config{Name: dev, Host: netip.PrefixFrom(kernelIP, 24)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s, err := tickwire.New(tickwire.Config{Link: ep, MAC: ep.MAC(), Addr: netip.PrefixFrom(stackIP, 24), Latency: true, BusyPoll: 20 * time.Microsecond})
	if err != nil {
		ep.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })

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
