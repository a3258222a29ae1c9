//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/internal/capgen"
	"github.com/tickwire/tickwire/internal/kerneltest"
	"github.com/tickwire/tickwire/link/dmaring"
	"github.com/tickwire/tickwire/link/frame"
)

// child is nicsim running in another process.
type child struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	done   chan error
}

// startChild starts nicsim with args in a process of its own (in ns when
// not nil) and waits for its "ready".
func startChild(t *testing.T, ns *kerneltest.Netns, args ...string) *child {
	t.Helper()
	c := &child{done: make(chan error, 1)}
	if ns != nil {
		c.cmd = ns.Command(context.Background(), os.Args[0], args...)
	} else {
		c.cmd = exec.Command(os.Args[0], args...)
	}
	c.cmd.Env = append(os.Environ(), childEnv+"=1")
	c.cmd.Stderr = &c.stderr
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ok := false
		for sc.Scan() {
			if sc.Text() == "ready" && !ok {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
		c.done <- c.cmd.Wait()
	}()
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			c.cmd.Process.Kill()
		}
	})
	select {
	case ok := <-ready:
		if !ok {
			err := <-c.done
			t.Fatalf("nicsim ended before ready: %v\n%s", err, c.stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("nicsim not ready after 60s:\n%s", c.stderr.String())
	}
	return c
}

// stop sends SIGTERM and checks for exit status 0; it returns stderr.
func (c *child) stop(t *testing.T) string {
	t.Helper()
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-c.done:
		if err != nil {
			t.Fatalf("nicsim after SIGTERM: %v\n%s", err, c.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("nicsim did not exit on SIGTERM:\n%s", c.stderr.String())
	}
	return c.stderr.String()
}

// regionPath is a fresh /dev/shm path for a test's region.
func regionPath(t *testing.T) string {
	return filepath.Join("/dev/shm", fmt.Sprintf("tickwire-nicsim-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-")))
}

// TestReplayAcrossProcesses: a host (this process) creates a shared region
// of two queue pairs; nicsim in another process replays a capture of many
// flows into them; the host reads every frame, spread over both queues by
// RSS, byte for byte, waking through the region's futex words.
func TestReplayAcrossProcesses(t *testing.T) {
	feed, err := capgen.Generate(capgen.Options{Messages: 400, Seed: 3, Flows: 8})
	if err != nil {
		t.Fatal(err)
	}
	pcapPath := filepath.Join(t.TempDir(), "feed.pcap")
	var buf bytes.Buffer
	if err := feed.WritePcap(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pcapPath, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	path := regionPath(t)
	ep, err := dmaring.New(dmaring.Config{Path: path, Shared: true, Queues: 2, RingLog: 6})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	c := startChild(t, nil, "-region", path, "-queues", "2", "-pcap", pcapPath)

	want := map[[32]byte]int{}
	for _, f := range feed.Frames {
		want[sha256.Sum256(f.Data)]++
	}
	var mu sync.Mutex
	got := map[[32]byte]int{}
	perQueue := make([]int, 2)
	total := 0
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for q := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := frame.NewBatch(16, dmaring.DefaultBufSize)
			for ctx.Err() == nil {
				n, err := ep.RxQueue(q).ReadFrames(batch)
				if err != nil {
					return
				}
				mu.Lock()
				for i := range batch[:n] {
					got[sha256.Sum256(batch[i].Data())]++
				}
				perQueue[q] += n
				total += n
				if total == len(feed.Frames) {
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
	<-ctx.Done()
	stderr := c.stop(t)
	if _, err := os.Stat(path); err != nil {
		t.Errorf("nicsim removed the host's region: %v", err)
	}
	ep.Close() // wakes the readers
	wg.Wait()
	if total != len(feed.Frames) {
		t.Fatalf("host read %d frames of %d\nnicsim:\n%s", total, len(feed.Frames), stderr)
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("a frame captured %d times was read %d times", n, got[k])
		}
	}
	if perQueue[0] == 0 || perQueue[1] == 0 {
		t.Errorf("frames per queue %v: RSS should use both", perQueue)
	}
	if !strings.Contains(stderr, fmt.Sprintf("replay: %d frames, 0 dropped", len(feed.Frames))) {
		t.Errorf("nicsim's counters:\n%s", stderr)
	}
}

// TestTAPAcrossProcesses: nicsim in another process puts the host's shared
// region on a TAP device in a namespace; a tickwire stack in this process,
// on that region, answers the kernel's ping and echoes a TCP stream; on
// SIGTERM nicsim removes the TAP device.
func TestTAPAcrossProcesses(t *testing.T) {
	kerneltest.RequireRoot(t)
	ping := kerneltest.RequireTool(t, "ping")
	ns := kerneltest.NewNetns(t, "twn")
	ns.DisableIPv6(t)
	dev := kerneltest.Name("twn")
	path := regionPath(t)
	ep, err := dmaring.New(dmaring.Config{Path: path, Shared: true, Queues: 2})
	if err != nil {
		t.Fatal(err)
	}
	stack := netip.MustParseAddr("10.211.0.2")
	s, err := tickwire.New(tickwire.Config{Link: ep, MAC: ep.MAC(), Addr: netip.PrefixFrom(stack, 24)})
	if err != nil {
		ep.Close()
		t.Fatal(err)
	}
	defer s.Close()
	kerneltest.ServeEcho(t, s, 7)
	c := startChild(t, ns, "-region", path, "-tap", dev, "-host", "10.211.0.1/24")

	if out, err := ns.Run(ping, "-c", "3", "-i", "0.2", "-W", "5", stack.String()); err != nil || !strings.Contains(string(out), " 0% packet loss") {
		t.Fatalf("ping: %v\n%s", err, out)
	}
	msg := bytes.Repeat([]byte("tickwire over a NIC in another process "), 3000)
	err = ns.Do(func() error {
		conn, err := net.DialTimeout("tcp4", netip.AddrPortFrom(stack, 7).String(), 10*time.Second)
		if err != nil {
			return err
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		go conn.Write(msg)
		echo := make([]byte, len(msg))
		if _, err := io.ReadFull(conn, echo); err != nil {
			return err
		}
		if !bytes.Equal(echo, msg) {
			return fmt.Errorf("echo differs")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("TCP echo: %v", err)
	}
	c.stop(t)
	if out, err := ns.Run("ip", "link", "show", dev); err == nil {
		t.Errorf("TAP device %s still there after nicsim exited:\n%s", dev, out)
	}
}
