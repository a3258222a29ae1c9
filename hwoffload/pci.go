package hwoffload

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"

	"github.com/tickwire/tickwire/internal/shm"
)

// SysfsRoot is where OpenPCI finds PCI devices (SysfsRoot/bus/pci/devices/
// BDF/resource0). Tests point it at a fake tree whose resource0 is a twin's
// region file; set it before Open, not concurrently with it.
var SysfsRoot = "/sys"

// bdfPattern is a PCI address domain:bus:device.function.
var bdfPattern = regexp.MustCompile(`^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$`)

// dmaBuffer is memory the card writes its result rings into: mem as the
// host sees it, at I/O virtual address iova as the card does.
type dmaBuffer struct {
	mem   []byte
	iova  uint64
	close func()
}

// dmaIOVA is the I/O virtual address OpenPCI maps the ring buffer at: any
// address the IOMMU leaves free; this one is above the first 256 MiB.
const dmaIOVA = 0x1000_0000

// OpenPCI opens the card at PCI address bdf (e.g. "0000:65:00.0"): it maps
// BAR0 from SysfsRoot/bus/pci/devices/bdf/resource0 (read-write, MAP_SHARED,
// the same mapping code as a twin's region file) and checks MAGIC and
// VERSION. When the rings' BASE registers already lie inside the mapping
// (a twin's region presented as resource0) the rings are read there.
// Otherwise, on the card, OpenPCI allocates the rings in DMA memory: the
// device must be bound to vfio-pci, the process needs access to its
// /dev/vfio/GROUP; the buffer is hugepage-backed (MAP_HUGETLB, 2 MiB pages,
// sized for every ring's LOG2_SLOTS), mapped in the IOMMU at dmaIOVA
// (VFIO_IOMMU_MAP_DMA, type 1 IOMMU), and each ring's BASE is written with
// its IOVA while the engine is stopped.
//
// What is tested without a card: the BDF check, the sysfs path, the BAR0
// mapping and everything above it (TestOpenPCIFakeSysfs runs the twin's
// tests and the conformance suite through it). What is not: the VFIO
// container/group setup, the hugepage allocation, the IOMMU mapping, the
// writes of BASE, and the card's DMA writes into that memory; REGISTERS.md
// repeats this.
func OpenPCI(ctx context.Context, bdf string) (*Device, error) {
	if !bdfPattern.MatchString(bdf) {
		return nil, fmt.Errorf("%w: PCI address %q (want dddd:bb:dd.f)", ErrSpec, bdf)
	}
	dir := filepath.Join(SysfsRoot, "bus", "pci", "devices", bdf)
	r, err := shm.Open(filepath.Join(dir, "resource0"))
	if err != nil {
		return nil, fmt.Errorf("hwoffload: BAR0 of %s: %w", bdf, err)
	}
	if r.Len() < WindowBytes {
		r.Close()
		return nil, fmt.Errorf("%w: BAR0 of %s has %d bytes", ErrBadRegion, bdf, r.Len())
	}
	inBAR := true
	for k := range NumRings {
		base := r.Load64(RingReg(k, RingBase))
		log2 := r.Load32(RingReg(k, RingLog2Slots))
		if log2 > MaxLog2Slots || base < WindowBytes || !r.InRange(base, uint64(SlotBytes)<<log2) {
			inBAR = false
		}
	}
	var dma *dmaBuffer
	if !inBAR {
		if r.Load32(RegMagic) != Magic {
			r.Close()
			return nil, fmt.Errorf("%w: MAGIC %#x in BAR0 of %s", ErrBadRegion, r.Load32(RegMagic), bdf)
		}
		if r.Load32(RegStatus)&StatusRunning != 0 {
			r.Close()
			return nil, fmt.Errorf("hwoffload: %s: %w: stop the engine before the driver places its rings", bdf, ErrRunning)
		}
		size := 0
		for k := range NumRings {
			size += SlotBytes << min(r.Load32(RingReg(k, RingLog2Slots)), MaxLog2Slots)
		}
		dma, err = mapDMA(dir, size)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("hwoffload: DMA memory for %s: %w", bdf, err)
		}
		off := uint64(0)
		for k := range NumRings {
			r.Store64(RingReg(k, RingBase), dma.iova+off)
			off += uint64(SlotBytes) << min(r.Load32(RingReg(k, RingLog2Slots)), MaxLog2Slots)
		}
	}
	d, err := openRegion(ctx, r, dma)
	if err != nil {
		r.Close()
		if dma != nil {
			dma.close()
		}
		return nil, err
	}
	return d, nil
}
