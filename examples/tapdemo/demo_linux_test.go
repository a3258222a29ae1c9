//go:build linux

package main

// The demo runs on a TAP device, which only Linux has: these tests run the
// binary against the kernel in a network namespace.

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tickwire/tickwire/internal/kerneltest"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/pcap"
)

// buildDemo compiles the demo into a temporary directory.
func buildDemo(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tapdemo")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestDemoAgainstKernel runs the demo binary inside a namespace of its own
// and talks to it from the kernel side with ping and nc.
func TestDemoAgainstKernel(t *testing.T) { testDemoAgainstKernel(t) }

// TestDemoOnDMARingAgainstKernel is TestDemoAgainstKernel with the stack on
// two dmaring queue pairs that an in-process software NIC serves on the TAP
// device.
func TestDemoOnDMARingAgainstKernel(t *testing.T) {
	testDemoAgainstKernel(t, "-link", "dmaring", "-queues", "2")
}

func testDemoAgainstKernel(t *testing.T, extra ...string) {
	kerneltest.RequireRoot(t)
	kerneltest.RequireTool(t, "ping")
	kerneltest.RequireTool(t, "nc")
	ns := kerneltest.NewNetns(t, "twl")
	ns.DisableIPv6(t)
	bin := buildDemo(t)
	dev := kerneltest.Name("twl")
	pcapFile := filepath.Join(t.TempDir(), "demo.pcap")

	d := startDemo(t, ns, bin, append([]string{"-tap", dev, "-addr", "10.201.0.2/24", "-host", "10.201.0.1/24", "-pcap", pcapFile}, extra...)...)

	ns.MustRun(t, "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.201.0.2")

	nc := func(stdin string, args ...string) string {
		c := ns.Command(context.Background(), "nc", args...)
		c.Stdin = strings.NewReader(stdin)
		out, err := c.Output()
		if err != nil {
			t.Fatalf("nc %v: %v", args, err)
		}
		return string(out)
	}
	if got := nc("hello over TCP\n", "-N", "-w", "5", "10.201.0.2", "7"); got != "hello over TCP\n" {
		t.Fatalf("TCP echo answered %q", got)
	}
	if got := nc("hello over UDP\n", "-u", "-w", "1", "10.201.0.2", "7"); got != "hello over UDP\n" {
		t.Fatalf("UDP echo answered %q", got)
	}
	if got := nc(strings.Repeat("x", 100000), "-N", "-w", "5", "10.201.0.2", "9"); got != "" {
		t.Fatalf("discard answered %q", got)
	}

	out := d.stop(t, syscall.SIGINT)
	wants := []string{"stats:", "ICMPEchoRequestsRx", "ConnsAccepted", "pcap:", "tap " + dev + ":"}
	if len(extra) > 0 {
		wants = append(wants, "dmaring:")
	}
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	if o, err := ns.Run("ip", "link", "show", "dev", dev); err == nil {
		t.Fatalf("device %s left behind: %s", dev, o)
	}

	// The recording holds the whole session.
	r, err := pcap.Open(pcapFile)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	batch := frame.NewBatch(64, 2048)
	frames := 0
	for {
		n, err := r.ReadFrames(batch)
		frames += n
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if frames < 20 {
		t.Fatalf("%d frames recorded, want the whole session", frames)
	}
}

// demo is a running demo binary.
type demo struct {
	cmd    *exec.Cmd
	lines  chan string
	output strings.Builder
	stderr bytes.Buffer
}

// startDemo runs the demo inside ns and waits until it prints "ready".
func startDemo(t *testing.T, ns *kerneltest.Netns, bin string, args ...string) *demo {
	t.Helper()
	d := &demo{cmd: ns.Command(context.Background(), bin, args...), lines: make(chan string, 128)}
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stderr = &d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			d.cmd.Process.Kill()
			d.cmd.Wait()
		}
	})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			d.lines <- sc.Text()
		}
		close(d.lines)
	}()
	timeout := time.After(20 * time.Second)
	for ready := false; !ready; {
		select {
		case l, ok := <-d.lines:
			if !ok {
				d.cmd.Wait()
				t.Fatalf("demo exited before ready: %s\n%s", d.output.String(), d.stderr.String())
			}
			d.output.WriteString(l + "\n")
			ready = l == "ready"
		case <-timeout:
			t.Fatalf("demo not ready: %s\n%s", d.output.String(), d.stderr.String())
		}
	}
	return d
}

// stop signals the demo, checks that it exits 0 and returns its output.
func (d *demo) stop(t *testing.T, sig os.Signal) string {
	t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	for l := range d.lines {
		d.output.WriteString(l + "\n")
	}
	if err := d.cmd.Wait(); err != nil {
		t.Fatalf("demo exit after %v: %v\n%s\n%s", sig, err, d.output.String(), d.stderr.String())
	}
	return d.output.String()
}

