package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tickwire/tickwire/hwoffload"
	"github.com/tickwire/tickwire/internal/capgen"
)

func TestRun(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("region files need mmap: Linux and macOS only")
	}
	dir := t.TempDir()
	feed, err := capgen.Generate(capgen.Options{Messages: 50, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	pcapPath := filepath.Join(dir, "feed.pcap")
	w, err := os.Create(pcapPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := feed.WritePcap(w); err != nil {
		t.Fatal(err)
	}
	w.Close()
	region := filepath.Join(dir, "u50")

	pr, pw := io.Pipe()
	stop := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"-region", region, "-pcap", pcapPath, "-ring-log2", "10", "-addr", "10.0.0.2/24"}, pw, stop)
		pw.Close()
	}()
	line := make([]byte, 6)
	if _, err := io.ReadFull(pr, line); err != nil || string(line) != "ready\n" {
		t.Fatalf("first output %q, %v", line, err)
	}
	go io.Copy(io.Discard, pr)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dev, err := hwoffload.Open(ctx, "twin:"+region)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if dev.Read32(hwoffload.RegIPAddr) != 0x0a000002 || dev.Read32(hwoffload.RingReg(0, hwoffload.RingLog2Slots)) != 10 {
		t.Errorf("-addr or -ring-log2 not applied")
	}
	if dev.Counters().RxFrames != 0 {
		t.Error("frames consumed before RUN")
	}
	if err := dev.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := dev.WaitStatus(ctx, hwoffload.StatusInputDone, hwoffload.StatusInputDone); err != nil {
		t.Fatal(err)
	}
	if dev.Counters().Trades+dev.Counters().Orders != uint64(len(feed.Records)) {
		t.Errorf("counters %+v for %d records", dev.Counters(), len(feed.Records))
	}
	stop <- syscall.SIGTERM
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(region); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("region left after SIGTERM: %v", err)
	}
}

func TestRunErrors(t *testing.T) {
	for _, args := range [][]string{
		{}, {"-region", "x"}, {"-pcap", "x"}, {"-region", "x", "-pcap", "x", "-tap", "tw0"}, {"-region", "x", "-tap", "tw0", "-host", "bad"},
		{"-region", filepath.Join(t.TempDir(), "r"), "-pcap", "/nonexistent.pcap"},
		{"-bogus"},
	} {
		if err := run(args, io.Discard, nil); err == nil || strings.Contains(err.Error(), "ready") {
			t.Errorf("%q: %v", args, err)
		}
	}
}
