package shm

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

func createMemfd(name string, size int) (*Region, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("shm: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "memfd:"+name)
	r, err := sizeAndMap(f, size)
	if err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}
