package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/hwoffload"
	"github.com/tickwire/tickwire/hwoffload/twin"
	"github.com/tickwire/tickwire/internal/capgen"
	"github.com/tickwire/tickwire/link/pipe"
)

func TestCommands(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("region files need mmap: Linux and macOS only")
	}
	feed, err := capgen.Generate(capgen.Options{Messages: 20, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "u50")
	tw, err := twin.New(twin.Config{Region: path, Input: feed.Source()})
	if err != nil {
		t.Fatal(err)
	}
	defer tw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dev, err := hwoffload.Open(ctx, "twin:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if err := dev.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := dev.WaitStatus(ctx, hwoffload.StatusInputDone, hwoffload.StatusInputDone); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"regs"}, "0x0000 MAGIC                  0x31305754"},
		{[]string{"regs"}, "RING3_DROPPED"},
		{[]string{"counters"}, "trades 15\n"},
		{[]string{"ring", "0"}, "seq 0 flow 1 "},
		{[]string{"ring", "2"}, "flow start 10."},
	} {
		var b bytes.Buffer
		if err := run(&b, path, c.args, 4); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if !strings.Contains(b.String(), c.want) {
			t.Errorf("%v: no %q in\n%s", c.args, c.want, b.String())
		}
	}
	for _, args := range [][]string{nil, {"ring"}, {"ring", "4"}, {"poke"}} {
		if err := run(&bytes.Buffer{}, path, args, 4); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestHostPathView: hwctl sessions and udp show a session a peer opened to
// a LISTEN port, with the bytes it sent and the host has not read, the
// port listening and the UDP port bound.
func TestHostPathView(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("region files need mmap: Linux and macOS only")
	}
	a, b := pipe.New(pipe.Options{})
	peer, err := tickwire.New(tickwire.Config{Link: b, MAC: b.MAC(), Addr: netip.MustParsePrefix("10.9.0.1/24")})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	path := filepath.Join(t.TempDir(), "u50")
	tw, err := twin.New(twin.Config{Region: path, Link: a, Addr: netip.MustParsePrefix("10.9.0.2/24")})
	if err != nil {
		t.Fatal(err)
	}
	defer tw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dev, err := hwoffload.Open(ctx, "twin:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if err := dev.Run(ctx); err != nil {
		t.Fatal(err)
	}
	ln, err := dev.Listen(ctx, 7000)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pc, err := dev.ListenUDP(ctx, 5000)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	c, err := peer.DialTCP(ctx, netip.MustParseAddrPort("10.9.0.2:7000"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	lp := c.LocalAddr().(*net.TCPAddr).Port
	want := map[string]string{
		"sessions": fmt.Sprintf("session 0 ESTABLISHED local :7000 remote 10.9.0.1:%d rx_buffered 5 tx_unsent 0\n", lp),
		"udp":      "udp bound: 5000\n",
	}
	for _, cmd := range []string{"sessions", "udp"} {
		for {
			var out bytes.Buffer
			if err := run(&out, path, []string{cmd}, 4); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out.String(), want[cmd]) && (cmd != "sessions" || strings.Contains(out.String(), "tcp listening: 7000\n")) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: no %q in\n%s", cmd, want[cmd], out.String())
			}
			time.Sleep(time.Millisecond)
		}
	}
}
