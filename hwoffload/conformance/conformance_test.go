package conformance_test

import (
	"context"
	"os"
	"testing"

	"github.com/tickwire/tickwire/hwoffload"
	"github.com/tickwire/tickwire/hwoffload/conformance"
	"github.com/tickwire/tickwire/hwoffload/twin"
	"github.com/tickwire/tickwire/internal/capgen"
	"github.com/tickwire/tickwire/link/pipe"
)

// TestTwin runs the suite against the software twin with no input and a
// network port (one end of a link/pipe) for the host path.
func TestTwin(t *testing.T) {
	a, _ := pipe.New(pipe.Options{})
	conformance.Run(t, inMemory(t, twin.Config{Link: a}))
}

// inMemory runs a twin of config cfg in Go memory and opens it.
func inMemory(t *testing.T, cfg twin.Config) *hwoffload.Device {
	t.Helper()
	tw, err := twin.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tw.Close() })
	m, err := tw.Region().Map()
	if err != nil {
		t.Fatal(err)
	}
	dev, err := hwoffload.OpenRegion(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

// TestTwinInput runs RunInput against a twin replaying a capture of more
// trades than its 16-slot rings hold.
func TestTwinInput(t *testing.T) {
	f, err := capgen.Generate(capgen.Options{Messages: 100, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	conformance.RunInput(t, inMemory(t, twin.Config{Input: f.Source(), RingLog2: 4}))
}

// TestDevice runs the suite against the device TICKWIRE_CONFORMANCE_DEVICE
// names (pci:BDF or twin:PATH), for a card owner:
//
//	TICKWIRE_CONFORMANCE_DEVICE=pci:0000:65:00.0 go test -run TestDevice ./hwoffload/conformance/
func TestDevice(t *testing.T) {
	spec := os.Getenv("TICKWIRE_CONFORMANCE_DEVICE")
	if spec == "" {
		t.Skip("set TICKWIRE_CONFORMANCE_DEVICE=pci:BDF (or twin:PATH) to run the suite against a device")
	}
	ctx, cancel := context.WithTimeout(context.Background(), conformance.Patience)
	defer cancel()
	dev, err := hwoffload.Open(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	conformance.Run(t, dev)
}
