package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzCapture feeds arbitrary bytes to mirrorfeed as a capture file, with
// decoding and -raw on: whatever the bytes, it ends with status 0 (a
// readable capture) or 1 (a reported input error), never a panic or a hang.
// Seeds (testdata/fuzz/FuzzCapture) are a small generated feed in classic
// pcap, truncated copies of it, a pcapng file, and the feed converted to
// Linux cooked (SLL, SLL2) and raw IP captures.
func FuzzCapture(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "in.pcap")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		// A hang is a failure too: the fuzzer records the input that
		// brings this panic.
		watchdog := time.AfterFunc(10*time.Second, func() { panic("mirrorfeed: no result after 10 s: hang") })
		code := run(context.Background(), []string{"-pcap", path, "-format", "json", "-raw", filepath.Join(dir, "raw")}, io.Discard, io.Discard)
		watchdog.Stop()
		if code != 0 && code != 1 {
			t.Fatalf("exit status %d", code)
		}
	})
}
