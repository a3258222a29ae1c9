package conformance_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/tickwire/tickwire/hwoffload"
	"github.com/tickwire/tickwire/hwoffload/conformance"
	"github.com/tickwire/tickwire/hwoffload/twin"
	"github.com/tickwire/tickwire/link/pipe"
)

// TestPCIFakeSysfs runs the suite through Open("pci:BDF") against a fake
// sysfs tree whose resource0 is a twin's region file: the PCIe backend's
// path check, BAR0 mapping and everything above it. The VFIO DMA memory is
// not reached (the twin's BASE registers lie inside its region).
func TestPCIFakeSysfs(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("region files need mmap: Linux and macOS only")
	}
	root := t.TempDir()
	dir := filepath.Join(root, "bus", "pci", "devices", "0000:65:00.0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	a, _ := pipe.New(pipe.Options{})
	tw, err := twin.New(twin.Config{Region: filepath.Join(dir, "resource0"), RingLog2: 6, Link: a})
	if err != nil {
		t.Fatal(err)
	}
	defer tw.Close()
	old := hwoffload.SysfsRoot
	hwoffload.SysfsRoot = root
	defer func() { hwoffload.SysfsRoot = old }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := hwoffload.Open(ctx, "pci:0000:66:00.0"); err == nil {
		t.Error("a device missing from sysfs opened")
	}
	dev, err := hwoffload.Open(ctx, "pci:0000:65:00.0")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	conformance.Run(t, dev)
}
