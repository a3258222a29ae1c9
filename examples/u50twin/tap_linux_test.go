//go:build linux

package main

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tickwire/tickwire/hwoffload"
	"github.com/tickwire/tickwire/hwoffload/twin"
	"github.com/tickwire/tickwire/internal/kerneltest"
)

// TestTAPHostPath runs the twin with -tap in a network namespace: the
// kernel there connects to a LISTEN port of the host path and its bytes
// come back through the command ring (nc, TCP), and likewise a datagram to
// a UDP_BIND port (nc -u).
func TestTAPHostPath(t *testing.T) {
	kerneltest.RequireRoot(t)
	kerneltest.RequireTool(t, "nc")
	ns := kerneltest.NewNetns(t, "twu")
	ns.DisableIPv6(t)
	region := filepath.Join(t.TempDir(), "u50")
	var tw *twin.Twin
	if err := ns.Do(func() error {
		var err error
		tw, _, err = start([]string{"-region", region, "-tap", kerneltest.Name("twu"),
			"-addr", "10.203.0.2/24", "-host", "10.203.0.1/24", "-ring-log2", "8"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer tw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dev, err := hwoffload.Open(ctx, "twin:"+region)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if dev.Status()&hwoffload.StatusLinkUp == 0 {
		t.Errorf("STATUS %#x: LINK_UP clear with -tap", dev.Status())
	}
	if err := dev.Run(ctx); err != nil {
		t.Fatal(err)
	}
	ln, err := dev.Listen(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	pc, err := dev.ListenUDP(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(buf[:n], from)
		}
	}()

	nc := func(stdin string, args ...string) string {
		c := ns.Command(ctx, "nc", args...)
		c.Stdin = strings.NewReader(stdin)
		out, err := c.Output()
		if err != nil {
			t.Fatalf("nc %v: %v", args, err)
		}
		return string(out)
	}
	msg := strings.Repeat("hello over the command ring\n", 4000) // 112 KB: the 32 KiB buffers wrap
	if got := nc(msg, "-N", "-w", "5", "10.203.0.2", "7"); got != msg {
		t.Fatalf("TCP echo: %d bytes back of %d", len(got), len(msg))
	}
	if got := nc("hello over UDP\n", "-u", "-w", "1", "10.203.0.2", "7"); got != "hello over UDP\n" {
		t.Fatalf("UDP echo answered %q", got)
	}
	tab := dev.ARPTable()
	found := false
	for _, e := range tab {
		found = found || e.Addr.String() == "10.203.0.1" && e.Resolved
	}
	if !found {
		t.Errorf("ARP table %+v lacks the kernel side 10.203.0.1", tab)
	}
}
