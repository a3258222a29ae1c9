package nicsim_test

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
	"gvisor.dev/gvisor/pkg/refs"
)

// TestMain panics on a leaked PacketBuffer reference and fails when a test
// leaves a goroutine behind.
func TestMain(m *testing.M) {
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
