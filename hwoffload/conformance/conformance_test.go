package conformance_test

import (
	"context"
	"testing"

	"github.com/tickwire/tickwire/hwoffload"
	"github.com/tickwire/tickwire/hwoffload/conformance"
	"github.com/tickwire/tickwire/hwoffload/twin"
)

// TestTwin runs the suite against the software twin with no input.
func TestTwin(t *testing.T) {
	tw, err := twin.New(twin.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tw.Close()
	m, err := tw.Region().Map()
	if err != nil {
		t.Fatal(err)
	}
	dev, err := hwoffload.OpenRegion(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	conformance.Run(t, dev)
}
