// Package leakcheck is the TestMain of the packages whose tests run
// netstack: it panics on a leaked PacketBuffer reference and fails the run
// when a test leaves a goroutine behind. Only tests import it.
package leakcheck

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
	"gvisor.dev/gvisor/pkg/refs"
)

// Main runs m with netstack's reference leak checking in panic mode and
// exits with its code, made 1 when goroutines are left behind. Benchmark
// runs (-test.bench) skip the reference tracking, which registers every
// reference in a global map and would double the figures.
//
// The goroutine check comes before the reference check: it waits for
// goroutines that are about to end, among them netstack's, which release
// packets after a Stack is closed (with GOMAXPROCS=1 they may not have run
// yet when m.Run returns).
func Main(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		refs.SetLeakMode(refs.LeaksPanic)
	}
	code := m.Run()
	if err := goleak.Find(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
		code = 1
	}
	refs.DoLeakCheck()
	os.Exit(code)
}
