package hwoffload

import (
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// VFIO's ioctls and structures (linux/vfio.h): type ';', base 100.
const (
	vfioGetAPIVersion     = 0x3B64
	vfioCheckExtension    = 0x3B65
	vfioSetIOMMU          = 0x3B66
	vfioGroupGetStatus    = 0x3B67
	vfioGroupSetContainer = 0x3B68
	vfioIOMMUMapDMA       = 0x3B71
	vfioIOMMUUnmapDMA     = 0x3B72
	vfioAPIVersion        = 0
	vfioType1IOMMU        = 1
	vfioGroupViable       = 1
	vfioDMARead           = 1
	vfioDMAWrite          = 2
	hugePage              = 2 << 20
)

type vfioGroupStatus struct {
	argsz, flags uint32
}

type vfioDMAMap struct {
	argsz, flags      uint32
	vaddr, iova, size uint64
}

type vfioDMAUnmap struct {
	argsz, flags uint32
	iova, size   uint64
}

func ioctlPtr(fd int, req uintptr, p unsafe.Pointer) error {
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(p)); e != 0 {
		return e
	}
	return nil
}

func ioctlInt(fd int, req uintptr, v uintptr) (int, error) {
	r, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, v)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// mapDMA allocates size bytes (rounded up to 2 MiB pages) of hugepage
// memory and maps them for the device whose sysfs directory is dir at
// dmaIOVA, through its VFIO group. Untested without a card (see OpenPCI).
func mapDMA(dir string, size int) (*dmaBuffer, error) {
	group, err := os.Readlink(filepath.Join(dir, "iommu_group"))
	if err != nil {
		return nil, fmt.Errorf("no IOMMU group (bind the device to vfio-pci): %w", err)
	}
	container, err := unix.Open("/dev/vfio/vfio", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("/dev/vfio/vfio: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			unix.Close(container)
		}
	}()
	if v, err := ioctlInt(container, vfioGetAPIVersion, 0); err != nil || v != vfioAPIVersion {
		return nil, fmt.Errorf("VFIO API version %d: %v", v, err)
	}
	if v, err := ioctlInt(container, vfioCheckExtension, vfioType1IOMMU); err != nil || v == 0 {
		return nil, fmt.Errorf("VFIO type 1 IOMMU not supported: %v", err)
	}
	gpath := "/dev/vfio/" + filepath.Base(group)
	gfd, err := unix.Open(gpath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", gpath, err)
	}
	defer func() {
		if !ok {
			unix.Close(gfd)
		}
	}()
	st := vfioGroupStatus{argsz: uint32(unsafe.Sizeof(vfioGroupStatus{}))}
	if err := ioctlPtr(gfd, vfioGroupGetStatus, unsafe.Pointer(&st)); err != nil || st.flags&vfioGroupViable == 0 {
		return nil, fmt.Errorf("VFIO group %s not viable (every device of the group must be bound to vfio-pci): %v", gpath, err)
	}
	cfd := int32(container)
	if err := ioctlPtr(gfd, vfioGroupSetContainer, unsafe.Pointer(&cfd)); err != nil {
		return nil, fmt.Errorf("VFIO_GROUP_SET_CONTAINER: %w", err)
	}
	if _, err := ioctlInt(container, vfioSetIOMMU, vfioType1IOMMU); err != nil {
		return nil, fmt.Errorf("VFIO_SET_IOMMU: %w", err)
	}
	n := (size + hugePage - 1) / hugePage * hugePage
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_SHARED|unix.MAP_ANONYMOUS|unix.MAP_HUGETLB|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("%d bytes of 2 MiB hugepages (vm.nr_hugepages): %w", n, err)
	}
	m := vfioDMAMap{argsz: uint32(unsafe.Sizeof(vfioDMAMap{})), flags: vfioDMARead | vfioDMAWrite,
		vaddr: uint64(uintptr(unsafe.Pointer(&mem[0]))), iova: dmaIOVA, size: uint64(n)}
	if err := ioctlPtr(container, vfioIOMMUMapDMA, unsafe.Pointer(&m)); err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("VFIO_IOMMU_MAP_DMA: %w", err)
	}
	ok = true
	return &dmaBuffer{mem: mem, iova: dmaIOVA, close: func() {
		u := vfioDMAUnmap{argsz: uint32(unsafe.Sizeof(vfioDMAUnmap{})), iova: dmaIOVA, size: uint64(n)}
		ioctlPtr(container, vfioIOMMUUnmapDMA, unsafe.Pointer(&u)) //nolint:errcheck // closing
		unix.Munmap(mem)
		unix.Close(gfd)
		unix.Close(container)
	}}, nil
}
