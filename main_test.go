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
	// The goroutine check comes first: it waits for goroutines that are
	// about to end, among them netstack's, which release packets after a
	// Stack is closed (the queues of link resolutions it cancelled when
	// more than 64 were pending are dropped on goroutines of their own;
	// with GOMAXPROCS=1 they have not run yet when m.Run returns).
	if err := goleak.Find(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
		code = 1
	}
	refs.DoLeakCheck()
	os.Exit(code)
}
