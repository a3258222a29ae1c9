//go:build linux

package main

import (
	"context"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tickwire/tickwire/examples/internal/tapstack"
	"github.com/tickwire/tickwire/internal/kerneltest"
)

// TestStockClientOverTAP runs iperf3d on a TAP device inside a network
// namespace the test creates (the device, the stack's kernel-side address
// and the stock iperf3 client all live there) and checks the client's
// reports for TCP, UDP, -R and -P 4.
func TestStockClientOverTAP(t *testing.T) {
	kerneltest.RequireRoot(t)
	iperf := requireIperf3(t)
	ns := kerneltest.NewNetns(t, "twb")
	ns.MustRun(t, "sysctl", "-q", "-w", "net.ipv6.conf.default.disable_ipv6=1")
	opts := Options{TAP: tapstack.Options{
		Device: kerneltest.Name("twb"),
		Addr:   netip.MustParsePrefix("10.202.0.2/24"),
		Host:   netip.MustParsePrefix("10.202.0.1/24"),
	}}

	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	// Run creates the device on the namespace's thread; its goroutines
	// then serve from any thread.
	go func() { done <- ns.Do(func() error { return Run(ctx, opts, out) }) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		t.Logf("iperf3d output:\n%s", out)
	}
	defer stop()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), "ready\n"); {
		select {
		case err := <-done:
			t.Fatalf("Run ended before serving: %v\n%s", err, out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("iperf3d not ready after 10 s:\n%s", out)
		}
		time.Sleep(10 * time.Millisecond)
	}

	runClients(t, func(args ...string) *exec.Cmd {
		return ns.Command(context.Background(), iperf, append([]string{"-c", "10.202.0.2"}, args...)...)
	})
	stop()
	// The stack carried the tests and the device is gone with it.
	if s := out.String(); !strings.Contains(s, "TCPRxPackets") || !strings.Contains(s, "UDPRxPackets") {
		t.Errorf("stats lack TCP or UDP traffic:\n%s", s)
	}
	if _, err := ns.Run("ip", "link", "show", opts.TAP.Device); err == nil {
		t.Errorf("device %s still exists after Run returned", opts.TAP.Device)
	}
}