// TestDemoSIGTERM checks the other stop signal, without recording.
func TestDemoSIGTERM(t *testing.T) {
	kerneltest.RequireRoot(t)
	ns := kerneltest.NewNetns(t, "twl")
	bin := buildDemo(t)
	dev := kerneltest.Name("twl")
	d := startDemo(t, ns, bin, "-tap", dev, "-addr", "10.202.0.2/24", "-host", "", "-mtu", "1400")
	if out := string(ns.MustRun(t, "ip", "-o", "link", "show", "dev", dev)); !strings.Contains(out, "mtu 1400") {
		t.Fatalf("device: %s", out)
	}
	out := d.stop(t, syscall.SIGTERM)
	if !strings.Contains(out, "stats:") || strings.Contains(out, "pcap:") {
		t.Fatalf("output:\n%s", out)
	}
	if o, err := ns.Run("ip", "link", "show", "dev", dev); err == nil {
		t.Fatalf("device %s left behind: %s", dev, o)
	}
}

// TestDemoWithoutRoot runs the demo as an unprivileged user: it must say so
// and exit non-zero.
func TestDemoWithoutRoot(t *testing.T) {
	kerneltest.RequireRoot(t) // to switch to another user
	setpriv := kerneltest.RequireTool(t, "setpriv")
	bin := buildDemo(t)
	os.Chmod(filepath.Dir(bin), 0o755)
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin, "-tap", "twlnobody")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("demo succeeded without root: %s", out)
	}
	if !strings.Contains(string(out), "needs root") {
		t.Fatalf("demo output without root: %s", out)
	}
	if _, err := net.InterfaceByName("twlnobody"); err == nil {
		t.Fatal("device created without root")
	}
}

// TestDemoOverXDP runs the demo with -xdp on one end of a veth pair, the
// kernel on the other end in a namespace of its own, and checks the same
// services and exit report as over TAP, and that the interface is left
// without an XDP program.
func TestDemoOverXDP(t *testing.T) {
	kerneltest.RequireRoot(t)
	kerneltest.RequireTool(t, "ping")
	kerneltest.RequireTool(t, "nc")
	kerneltest.RequireTool(t, "ethtool")
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("AF_XDP: linux/amd64 and linux/arm64 only")
	}
	own, peer := kerneltest.NewNetns(t, "twl"), kerneltest.NewNetns(t, "twl")
	own.DisableIPv6(t)
	peer.DisableIPv6(t)
	ownDev, peerDev := kerneltest.Name("twl"), kerneltest.Name("twl")
	kerneltest.Veth(t, own, ownDev, peer, peerDev)
	peer.MustRun(t, "ip", "addr", "add", "10.203.0.1/24", "dev", peerDev)
	// Wire frames only: no partial checksums or GSO from the kernel peer.
	peer.MustRun(t, "ethtool", "-K", peerDev, "tx", "off", "tso", "off", "gso", "off")
	bin := buildDemo(t)

	d := startDemo(t, own, bin, "-xdp", ownDev, "-addr", "10.203.0.2/24")
	if !strings.Contains(d.output.String(), "over AF_XDP") {
		t.Errorf("no AF_XDP description before ready:\n%s", d.output.String())
	}
	peer.MustRun(t, "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.203.0.2")
	nc := func(stdin string, args ...string) string {
		c := peer.Command(context.Background(), "nc", args...)
		c.Stdin = strings.NewReader(stdin)
		out, err := c.Output()
		if err != nil {
			t.Fatalf("nc %v: %v", args, err)
		}
		return string(out)
	}
	if got := nc("hello over TCP\n", "-N", "-w", "5", "10.203.0.2", "7"); got != "hello over TCP\n" {
		t.Fatalf("TCP echo answered %q", got)
	}
	if got := nc("hello over UDP\n", "-u", "-w", "1", "10.203.0.2", "7"); got != "hello over UDP\n" {
		t.Fatalf("UDP echo answered %q", got)
	}
	if got := nc(strings.Repeat("x", 100000), "-N", "-w", "5", "10.203.0.2", "9"); got != "" {
		t.Fatalf("discard answered %q", got)
	}
	out := d.stop(t, syscall.SIGINT)
	for _, want := range []string{"stats:", "ICMPEchoRequestsRx", "ConnsAccepted", "xdp " + ownDev + ":"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	if o := own.MustRun(t, "ip", "-d", "link", "show", "dev", ownDev); strings.Contains(string(o), "prog/xdp") {
		t.Fatalf("XDP program left on %s: %s", ownDev, o)
	}
}
