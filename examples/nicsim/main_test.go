package main

import (
	"bytes"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
)

// childEnv makes the test binary run the program (run) instead of the
// tests: the device side of the cross-process tests.
const childEnv = "TICKWIRE_NICSIM_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, sig))
	}
	os.Exit(m.Run())
}

func TestFlags(t *testing.T) {
	never := make(chan os.Signal)
	for _, c := range []struct {
		args []string
		code int
	}{
		{nil, 2},
		{[]string{"-region", "/dev/shm/x"}, 2},
		{[]string{"-region", "/dev/shm/x", "-tap", "a", "-pcap", "b"}, 2},
		{[]string{"-region", "/dev/shm/x", "-pcap", "b", "-speed", "2"}, 2},
		{[]string{"-region", "/dev/shm/x", "-pcap", "b", "-host", "10.0.0.1/24"}, 2},
		{[]string{"-region", "/dev/shm/x", "-pcap", "b", "-queues", "65"}, 2},
		{[]string{"-region", filepath.Join(t.TempDir(), "missing"), "-pcap", "b"}, 1},
	} {
		var out, errb bytes.Buffer
		if code := run(c.args, &out, &errb, never); code != c.code {
			t.Errorf("%q: exit %d, want %d (%s)", c.args, code, c.code, errb.String())
		}
	}
}
