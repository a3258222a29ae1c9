package tickwire_test

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
	"gvisor.dev/gvisor/pkg/refs"
)

// TestMain panics on a leaked PacketBuffer reference and fails when a test
// leaves a goroutine behind (every Stack must be closed). Benchmark runs
// (-test.bench) skip the leak tracking, which registers every reference in
// a global map and would double the figures.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		refs.SetLeakMode(refs.LeaksPanic)
	}
	code := m.Run()
	refs.DoLeakCheck()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
			code = 1
		}
	}
	os.Exit(code)
}
