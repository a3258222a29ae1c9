//go:build linux

package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tickwire/tickwire/internal/capgen"
	"github.com/tickwire/tickwire/internal/kerneltest"
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
