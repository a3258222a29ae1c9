//go:build linux

package main

import (
	"bytes"
	"context"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tickwire/tickwire/internal/capgen"
	"github.com/tickwire/tickwire/internal/kerneltest"
	"github.com/tickwire/tickwire/link/frame"
)

// TestLiveInterface captures a generated feed live: a Go sender writes its
// frames into one end of a veth pair inside a namespace the test creates,
// and mirrorfeed -iface reads the other end through AF_PACKET.
func TestLiveInterface(t *testing.T) {
	ns := kerneltest.NewNetns(t, "twa")
	for _, n := range []string{"twa0", "twa1"} {
		if n == "twa0" {
			ns.MustRun(t, "ip", "link", "add", "twa0", "type", "veth", "peer", "name", "twa1")
		}
		// No IPv6 link-local address, so only the feed crosses the link.
		ns.MustRun(t, "ip", "link", "set", n, "addrgenmode", "none")
		ns.MustRun(t, "ip", "link", "set", n, "up")
	}
	f, err := capgen.Generate(capgen.Options{Messages: 300, Seed: 15, Flows: 2})
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout bytes.Buffer
	var stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		var code int
		// The capture socket is created in the namespace; run keeps
		// using it from any thread.
		err := ns.Do(func() error {
			code = run(ctx, []string{"-iface", "twa0", "-format", "json"}, &stdout, &stderr)
			return nil
		})
		if err != nil {
			code = -1
		}
		done <- code
	}()

	// Wait until the capture ring is set up: frames sent before would be
	// lost.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), "capturing on twa0") {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("mirrorfeed opened no capture socket; stderr: %s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}

	var fd int
	var sa unix.SockaddrLinklayer
	if err := ns.Do(func() error {
		ifi, err := net.InterfaceByName("twa1")
		if err != nil {
			return err
		}
		sa.Ifindex = ifi.Index
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for i, fr := range f.Frames {
		if err := unix.Sendto(fd, fr.Data, 0, &sa); err != nil {
			t.Fatalf("sending frame %d: %v", i, err)
		}
	}
	// The frames are in the capture ring once the kernel has processed
	// them, which a loaded machine may put off for a while.
	time.Sleep(time.Second)
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("mirrorfeed -iface did not stop when its context ended")
	}
	checkAgainstTruth(t, f, parseJSON(t, stdout.String()))
	if !strings.Contains(stderr.String(), " 0 gaps") {
		t.Errorf("summary: %s", stderr.String())
	}
	t.Log(strings.TrimSpace(stderr.String()))
}

// lockedBuffer is a bytes.Buffer safe for one writer and one reader.
type lockedBuffer struct {
	mu sync.Mutex
	// +checklocks:mu
	b bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// countingSource counts the frames a frame.Source returned.
type countingSource struct {
	frame.Source
	frames atomic.Int64
}

func (c *countingSource) ReadFrames(b []frame.Frame) (int, error) {
	n, err := c.Source.ReadFrames(b)
	c.frames.Add(int64(n))
	return n, err
}

// TestLiveXDP captures a generated feed live over AF_XDP: a Go sender
// writes its frames into one end of a veth pair, mirrorfeed -xdp -filter
// reads the other end, and the records are exactly the feed's. The test
// ends the capture once every frame was read (it wraps the source to
// count them), not after a guessed delay.
func TestLiveXDP(t *testing.T) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("AF_XDP: linux/amd64 and linux/arm64 only")
	}
	ns := kerneltest.NewNetns(t, "twa")
	ns.DisableIPv6(t)
	capDev, sendDev := kerneltest.Name("twa"), kerneltest.Name("twa")
	kerneltest.Veth(t, ns, capDev, ns, sendDev)
	f, err := capgen.Generate(capgen.Options{Messages: 300, Seed: 15, Flows: 2})
	if err != nil {
		t.Fatal(err)
	}
	counted := make(chan *countingSource, 1)
	openInput = func(o options) (frame.Source, bool, error) {
		src, live, err := openSource(o)
		if err != nil {
			return nil, false, err
		}
		c := &countingSource{Source: src}
		counted <- c
		return c, live, nil
	}
	defer func() { openInput = openSource }()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout bytes.Buffer
	var stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		code := -1
		ns.Do(func() error {
			code = run(ctx, []string{"-xdp", capDev, "-filter", "*:" + strconv.Itoa(int(f.Flows[0].Server.Port)), "-format", "json"}, &stdout, &stderr)
			return nil
		})
		done <- code
	}()
	var src *countingSource
	select {
	case src = <-counted:
	case code := <-done:
		t.Fatalf("exit %d before capturing: %s", code, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("no capture opened: %s", stderr.String())
	}

	var fd int
	var sa unix.SockaddrLinklayer
	if err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(sendDev)
		if err != nil {
			return err
		}
		sa.Ifindex = ifi.Index
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for i, fr := range f.Frames {
		if err := unix.Sendto(fd, fr.Data, 0, &sa); err != nil {
			t.Fatalf("sending frame %d: %v", i, err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for src.frames.Load() < int64(len(f.Frames)) {
		if time.Now().After(deadline) {
			t.Fatalf("captured %d of %d frames: %s", src.frames.Load(), len(f.Frames), stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("mirrorfeed -xdp did not stop when its context ended")
	}
	checkAgainstTruth(t, f, parseJSON(t, stdout.String()))
	if !strings.Contains(stderr.String(), "capturing on "+capDev+" (AF_XDP") || !strings.Contains(stderr.String(), " 0 gaps") {
		t.Errorf("stderr: %s", stderr.String())
	}
	if o := ns.MustRun(t, "ip", "-d", "link", "show", "dev", capDev); strings.Contains(string(o), "prog/xdp") {
		t.Errorf("XDP program left on %s: %s", capDev, o)
	}
	t.Log(strings.TrimSpace(stderr.String()))
}

// TestXDPUsage: -xdp needs a filter, the live inputs exclude each other,
// and a malformed filter is refused before anything is opened.
func TestXDPUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-xdp", "lo"}, 2, "-xdp needs -filter"},
		{[]string{"-xdp", "lo", "-iface", "lo", "-filter", "*:1"}, 2, "exclusive"},
		{[]string{"-filter", "*:1"}, 2, "-filter goes with -xdp"},
		{[]string{"-queues", "2"}, 2, "-queues goes with -link dmaring or -xdp"},
		{[]string{"-xdp", "lo", "-filter", "*:1", "-queues", "0"}, 2, "-queues 0"},
		{[]string{"-xdp", "lo", "-filter", "nonsense"}, 1, "want HOST:PORT"},
		{[]string{"-xdp", "lo", "-filter", "*:*"}, 1, "give a host, a port or both"},
		{[]string{"-xdp", "lo", "-filter", "::1:80"}, 1, "IPv4"},
		{[]string{"-xdp", "twa-missing0", "-filter", "10.0.0.1:80"}, 1, "twa-missing0"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), c.args, &stdout, &stderr)
		if code != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want exit %d and %q", c.args, code, stderr.String(), c.code, c.want)
		}
	}
}
